// Routed linear layer of a mixture of experts: reads only the weight rows of the experts each
// token was routed to (ids from moe_route.wgsl), never the others. W is every expert's [n][k]
// matrix stacked, [E][n][k], in any weight type (shaders/lib/dequant.wgsl). Two modes:
//   gather  (COMBINE false): one output row per (token, slot): y[t·K + j] = W[ids[t·K + j]] · x[t]
//            (the experts' gate and up projections; grid y = T·K).
//   combine (COMBINE true):  one output row per token, the routing weights applied in the
//            epilogue: y[t] = Σ_j weights[t·K + j] · W[ids[t·K + j]] · x[t·K + j]
//            (+ sigmoid(shared_gate[t]) · shared_y[t] with HAS_SHARED: Qwen2-MoE's shared
//            expert) (the experts' down projection; grid y = T).
// A workgroup owns ROWS_PER_WG rows of one item; the WG / ROWS_PER_WG threads of a row split its
// K / 8 chunks (as matvec.wgsl) and their partial sums meet in workgroup memory. Accumulation is
// f32 whatever `act` is. Needs shaders/lib/dequant.wgsl in front.
// A stack larger than one binding is split by experts into parts, one dispatch each: `w` holds
// experts [e0, e1) and a dispatch reads only the slots routed there. gather: the owning part writes
// a slot's row, the others skip it. combine: the first part stores its share (and the shared
// expert), the later ones add theirs (`add`); dispatches of a pass see each other's writes. A
// combine into the residual stream adds from every part (`add` on all; the shared expert with
// the part of expert 0).
alias act = f32;
// Held at f32 in the f16 path where they are (Specialisation.f32): x, combine's act(gate)·up
// (real models' GLU products pass 65504); y, combine's output, the residual stream or the branch
// before its post-norm; shared_y, the shared expert's output, a branch of the stream too.
alias x_t = act;
alias y_t = act;
alias sy_t = act;

override WG: u32 = 64;
override ROWS_PER_WG: u32 = 2;  // WG / ROWS_PER_WG must be a power of two
override TPR: u32 = WG / ROWS_PER_WG; // threads per row (derived; do not set)
override K: u32 = 2;            // experts per token
override COMBINE: bool = false;
override HAS_SHARED: bool = false;

struct Params {
  k: u32,         // elements per weight row = per item of x (a multiple of 8)
  n: u32,         // rows per expert = elements per item of y
  row_words: u32, // u32 words per weight row in the GPU layout
  e0: u32,        // first expert `w` holds
  e1: u32,        // one past the last expert `w` holds
  add: u32,       // combine: 1 adds into y (a later part of a split stack, or y the residual stream), 0 stores
  _pad0: u32,
  _pad1: u32,
}

struct Step {
  tokens: u32,
  seqs: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [e1 - e0][n][row_words]
@group(0) @binding(1) var<storage, read> x: array<vec4<x_t>>;        // gather [T][k/4]; combine [T·K][k/4]
@group(0) @binding(2) var<storage, read_write> y: array<y_t>;        // gather [T·K][n]; combine [T][n]
@group(0) @binding(3) var<storage, read> ids: array<u32>;            // [T·K]
@group(0) @binding(4) var<storage, read> weights: array<f32>;        // [T·K]
@group(0) @binding(5) var<storage, read> shared_y: array<sy_t>;       // [T][n], read with HAS_SHARED
@group(0) @binding(6) var<storage, read> shared_gate: array<act>;    // [T], read with HAS_SHARED
@group(0) @binding(7) var<uniform> p: Params;
@group(0) @binding(8) var<uniform> counts: Step;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let first = wid.x * ROWS_PER_WG;
  let item = wid.y;
  let items = select(counts.tokens * K, counts.tokens, COMBINE);
  if (item >= items || first >= p.n) { return; }

  let lane = lid % TPR;
  let row = first + lid / TPR;
  // Rows past n (in the last group) still run the loop, on a valid row, to keep the barriers
  // uniform; they write nothing.
  let rr = min(row, p.n - 1u);
  let chunks = p.k >> 3u;
  let k4 = p.k >> 2u;
  let slots = select(1u, K, COMBINE);

  var acc = 0.0;
  // gather: whether this part holds the slot's expert (the whole workgroup agrees: one item).
  var owned = false;
  for (var j = 0u; j < slots; j++) {
    let s = select(item, item * K + j, COMBINE);
    let e = ids[s];
    if (e < p.e0 || e >= p.e1) { continue; }
    owned = true;
    let rw = ((e - p.e0) * p.n + rr) * p.row_words;
    // gather: every slot of token item / K reads that token's x; combine: each slot its own row.
    let xo = select(item / K, s, COMBINE) * k4;
    var d = 0.0;
    for (var c = lane; c < chunks; c += TPR) {
      let q = dq_chunk(rw, p.k, c);
      d += dot(q.a, vec4f(x[xo + (q.pa >> 2u)])) + dot(q.b, vec4f(x[xo + (q.pb >> 2u)]));
    }
    acc += select(d, weights[s] * d, COMBINE);
  }
  partial[lid] = acc;
  workgroupBarrier();
  for (var st = TPR >> 1u; st > 0u; st >>= 1u) {
    if (lane < st) { partial[lid] += partial[lid + st]; }
    workgroupBarrier();
  }
  if (row < p.n && lane == 0u && (COMBINE || owned)) {
    var v = partial[lid];
    if (p.add != 0u) {
      v += f32(y[item * p.n + row]);
    }
    if (HAS_SHARED && p.e0 == 0u) {
      let g = f32(shared_gate[item]);
      v += f32(shared_y[item * p.n + row]) / (1.0 + exp(-g));
    }
    y[item * p.n + row] = y_t(v);
  }
}
