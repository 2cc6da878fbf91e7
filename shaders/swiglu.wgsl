// Gated MLP activation: out[t, i] = act(gate[t, i]) * up[t, i] in f32, act by the ACT
// specialisation: 0 SwiGLU's silu(g) = g / (1 + exp(-g)); 1 GeGLU's GELU with the tanh
// approximation, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (Gemma's gelu_pytorch_tanh).
// A 2D grid: x covers the n columns of a token, y is the token, so the token count rides on the
// dispatch and the uniform is static. Gate and up may be the two halves of one fused [T, 2n]
// projection: each has its own row stride and element offset.
alias act = f32;

override WG: u32 = 64;
override ACT: u32 = 0u;  // 0: silu, 1: gelu (tanh approximation)

struct Params {
  n: u32,          // elements per token in out (the intermediate size)
  gateStride: u32, // elements between consecutive tokens' rows of gate
  upStride: u32,   // elements between consecutive tokens' rows of up
  gateOffset: u32, // element offset of token 0's gate row
  upOffset: u32,   // element offset of token 0's up row
}

@group(0) @binding(0) var<storage, read> gate: array<act>;
@group(0) @binding(1) var<storage, read> up: array<act>;
@group(0) @binding(2) var<storage, read_write> out: array<act>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.n) { return; }
  let t = gid.y;
  let g = f32(gate[p.gateOffset + t * p.gateStride + i]);
  let u = f32(up[p.upOffset + t * p.upStride + i]);
  out[t * p.n + i] = act(activate(g) * u);
}

fn activate(g: f32) -> f32 {
  if (ACT == 1u) {
    // tanh's argument clamped: tanh(±10) is ±1 in f32, and no backend meets exp overflow.
    let inner = clamp(0.7978845608028654 * (g + 0.044715 * g * g * g), -10.0, 10.0);
    return 0.5 * g * (1.0 + tanh(inner));
  }
  // exp(-g) overflows to inf for g < -88: g / inf = -0, the right limit.
  return g / (1.0 + exp(-g));
}
