// A causal depthwise convolution's window, shared by short_conv.wgsl (LFM2) and
// causal_conv_silu.wgsl (Qwen3.5's DeltaNet): one invocation per channel keeps the channel's taps
// and its last k = taps − 1 inputs (oldest first) in registers while it walks a row's tokens.

// The longest kernel the arrays hold (LFM2: 3 taps; Qwen3.5: 4).
const MAX_TAPS: u32 = 8u;

// Σ_j wk[j] · window[j] + wk[k] · u over the k inputs before u; the window then moves on by u.
fn conv_window_step(wk: ptr<function, array<f32, MAX_TAPS>>, win: ptr<function, array<f32, MAX_TAPS>>, k: u32, u: f32) -> f32 {
  var acc = (*wk)[k] * u;
  for (var j = 0u; j < k; j++) { acc += (*wk)[j] * (*win)[j]; }
  for (var j = 0u; j + 1u < k; j++) { (*win)[j] = (*win)[j + 1u]; }
  if (k > 0u) { (*win)[k - 1u] = u; }
  return acc;
}
