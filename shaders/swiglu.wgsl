// Gated MLP activation: out[t, i] = activate(gate[t, i]) * up[t, i] in f32, the activation (ACT)
// from shaders/lib/glu.wgsl, concatenated in front.
// A 2D grid: x covers the n columns of a token, y is the token, so the token count rides on the
// dispatch and the uniform is static. Gate and up may be the two halves of one fused [T, 2n]
// projection: each has its own row stride and element offset.
alias act = f32;
// The product's type: f32 in the f16 path too where the engine keeps it so (outliers of real
// models' MLPs pass 65504), src/kernels/swiglu.ts `outF32`.
alias out_t = act;

override WG: u32 = 64;

struct Params {
  n: u32,          // elements per token in out (the intermediate size)
  gateStride: u32, // elements between consecutive tokens' rows of gate
  upStride: u32,   // elements between consecutive tokens' rows of up
  gateOffset: u32, // element offset of token 0's gate row
  upOffset: u32,   // element offset of token 0's up row
}

@group(0) @binding(0) var<storage, read> gate: array<act>;
@group(0) @binding(1) var<storage, read> up: array<act>;
@group(0) @binding(2) var<storage, read_write> out: array<out_t>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let t = gid.y;
  let g = f32(gate[p.gateOffset + t * p.gateStride + i]);
  let u = f32(up[p.upOffset + t * p.upStride + i]);
  out[t * p.n + i] = out_t(activate(g) * u);
}
