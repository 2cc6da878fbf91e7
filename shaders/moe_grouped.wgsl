// Grouped routed linear layer of a mixture of experts, for a prefill: the gather of
// moe_matvec.wgsl (y[s] = W[ids[s]] · x[⌊s / K⌋] for each slot s = t·K + j), one workgroup per
// expert and group of ROWS_PER_WG rows, over the slots routed to that expert (moe_sort.wgsl's
// order and offsets). Each thread dequantises its chunks of the expert's rows once per TILE slots
// and takes their dot products with the TILE slots' x, so a step reads each expert's rows
// ⌈slots / TILE⌉ times instead of once per slot. W holds experts [e0, e1) (a stack split by
// experts: one dispatch per part, grid y = its experts). Accumulation is f32 whatever `act` is.
// Needs shaders/lib/dequant.wgsl in front.
alias act = f32;

override WG: u32 = 64;
override ROWS_PER_WG: u32 = 2;  // WG / ROWS_PER_WG must be a power of two
override TPR: u32 = WG / ROWS_PER_WG; // threads per row (derived; do not set)
override K: u32 = 2;            // experts per token
const TILE: u32 = 4u;           // slots per pass over the weights

struct Params {
  k: u32,         // elements per weight row = per token of x (a multiple of 8)
  n: u32,         // rows per expert = elements per slot of y
  row_words: u32, // u32 words per weight row in the GPU layout
  e0: u32,        // first expert `w` holds
  e1: u32,        // one past the last expert `w` holds
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [e1 - e0][n][row_words]
@group(0) @binding(1) var<storage, read> x: array<vec4<act>>;        // [T][k/4]
@group(0) @binding(2) var<storage, read_write> y: array<act>;        // [T·K][n]
@group(0) @binding(3) var<storage, read> order: array<u32>;          // [T·K] slots by expert
@group(0) @binding(4) var<storage, read> offsets: array<u32>;        // [E + 1]
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG * TILE>;
var<workgroup> span: vec2u; // this expert's first slot in `order`, and its slot count

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let first = wid.x * ROWS_PER_WG;
  let e = p.e0 + wid.y;
  if (first >= p.n || e >= p.e1) { return; }
  if (lid == 0u) { span = vec2u(offsets[e], offsets[e + 1u] - offsets[e]); }
  // The slot count, uniform across the workgroup, bounds the loop that holds the barriers.
  let sp = workgroupUniformLoad(&span);

  let lane = lid % TPR;
  let row = first + lid / TPR;
  // Rows past n (in the last group) still run the loop, on a valid row, to keep the barriers
  // uniform; they write nothing.
  let rr = min(row, p.n - 1u);
  let chunks = p.k >> 3u;
  let k4 = p.k >> 2u;
  let rw = ((e - p.e0) * p.n + rr) * p.row_words;

  for (var base = 0u; base < sp.y; base += TILE) {
    var xo: array<u32, TILE>;
    for (var t = 0u; t < TILE; t++) {
      // A tile's missing slots repeat its first (computed, never written).
      let i = select(base, base + t, base + t < sp.y);
      xo[t] = (order[sp.x + i] / K) * k4;
    }
    // Zeroed explicitly each tile (SwiftShader kept the last tile's sums in a bare `var acc`).
    var acc = array<f32, TILE>();
    for (var c = lane; c < chunks; c += TPR) {
      let q = dq_chunk(rw, p.k, c);
      for (var t = 0u; t < TILE; t++) {
        acc[t] += dot(q.a, vec4f(x[xo[t] + (q.pa >> 2u)])) + dot(q.b, vec4f(x[xo[t] + (q.pb >> 2u)]));
      }
    }
    for (var t = 0u; t < TILE; t++) { partial[t * WG + lid] = acc[t]; }
    workgroupBarrier();
    for (var st = TPR >> 1u; st > 0u; st >>= 1u) {
      if (lane < st) {
        for (var t = 0u; t < TILE; t++) { partial[t * WG + lid] += partial[t * WG + lid + st]; }
      }
      workgroupBarrier();
    }
    if (row < p.n && lane == 0u) {
      for (var t = 0u; t < TILE; t++) {
        if (base + t < sp.y) { y[order[sp.x + base + t] * p.n + row] = act(partial[t * WG + lid]); }
      }
    }
    workgroupBarrier();
  }
}
