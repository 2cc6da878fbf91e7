// Split-K attention, pass 2 of 2: merges attn_decode's splits of each (token, head).
// With split maxima m_s, sums l_s and unnormalised outputs o_s: M = max m_s, w_s = exp(m_s - M),
// out = sum w_s o_s / sum w_s l_s. Empty splits carry l_s = 0, o_s = 0 and weigh nothing.
alias act = f32;

override WG: u32 = 32;
override NSPLITS: u32 = 1;

struct Params {
  nHeads: u32,
  d4: u32,  // headDim / 4
}

@group(0) @binding(0) var<storage, read> partialO: array<vec4f>;   // [T, nHeads, NSPLITS, d4]
@group(0) @binding(1) var<storage, read> partialML: array<vec2f>;  // [T, nHeads, NSPLITS]
@group(0) @binding(2) var<storage, read_write> out: array<vec4<act>>;  // [T, nHeads, d4]
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> weights: array<f32, NSPLITS>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) lid: u32) {
  let row = wg.y * p.nHeads + wg.x;  // (token, head)
  let base = row * NSPLITS;
  var mMax = partialML[base].x;
  for (var s = 1u; s < NSPLITS; s++) { mMax = max(mMax, partialML[base + s].x); }
  for (var s = lid; s < NSPLITS; s += WG) { weights[s] = exp(partialML[base + s].x - mMax); }
  workgroupBarrier();
  var total = 0.0;
  for (var s = 0u; s < NSPLITS; s++) { total += weights[s] * partialML[base + s].y; }
  let inv = 1.0 / total;
  for (var d = lid; d < p.d4; d += WG) {
    var o = vec4f(0.0);
    for (var s = 0u; s < NSPLITS; s++) { o += weights[s] * partialO[(base + s) * p.d4 + d]; }
    out[row * p.d4 + d] = vec4<act>(o * inv);
  }
}
