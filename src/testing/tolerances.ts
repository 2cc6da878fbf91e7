/**
 * Tolerances shared by the kernel and engine tests and by `selfcheck` (src/selfcheck/), which runs
 * the same comparisons on a user's GPU: one source, so a check that passes there means what a
 * passing test means here. Each says why it is what it is.
 */
import type { Precision } from '../gpu/pipelines';

/**
 * Elementwise kernels, relative (maxRelDiff: relative for large values, absolute near zero). f16:
 * inputs are rounded alike on both sides, the output itself is rounded to f16 (2⁻¹¹) plus a few ulp.
 */
export const KERNEL_TOLERANCE = {
  // One f32 add (or multiply-add): exact to an ulp.
  add: { f32: 1e-7, f16: 1e-3 },
  // The dequantised row, scaled: a few ulp.
  embed: { f32: 1e-6, f16: 1e-3 },
  // f32 accumulation over ≤ 1000 elements: well under 1e-5 on O(1) outputs.
  rmsNorm: { f32: 1e-5, f16: 2e-3 },
  // cos/sin of an f32 angle times two inputs.
  rope: { f32: 1e-5, f16: 2e-3 },
  // One exp and a few multiplies per element.
  swiglu: { f32: 1e-6, f16: 2e-3 },
  // tanh of a scaled value.
  softcap: { f32: 1e-5, f16: 2e-3 },
  // f32 dots over ≤ 128 elements and softmax sums over ≤ 70 keys: ~1e-6; outputs are O(1).
  attention: { f32: 1e-5, f16: 2e-3 },
  // Two f32 reductions (mean, then squared deviations) over ≤ 1000 elements, as rmsNorm.
  layerNorm: { f32: 1e-5, f16: 2e-3 },
  // erf by a polynomial of error ≤ 1.5e-7 (Abramowitz and Stegun 7.1.26), an exp and a few f32 ulp.
  gelu: { f32: 1e-6, f16: 2e-3 },
  // An f32 sum of ≤ 40 rows and one division, stored f32 at every precision (f16 inputs are rounded alike on both sides).
  poolMean: { f32: 1e-6, f16: 1e-6 },
  // A few f32 multiply-adds per output (LFM2's 3 taps), times C; f16: y's own rounding.
  shortConv: { f32: 1e-6, f16: 2e-3 },
  // Qwen3.5's conv + SiLU: a few f32 multiply-adds and an exp per output; f16: y's own rounding.
  causalConvSilu: { f32: 1e-6, f16: 2e-3 },
  // The delta rule: f32 sums over a head dim per output, carried in an f32 state over a row's tokens; f16: inputs and y rounded.
  deltaRule: { f32: 1e-5, f16: 3e-3 },
  // Mamba-2's scan: f32 sums over the state size per output, carried in an f32 state over a row's tokens; f16: inputs and y rounded.
  mamba2Scan: { f32: 1e-5, f16: 3e-3 },
} as const satisfies Record<string, Record<Precision, number>>;

/**
 * A linear layer y = Wx with K inputs. The GPU sums K f32 products in another order than the f64
 * reference and rounds dequantised values in f32 (a few ulp per weight): worst case about
 * K · 2⁻²³ · max|x| · max|w|, typically √K · 2⁻²⁴. We allow 1e-5 · √K · max|x| · max|w|, still three
 * orders below one misplaced or mis-scaled weight (~|x||w|). For f16 activations the reference takes
 * the same f16-rounded x, and y is rounded to f16: plus 2⁻¹⁰ of |y|.
 */
export function linearTolerance(k: number, maxAbsX: number, maxAbsW: number, precision: Precision, ref: number): number {
  const base = 1e-5 * Math.sqrt(k) * maxAbsX * maxAbsW;
  return precision === 'f16' ? base + Math.abs(ref) * 2 ** -10 : base;
}

/**
 * The integer dot-product matvec against matvecDotRef (the activation quantised as the kernel does):
 * the float matvec's bound over the quantised x (scaled by a folded norm's 1/rms, `scale`), plus one
 * activation off by one int8 step (max d · max|w|): the GPU's 1 / d may round otherwise than the
 * reference's at a value that is a rounding tie. Both are far below one wrong weight's or block
 * scale's effect.
 */
export function integerDotTolerance(k: number, maxAbsXq: number, maxAbsW: number, maxD: number, scale = 1): number {
  return scale * (1e-5 * Math.sqrt(k) * maxAbsXq * maxAbsW + maxD * maxAbsW);
}

/** Whole-model logits, engine against the reference. f32: GPU and reference read the same dequantised weights; only summation order differs. */
export const LOGIT_TOLERANCE = 1e-3;
/**
 * f16 path: every activation is rounded to f16 (relative error 2^-11 ≈ 4.9e-4) after each op of
 * each layer, and the KV cache is f16. Measured on lavapipe: worst logit difference 0.037 (qwen2,
 * Q4_K_M) with logits up to 23 in magnitude; a wrong kernel moves logits by whole units. 0.1 ≈
 * 0.5% of the largest logit, with ~2.7× headroom over the worst measured case.
 */
export const F16_LOGIT_TOLERANCE = 0.1;
/**
 * The integer dot-product decode path (engine option integerDot): each decode matvec's input is
 * rounded to int8 per block of 32; measured 0.19–0.22 on the tiny llama in Q8_0 and Q4_K_M.
 */
export const INTEGER_DOT_LOGIT_TOLERANCE = 0.5;
