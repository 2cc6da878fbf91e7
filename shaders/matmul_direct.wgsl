// Prefill linear layer for CPU-emulated adapters (SwiftShader): y[t, n] = sum_k x[t, k] * W[n, k]
// (+ bias[n]) with no workgroup memory and no barriers. On SwiftShader a barrier turns every
// 4-lane subgroup into a coroutine, shared memory is plain memory reached through extra copies,
// and a private array indexed in a loop lives in memory; so the tiled kernel (matmul.wgsl) pays
// for staging that buys nothing on a CPU. Here each thread owns 4 weight rows × 8 tokens, all
// in named registers (fixed, not overrides, so no loop indexes them): per K / 8 chunk
// (shaders/lib/dequant.wgsl) it dequantises the 4 rows once into two 4×4 matrices and multiplies
// each token's two x quads by them. Accumulation is f32 whatever `act` is. Needs
// shaders/lib/dequant.wgsl and shaders/lib/linear.wgsl in front. Grid: x over groups of
// 4 × THREADS rows, y over groups of 8 tokens (matmulGrid in src/kernels/matmul.ts).
alias act = f32;

override THREADS: u32 = 16; // threads per workgroup, each 4 rows (along n)

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let T = counts.tokens;
  let n0 = (wid.x * THREADS + lid) * 4u;
  let m0 = wid.y * 8u;
  if (n0 >= p.n || m0 >= T) { return; }

  // Rows past n and tokens past T read a valid row / token and write nothing.
  let last = p.n - 1u;
  let r0 = n0 * p.row_words;
  let r1 = min(n0 + 1u, last) * p.row_words;
  let r2 = min(n0 + 2u, last) * p.row_words;
  let r3 = min(n0 + 3u, last) * p.row_words;
  let k4 = p.k >> 2u;
  let x0 = m0 * k4;
  let x1 = min(m0 + 1u, T - 1u) * k4;
  let x2 = min(m0 + 2u, T - 1u) * k4;
  let x3 = min(m0 + 3u, T - 1u) * k4;
  let x4 = min(m0 + 4u, T - 1u) * k4;
  let x5 = min(m0 + 5u, T - 1u) * k4;
  let x6 = min(m0 + 6u, T - 1u) * k4;
  let x7 = min(m0 + 7u, T - 1u) * k4;

  // acc<i>[j]: token m0 + i, row n0 + j.
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  var acc4 = vec4f(0.0);
  var acc5 = vec4f(0.0);
  var acc6 = vec4f(0.0);
  var acc7 = vec4f(0.0);
  let chunks = p.k >> 3u;
  for (var c = 0u; c < chunks; c++) {
    let q0 = dq_chunk(r0, p.k, c);
    let q1 = dq_chunk(r1, p.k, c);
    let q2 = dq_chunk(r2, p.k, c);
    let q3 = dq_chunk(r3, p.k, c);
    // Columns: row j's quad; x · M = the 4 rows' dot products with x. Every row's chunk c covers
    // the same columns (the map depends on WTYPE only).
    let ma = mat4x4f(q0.a, q1.a, q2.a, q3.a);
    let mb = mat4x4f(q0.b, q1.b, q2.b, q3.b);
    let ia = q0.pa >> 2u;
    let ib = q0.pb >> 2u;
    acc0 += vec4f(x[x0 + ia]) * ma + vec4f(x[x0 + ib]) * mb;
    acc1 += vec4f(x[x1 + ia]) * ma + vec4f(x[x1 + ib]) * mb;
    acc2 += vec4f(x[x2 + ia]) * ma + vec4f(x[x2 + ib]) * mb;
    acc3 += vec4f(x[x3 + ia]) * ma + vec4f(x[x3 + ib]) * mb;
    acc4 += vec4f(x[x4 + ia]) * ma + vec4f(x[x4 + ib]) * mb;
    acc5 += vec4f(x[x5 + ia]) * ma + vec4f(x[x5 + ib]) * mb;
    acc6 += vec4f(x[x6 + ia]) * ma + vec4f(x[x6 + ib]) * mb;
    acc7 += vec4f(x[x7 + ia]) * ma + vec4f(x[x7 + ib]) * mb;
  }

  store4(m0, n0, acc0, T);
  store4(m0 + 1u, n0, acc1, T);
  store4(m0 + 2u, n0, acc2, T);
  store4(m0 + 3u, n0, acc3, T);
  store4(m0 + 4u, n0, acc4, T);
  store4(m0 + 5u, n0, acc5, T);
  store4(m0 + 6u, n0, acc6, T);
  store4(m0 + 7u, n0, acc7, T);
}

// Token t, rows n0..n0+3, skipping what lies past T or n.
fn store4(t: u32, n0: u32, v: vec4f, T: u32) {
  if (t >= T) { return; }
  for (var j = 0u; j < 4u; j++) {
    if (n0 + j < p.n) { store_y(t, n0 + j, v[j]); }
  }
}
