/**
 * The step of LFM2's short convolution (ShortConvConfig), shared by the CPU reference forward pass
 * and the short_conv kernel's reference (src/kernels/short-conv.ts), as routeTopK is for MoE.
 */

/**
 * One step of a causal depthwise convolution over `taps` taps with its state: out[c] =
 * Σ_j w[c, j] · u_j[c], where u_0 .. u_{taps-2} are the state's rows (the inputs before this one,
 * oldest first) and u_{taps-1} is `u`; then the state drops its oldest row and takes `u`.
 * w is [channels, taps], the state [(taps - 1), channels].
 */
export function shortConvStep(state: Float32Array, u: Float32Array, w: Float32Array, taps: number, out: Float32Array): void {
  const n = u.length;
  for (let c = 0; c < n; c++) {
    let s = w[c * taps + taps - 1] * u[c];
    for (let j = 0; j < taps - 1; j++) s += w[c * taps + j] * state[j * n + c];
    out[c] = s;
  }
  state.copyWithin(0, n);
  state.set(u, (taps - 2) * n);
}
