// Decode-oriented linear layer: y[t, n] = sum_k x[t, k] * W[n, k] (+ bias[n]) for a few tokens.
// Each workgroup owns ROWS_PER_WG weight rows; the WG / ROWS_PER_WG threads of a row split its
// K / 8 chunks (shaders/lib/dequant.wgsl), so neighbouring threads read neighbouring words. Each
// chunk is dequantised once and dotted with up to MAX_T tokens held in registers; more tokens
// take further passes over the weights. Partial sums meet in workgroup memory. Accumulation is
// f32 whatever `act` is. Needs shaders/lib/dequant.wgsl (WTYPE, dq_chunk) and
// shaders/lib/linear.wgsl (bindings, HAS_BIAS, store_y) in front.
//
// NORM folds the RMSNorm before the layer into it: y = W · (x / rms(x) ⊙ norm_w), with
// rms(x) = sqrt(mean(x²) + NORM_EPS) per token. Every workgroup recomputes its tokens' sums of
// squares from x (a few KB, in cache after the first), the weight chunks are scaled by norm_w
// and each token's dot products by 1 / rms(x) before the store; so the norm costs no dispatch
// and its output no round trip through memory (nor, in f16, a rounding).
alias act = f32;

override NORM: bool = false;
override NORM_EPS: f32 = 1e-6;
@group(0) @binding(6) var<storage, read> norm_w: array<f32>; // [k] (a 4-byte dummy without NORM)

override WG: u32 = 64;
override ROWS_PER_WG: u32 = 2;  // WG / ROWS_PER_WG must be a power of two, at least MAX_T
override MAX_T: u32 = 1;        // tokens per pass over the weights, 1..T_CAP
override TPR: u32 = WG / ROWS_PER_WG; // threads per row (derived; do not set)
override PARTIALS: u32 = WG * MAX_T;  // workgroup floats (derived; do not set)

const T_CAP: u32 = 8u; // register accumulators per thread

var<workgroup> partial: array<f32, PARTIALS>; // [MAX_T][WG]
var<workgroup> inv_rms: array<f32, T_CAP>;    // NORM: 1 / rms(x) of the pass's tokens

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3u,
  @builtin(num_workgroups) nwg: vec3u,
  @builtin(local_invocation_index) lid: u32,
) {
  // Large N spills the row groups into y of the grid (65535 workgroups per dimension).
  let first = (wid.x + wid.y * nwg.x) * ROWS_PER_WG;
  let T = counts.tokens;
  if (first >= p.n) { return; }

  let lane = lid % TPR;
  let row = first + lid / TPR;
  // Rows past n (in the last group) still run the loop, on a valid row, to keep the barriers
  // uniform; they write nothing.
  let rw = min(row, p.n - 1u) * p.row_words;
  let chunks = p.k >> 3u;
  let k4 = p.k >> 2u;

  for (var t0 = 0u; t0 < T; t0 += MAX_T) {
    if (NORM) {
      // The whole workgroup sums each token's squares (WG is a power of two).
      for (var t = 0u; t < MAX_T; t++) {
        var ss = 0.0;
        if (t0 + t < T) {
          for (var i = lid; i < k4; i += WG) {
            let v = vec4f(x[(t0 + t) * k4 + i]);
            ss += dot(v, v);
          }
        }
        partial[t * WG + lid] = ss;
      }
      workgroupBarrier();
      for (var s = WG >> 1u; s > 0u; s >>= 1u) {
        if (lid < s) {
          for (var t = 0u; t < MAX_T; t++) { partial[t * WG + lid] += partial[t * WG + lid + s]; }
        }
        workgroupBarrier();
      }
      if (lid < MAX_T) { inv_rms[lid] = inverseSqrt(partial[lid * WG] / f32(p.k) + NORM_EPS); }
      workgroupBarrier();
    }
    var acc = array<f32, T_CAP>(); // explicitly zeroed per pass (SwiftShader kept the last pass's values)
    for (var c = lane; c < chunks; c += TPR) {
      var q = dq_chunk(rw, c);
      if (NORM) {
        q.a *= vec4f(norm_w[q.pa], norm_w[q.pa + 1u], norm_w[q.pa + 2u], norm_w[q.pa + 3u]);
        q.b *= vec4f(norm_w[q.pb], norm_w[q.pb + 1u], norm_w[q.pb + 2u], norm_w[q.pb + 3u]);
      }
      let ia = q.pa >> 2u;
      let ib = q.pb >> 2u;
      for (var t = 0u; t < MAX_T; t++) {
        if (t0 + t < T) {
          let xo = (t0 + t) * k4;
          acc[t] += dot(q.a, vec4f(x[xo + ia])) + dot(q.b, vec4f(x[xo + ib]));
        }
      }
    }
    for (var t = 0u; t < MAX_T; t++) {
      if (NORM) { acc[t] *= inv_rms[t]; }
      partial[t * WG + lid] = acc[t];
    }
    workgroupBarrier();
    for (var s = TPR >> 1u; s > 0u; s >>= 1u) {
      if (lane < s) {
        for (var t = 0u; t < MAX_T; t++) { partial[t * WG + lid] += partial[t * WG + lid + s]; }
      }
      workgroupBarrier();
    }
    // Lane t of each row writes token t0 + t.
    if (row < p.n && lane < MAX_T && t0 + lane < T) {
      store_y(t0 + lane, row, partial[lane * WG + lid - lane]);
    }
    workgroupBarrier();
  }
}
