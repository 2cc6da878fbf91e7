// Residual add: x[t, i] += scale * y[t, i], summed in f32 (scale: Granite's residual_multiplier, else 1); with BROADCAST a
// bias, y[i] (an encoder matrix that runs without its own). A 2D grid: x covers the n columns of a token,
// y is the token, so the token count rides on the dispatch and the uniform is static.
alias act = f32;
// x's element type: f32 for the residual stream at every precision (Specialisation.f32).
alias x_t = act;
// y's element type: f32 for a branch output kept at f32 (o/down before Granite's scale), at every precision.
alias y_t = act;

override WG: u32 = 64;
// y is one row of n, added to every token's (a bias: y_t f32): x[t, i] += scale * y[i].
override BROADCAST: bool = false;

struct Params {
  n: u32,      // elements per token
  scale: f32,  // multiplies the branch y
}

@group(0) @binding(0) var<storage, read_write> x: array<x_t>;
@group(0) @binding(1) var<storage, read> y: array<y_t>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let j = gid.y * p.n + i;
  x[j] = x_t(f32(x[j]) + p.scale * f32(y[select(j, i, BROADCAST)]));
}
