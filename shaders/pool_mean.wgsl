// Mean pooling of each sequence's rows in a step (sentence-transformers' mean_tokens over an
// input alone: every token, special ones included): y[s, i] = mean of x[t, i] over sequence s's
// tokens lastToken[s-1]+1 ..= lastToken[s] (the step's tokens grouped by sequence in order), summed
// in f32. A 2D grid: x covers the n columns, y the sequences, so the uniform is static.
alias act = f32;
// x's element type: f32 when x is the residual stream, at every precision (Specialisation.f32).
alias x_t = act;

override WG: u32 = 64;

struct Params {
  n: u32,  // elements per row
}

@group(0) @binding(0) var<storage, read> x: array<x_t>;              // [T, n]
@group(0) @binding(1) var<storage, read> lastToken: array<u32>;      // [S] last token of each sequence
@group(0) @binding(2) var<storage, read_write> y: array<f32>;        // [S, n]
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let s = gid.y;
  let first = select(0u, lastToken[s - 1u] + 1u, s > 0u);
  let last = lastToken[s];
  var sum = 0.0;
  for (var t = first; t <= last; t++) { sum += f32(x[t * p.n + i]); }
  y[s * p.n + i] = sum / f32(last + 1u - first);
}
