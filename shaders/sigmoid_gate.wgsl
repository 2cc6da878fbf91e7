// Gated attention's output gate (Qwen3.5): x[t, i] *= sigmoid(g[t, i]) over the n values of each
// token's attention output, in place. A 2D grid: x covers the n columns, y is the row (a token of
// the step), so the token count rides on the dispatch.
alias act = f32;

override WG: u32 = 64;

struct Params {
  n: u32,  // values per row (heads × head_dim)
}

@group(0) @binding(0) var<storage, read_write> x: array<act>;  // [T, n]
@group(0) @binding(1) var<storage, read> g: array<act>;        // [T, n]
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let j = gid.y * p.n + i;
  x[j] = act(f32(x[j]) / (1.0 + exp(-f32(g[j]))));
}
