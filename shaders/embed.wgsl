// Token embedding gather: x[t, :] = scale * row tokens[t] of the embedding table, dequantised from any
// weight type (WTYPE) by shaders/lib/dequant.wgsl, which is concatenated in front of this text
// and reads the table as `w`. A 2D grid: x covers the row in quads of 4 columns (dq_quad's
// unit), y is the token, so the token count rides on the dispatch and the uniform is static.
// A table split by rows (larger than one binding) is one dispatch per part: each writes the
// tokens whose row it holds and leaves the others to their parts.
alias act = f32;
// x's element type: f32 for the residual stream at every precision (Specialisation.f32).
alias x_t = act;

override WG: u32 = 64;

struct Params {
  n: u32,           // elements per row (hidden size), a multiple of 4
  rowWords: u32,    // u32 words per table row in the GPU layout
  vocab: u32,       // rows in the table: larger ids are clamped to the last row, never read out of bounds
  scale: f32,       // each row is multiplied by this (Gemma: sqrt(hidden size)); 1 elsewhere
  row0: u32,        // the table row that `w`'s row 0 is (0 unless the table is split)
  rows: u32,        // rows in `w`: this dispatch writes only tokens in [row0, row0 + rows)
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> tokens: array<u32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> x: array<x_t>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let col = 4u * gid.x;
  if (col >= p.n) { return; }
  let t = gid.y;
  let row = min(tokens[t], p.vocab - 1u);
  if (row < p.row0 || row - p.row0 >= p.rows) { return; }
  let v = dq_quad((row - p.row0) * p.rowWords, p.n, col) * p.scale;
  let o = t * p.n + col;
  x[o] = x_t(v.x);
  x[o + 1u] = x_t(v.y);
  x[o + 2u] = x_t(v.z);
  x[o + 3u] = x_t(v.w);
}
