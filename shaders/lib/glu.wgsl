// The gated MLP's activation of the gate, by the ACT specialisation: 0 SwiGLU's
// silu(g) = g / (1 + exp(-g)); 1 GeGLU's GELU with the tanh approximation,
// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (Gemma's gelu_pytorch_tanh). Shared by
// swiglu.wgsl and the linear kernels' GLU epilogue (shaders/lib/linear.wgsl), so the two agree.

override ACT: u32 = 0u;  // 0: silu, 1: gelu (tanh approximation)

fn activate(g: f32) -> f32 {
  if (ACT == 1u) {
    // tanh's argument clamped: tanh(±10) is ±1 in f32, and no backend meets exp overflow.
    let inner = clamp(0.7978845608028654 * (g + 0.044715 * g * g * g), -10.0, 10.0);
    return 0.5 * g * (1.0 + tanh(inner));
  }
  // exp(-g) overflows to inf for g < -88: g / inf = -0, the right limit.
  return g / (1.0 + exp(-g));
}
