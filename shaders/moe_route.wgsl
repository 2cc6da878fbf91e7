// Mixture-of-experts routing, one token per thread: softmax over the E router logits of token t,
// the K most probable experts (most probable first; equal logits: the lower id first), their
// probabilities as weights, renormalised to sum 1 when NORM. ids and weights are [T][K]; the
// routed matvec (moe_matvec.wgsl) reads them. The logits come from the router's linear layer.
// Accumulation is f32 whatever `act` is. Reference: routeTopK in src/model/moe.ts.
alias act = f32;

override WG: u32 = 64;
override E: u32 = 4;        // experts
override K: u32 = 2;        // experts per token, 1..E
override NORM: bool = false;

struct Step {
  tokens: u32,
  seqs: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<act>;         // [T][E]
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;      // [T][K]
@group(0) @binding(2) var<storage, read_write> weights: array<f32>;  // [T][K]
@group(0) @binding(3) var<uniform> counts: Step;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let t = gid.x;
  if (t >= counts.tokens) { return; }
  let base = t * E;
  var mx = f32(logits[base]);
  for (var e = 1u; e < E; e++) { mx = max(mx, f32(logits[base + e])); }
  var sum = 0.0;
  for (var e = 0u; e < E; e++) { sum += exp(f32(logits[base + e]) - mx); }

  // K rounds, each taking the best expert ranked after the previous one in (logit descending, id
  // ascending) order: no per-thread list of taken experts is needed.
  var prev_v = 0.0;
  var prev_e = 0u;
  var kept = 0.0;
  for (var j = 0u; j < K; j++) {
    var best_e = E;
    var best_v = 0.0;
    for (var e = 0u; e < E; e++) {
      let v = f32(logits[base + e]);
      let after = j == 0u || v < prev_v || (v == prev_v && e > prev_e);
      if (after && (best_e == E || v > best_v)) {
        best_e = e;
        best_v = v;
      }
    }
    let pr = exp(best_v - mx) / sum;
    ids[t * K + j] = best_e;
    weights[t * K + j] = pr;
    kept += pr;
    prev_v = best_v;
    prev_e = best_e;
  }
  if (NORM) {
    for (var j = 0u; j < K; j++) { weights[t * K + j] /= kept; }
  }
}
