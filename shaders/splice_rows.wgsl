// Image embeddings spliced into the residual stream after the token embedding: each of the step's
// rows whose index is not NONE takes row index[t] of `rows` (the vision tower's output for an
// image-token position). f32 in and out (the stream is f32 at every precision). A 2D grid: x
// covers the n columns, y is the step's row, so the row count rides on the dispatch.
override WG: u32 = 64;

const NONE: u32 = 0xffffffffu;

struct Params {
  n: u32,  // elements per row (the hidden size)
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> rows: array<f32>;
@group(0) @binding(2) var<storage, read> index: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let r = index[gid.y];
  if (r == NONE) { return; }
  x[gid.y * p.n + i] = rows[r * p.n + i];
}
