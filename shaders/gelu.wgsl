// Exact GELU in place, as BERT's FFN uses it (PyTorch's GELU with approximate="none"):
//   x[t, i] = 0.5 · x · (1 + erf(x / √2))
// or, with TANH, the tanh approximation SigLIP's FFN uses (approximate="tanh", gelu_pytorch_tanh):
//   x[t, i] = 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))
// WGSL has no erf: Abramowitz and Stegun 7.1.26 (|error| ≤ 1.5e-7 on erf, below f32's
// resolution of GELU's 0.5 · x · (1 + erf)). A 2D grid as add.wgsl: the token count rides on the
// dispatch and the uniform is static.
alias act = f32;

override WG: u32 = 64;
override TANH: bool = false;

struct Params {
  n: u32,  // elements per token
}

@group(0) @binding(0) var<storage, read_write> x: array<act>;
@group(0) @binding(1) var<uniform> p: Params;

fn erf_as(v: f32) -> f32 {
  let a = abs(v);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign(v) * (1.0 - poly * exp(-a * a));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let j = gid.y * p.n + i;
  let v = f32(x[j]);
  if (TANH) {
    // tanh of a large argument is ±1 (WGSL's tanh is defined there): no overflow for any f32 x.
    x[j] = act(0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
  } else {
    x[j] = act(0.5 * v * (1.0 + erf_as(v * 0.70710678118654752)));
  }
}
