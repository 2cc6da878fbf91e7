// The interface shared by the linear-layer kernels (matvec.wgsl, matmul.wgsl): their bindings,
// uniforms and bias handling, so the two cannot drift apart (src/kernels/matmul.ts binds both with
// one buffer list). Concatenated in front of such a kernel, after shaders/lib/dequant.wgsl (which
// reads `w`) and shaders/lib/glu.wgsl (ACT, activate). The kernel itself declares
// `alias act = f32;` (the line the f16 variant rewrites).
//
// A gated MLP's gate and up projections go up as one matrix, their rows interleaved (gate row i is
// row 2i, up row i is row 2i + 1: engine/gpu-weights.ts), so one workgroup of the matvec holds a
// row pair and can store act(gate)·up itself (GLU). Where the product cannot be formed in the
// epilogue (prefill, LoRA-adapted steps that update gate and up before the activation), PAIRS
// stores the two rows apart, gate rows as segment 0 and up rows as segment 1.

// x's and y's element types: f32 where they are the residual stream (y under RESIDUAL; x with a
// folded norm, or an unnormed input), at every precision (Specialisation.f32); act otherwise.
alias x_t = act;
alias y_t = act;

override HAS_BIAS: bool = false;

struct Params {
  k: u32,         // elements per weight row = per token of x (a multiple of 8)
  n: u32,         // weight rows in `w` (one part's when the matrix is split by rows)
  row_words: u32, // u32 words per weight row in the GPU layout
  row0: u32,      // the matrix row that `w`'s row 0 is: the y column and bias index it writes (0 unless split)
  y_stride: u32,  // the whole matrix's rows (= n unless split): elements per token of y, in one segment
  // The matrix's rows may be up to 3 segments, each its own [T][rows] matrix somewhere in y (the q,
  // k and v of one fused projection, in their regions of one buffer):
  seg1: u32,      // first matrix row of segment 1 (y_stride when there is one segment)
  seg2: u32,      // first matrix row of segment 2 (y_stride when there are fewer)
  off0: u32,      // element offset in y of segment 0, [T][seg1]
  off1: u32,      // element offset in y of segment 1, [T][seg2 - seg1]
  off2: u32,      // element offset in y of segment 2, [T][y_stride - seg2]
  _pad0: u32,
  _pad1: u32,
}

// The per-step counts the engine writes once per step (src/engine/step.ts `counts`).
struct Step {
  tokens: u32, // T: tokens in this step = rows of x and y in use
  seqs: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;         // [n][row_words]
@group(0) @binding(1) var<storage, read> x: array<vec4<x_t>>;   // [T][k / 4]
@group(0) @binding(2) var<storage, read_write> y: array<y_t>;   // [T][y_stride]
@group(0) @binding(3) var<storage, read> bias: array<f32>;      // [y_stride], read when HAS_BIAS
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> counts: Step;

// Rows are interleaved (gate, up) pairs: row 2i goes to row i of segment 0, row 2i + 1 to row i of
// segment 1 (seg1 = y_stride / 2 = seg2).
override PAIRS: bool = false;
// Rows are interleaved (gate, up) pairs and y is [T][y_stride / 2]: y[t, i] = activate(gate) · up
// (store_glu; the kernel stores each pair from one thread, so its row groups are even).
override GLU: bool = false;

// Where matrix row r of token t lives in y.
fn y_index(t: u32, r: u32) -> u32 {
  if (PAIRS) {
    if ((r & 1u) == 0u) { return p.off0 + t * p.seg1 + (r >> 1u); }
    return p.off1 + t * p.seg1 + (r >> 1u);
  }
  if (r < p.seg1) { return p.off0 + t * p.seg1 + r; }
  if (r < p.seg2) { return p.off1 + t * (p.seg2 - p.seg1) + (r - p.seg1); }
  return p.off2 + t * (p.y_stride - p.seg2) + (r - p.seg2);
}

// RESIDUAL: y is the residual stream and the output is added into it (y += W·x + bias), so the o
// and down projections need no separate add dispatch.
override RESIDUAL: bool = false;

// y[t, row0 + n] = v + bias[row0 + n] for row n of `w` (or += under RESIDUAL): every output of a
// linear kernel goes through here, so a part of a split matrix writes its own columns of each
// token's row.
fn store_y(t: u32, n: u32, v: f32) {
  let r = p.row0 + n;
  var b = 0.0;
  if (HAS_BIAS) { b = bias[r]; }
  let i = y_index(t, r);
  if (RESIDUAL) {
    y[i] = y_t(f32(y[i]) + v + b);
  } else {
    y[i] = y_t(v + b);
  }
}

// GLU: matrix rows r (even: a gate row) and r + 1 (its up row) of token t are g and u (no bias:
// no gated MLP has one). The product is formed in f32 and rounded once.
fn store_glu(t: u32, r: u32, g: f32, u: f32) {
  y[t * (p.y_stride >> 1u) + (r >> 1u)] = y_t(activate(g) * u);
}
