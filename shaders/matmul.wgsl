// Prefill-oriented linear layer: y[t, n] = sum_k x[t, k] * W[n, k] (+ bias[n]) for many tokens.
// A workgroup computes a TILE_M (tokens) × TILE_N (weight rows) tile of y, walking K in steps of
// TILE_K: it stages the x tile (as `x_t`: f16 x stays f16, exactly, in half the memory) and the
// W tile dequantised once (f32, so weights keep their f32 dequantisation) in workgroup memory,
// k-major so the inner loop reads rows of both; then each thread accumulates a TM × TN
// micro-tile whose tokens / rows are strided by the thread grid (conflict-free reads, coalesced
// writes).
// Accumulation is f32 whatever `act` is. Needs shaders/lib/dequant.wgsl (WTYPE, dq_quad) and
// shaders/lib/linear.wgsl (bindings, HAS_BIAS, store_y) in front.
alias act = f32;

override TILE_M: u32 = 32; // tokens per tile
override TILE_N: u32 = 32; // weight rows per tile
override TILE_K: u32 = 32; // columns per step, a multiple of 4
override TM: u32 = 4;      // tokens per thread (≤ REG_CAP)
override TN: u32 = 4;      // rows per thread (≤ REG_CAP)
override WG_M: u32 = TILE_M / TM;        // thread grid (derived; do not set)
override WG_N: u32 = TILE_N / TN;
override WG: u32 = WG_M * WG_N;
override QUADS_K: u32 = TILE_K / 4u;     // 4-element groups per tile row (derived)
override XS_LEN: u32 = TILE_K * TILE_M;  // workgroup floats (derived)
override WS_LEN: u32 = TILE_K * TILE_N;

// Register arrays are sized by constants (WGSL allows override sizes only in workgroup memory):
// up to 8 × 8 per thread. With TM and TN pipeline constants the loops unroll and the unused
// entries fold away.
const REG_CAP: u32 = 8u;
const MICRO_CAP: u32 = REG_CAP * REG_CAP;

var<workgroup> xs: array<x_t, XS_LEN>; // [TILE_K][TILE_M]
var<workgroup> ws: array<f32, WS_LEN>; // [TILE_K][TILE_N]

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let T = counts.tokens;
  let n0 = wid.x * TILE_N;
  let m0 = wid.y * TILE_M;
  if (n0 >= p.n || m0 >= T) { return; }

  let tx = lid % WG_N;
  let ty = lid / WG_N;
  let k4 = p.k >> 2u;
  var acc: array<f32, MICRO_CAP>; // [TM][TN]

  for (var k0 = 0u; k0 < p.k; k0 += TILE_K) {
    // Stage x[m0.., k0..] and W[n0.., k0..]: consecutive threads take consecutive quads of a row.
    for (var q = lid; q < TILE_M * QUADS_K; q += WG) {
      let m = q / QUADS_K;
      let kq = q % QUADS_K;
      let k = k0 + 4u * kq;
      var v = vec4<x_t>(0.0);
      if (m0 + m < T && k < p.k) { v = x[(m0 + m) * k4 + (k >> 2u)]; }
      let at = 4u * kq * TILE_M + m;
      xs[at] = v.x;
      xs[at + TILE_M] = v.y;
      xs[at + 2u * TILE_M] = v.z;
      xs[at + 3u * TILE_M] = v.w;
    }
    for (var q = lid; q < TILE_N * QUADS_K; q += WG) {
      let n = q / QUADS_K;
      let kq = q % QUADS_K;
      let k = k0 + 4u * kq;
      var v = vec4f(0.0);
      if (n0 + n < p.n && k < p.k) { v = dq_quad((n0 + n) * p.row_words, p.k, k); }
      let at = 4u * kq * TILE_N + n;
      ws[at] = v.x;
      ws[at + TILE_N] = v.y;
      ws[at + 2u * TILE_N] = v.z;
      ws[at + 3u * TILE_N] = v.w;
    }
    workgroupBarrier();

    // A constant trip count (unrollable); past k the staged tiles hold zeros.
    for (var kk = 0u; kk < TILE_K; kk++) {
      var xv: array<f32, REG_CAP>;
      var wv: array<f32, REG_CAP>;
      for (var i = 0u; i < TM; i++) { xv[i] = f32(xs[kk * TILE_M + ty + i * WG_M]); }
      for (var j = 0u; j < TN; j++) { wv[j] = ws[kk * TILE_N + tx + j * WG_N]; }
      for (var i = 0u; i < TM; i++) {
        for (var j = 0u; j < TN; j++) { acc[i * TN + j] = fma(xv[i], wv[j], acc[i * TN + j]); }
      }
    }
    workgroupBarrier();
  }

  for (var j = 0u; j < TN; j++) {
    let n = n0 + tx + j * WG_N;
    if (n >= p.n) { continue; }
    for (var i = 0u; i < TM; i++) {
      let m = m0 + ty + i * WG_M;
      if (m < T) { store_y(m, n, acc[i * TN + j]); }
    }
  }
}
