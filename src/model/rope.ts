import { defaultContextLength, rotaryDim, type ModelConfig } from './config';

/**
 * Inverse frequency of each rotated pair i (rotaryDim/2 of them; rotaryDim is the whole head
 * unless the model rotates only part of it, Phi-4-mini): theta^(-2i/rotaryDim), then scaled as
 * the config says. Float64, so the reference is at least as exact as HF's float32.
 *
 * YaRN blends each frequency with itself over `factor` along yarnRamp (fixed: no context switch).
 *
 * `freqFactors` (GGUF `rope_freqs.weight`) are llama.cpp's precomputed divisors for Llama 3
 * scaling; when given they replace the config's scaling (the metadata carries none then).
 *
 * LongRoPE (Phi-3/4) divides by its long factors when the engine's context exceeds the original
 * context, by its short ones otherwise: llama.cpp's rule, fixed for a context. transformers instead
 * switches per forward call on the current sequence length, which re-rotates new keys but not the
 * cached ones; a fixed choice keeps every cached key consistent. `contextLength` is the engine's
 * context (default `defaultContextLength(config)`, what the engine takes when none is asked for).
 */
export function ropeInvFreqs(
  config: Pick<ModelConfig, 'headDim' | 'rotaryDim' | 'ropeTheta' | 'ropeScaling' | 'maxPositionEmbeddings'>,
  freqFactors?: Float32Array,
  contextLength?: number,
): Float64Array {
  const { ropeTheta, ropeScaling } = config;
  const dim = rotaryDim(config);
  const half = dim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(ropeTheta, (2 * i) / dim);

  if (freqFactors) {
    if (freqFactors.length !== half) throw new RangeError(`rope_freqs has ${freqFactors.length} factors, expected rotary dims/2 = ${half}`);
    for (let i = 0; i < half; i++) inv[i] /= freqFactors[i];
  } else if (ropeScaling?.type === 'linear') {
    for (let i = 0; i < half; i++) inv[i] /= ropeScaling.factor;
  } else if (ropeScaling?.type === 'longrope') {
    const factors = longRopeFactors(ropeScaling, contextLength ?? defaultContextLength(config));
    if (factors.length !== half) throw new RangeError(`LongRoPE has ${factors.length} factors, expected rotary dims/2 = ${half}`);
    for (let i = 0; i < half; i++) inv[i] /= factors[i]!;
  } else if (ropeScaling?.type === 'yarn') {
    const ramp = yarnRamp(ropeScaling, ropeTheta, dim);
    for (let i = 0; i < half; i++) inv[i] = (inv[i] / ropeScaling.factor) * ramp[i]! + inv[i] * (1 - ramp[i]!);
  } else if (ropeScaling?.type === 'llama3') {
    // As transformers' _compute_llama3_parameters: long wavelengths are divided by `factor`,
    // short ones kept, and the band between blended by a smooth factor.
    const { factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings: oldLen } = ropeScaling;
    const lowFreqWavelen = oldLen / lowFreqFactor;
    const highFreqWavelen = oldLen / highFreqFactor;
    for (let i = 0; i < half; i++) {
      const wavelen = (2 * Math.PI) / inv[i];
      if (wavelen > lowFreqWavelen) inv[i] = inv[i] / factor;
      else if (wavelen >= highFreqWavelen) {
        const smooth = (oldLen / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
        inv[i] = ((1 - smooth) * inv[i]) / factor + smooth * inv[i];
      }
    }
  }
  return inv;
}

/** LongRoPE's factor set for a context: the long one past the original context, else the short one (llama.cpp). */
export function longRopeFactors(s: Extract<ModelConfig['ropeScaling'], { type: 'longrope' }>, contextLength: number): readonly number[] {
  return contextLength > s.originalMaxPositionEmbeddings ? s.longFactor : s.shortFactor;
}

/**
 * YaRN's ramp over the rotated pairs (transformers' _compute_yarn_parameters; ggml's
 * rope_yarn_ramp): 0 where a pair turns more than betaFast times within the original context
 * (kept: extrapolated), 1 where it turns fewer than betaSlow times (divided by factor:
 * interpolated), linear between. Pair i turns origCtx / (2π) · theta^(-2i/dim) times, so the pair
 * that turns b times is dim · ln(origCtx / (2π b)) / (2 ln theta); truncated, the low end is
 * floored and the high one ceiled, both kept within [0, dim - 1].
 */
export function yarnRamp(s: Extract<ModelConfig['ropeScaling'], { type: 'yarn' }>, theta: number, dim: number): Float64Array {
  const pairAt = (turns: number) => (dim * Math.log(s.originalMaxPositionEmbeddings / (2 * Math.PI * turns))) / (2 * Math.log(theta));
  let [low, high] = [pairAt(s.betaFast), pairAt(s.betaSlow)];
  if (s.truncate) [low, high] = [Math.floor(low), Math.ceil(high)];
  [low, high] = [Math.max(low, 0), Math.min(high, dim - 1)];
  // transformers' guard against a zero-width ramp.
  if (low === high) high += 0.001;
  return Float64Array.from({ length: dim / 2 }, (_, i) => Math.min(1, Math.max(0, (i - low) / (high - low))));
}

/**
 * What cos and sin are multiplied by (LongRoPE's and YaRN's attention factor: q·k grows by its
 * square, on the rotated dimensions); 1 for every other scaling.
 */
export function ropeAttentionFactor(config: Pick<ModelConfig, 'ropeScaling'>): number {
  const s = config.ropeScaling;
  return s?.type === 'longrope' || s?.type === 'yarn' ? s.attentionFactor : 1;
}

/**
 * Rotates each head of `vec` (numHeads x headDim, in place) by position `pos`: its first
 * 2 * invFreq.length dimensions (the rotary ones), the rest passing through.
 * neox pairs (i, i + rotary/2); interleaved pairs (2i, 2i + 1). Pair i turns by pos * invFreq[i]
 * and is multiplied by `mscale` (LongRoPE's and YaRN's attention factor; 1 elsewhere).
 */
export function applyRope(
  vec: Float32Array,
  numHeads: number,
  headDim: number,
  pos: number,
  invFreq: Float64Array,
  style: 'neox' | 'interleaved',
  mscale = 1,
): void {
  const half = invFreq.length;
  for (let h = 0; h < numHeads; h++) {
    const base = h * headDim;
    for (let i = 0; i < half; i++) {
      const angle = pos * invFreq[i];
      const cos = Math.cos(angle) * mscale;
      const sin = Math.sin(angle) * mscale;
      const a = style === 'neox' ? base + i : base + 2 * i;
      const b = style === 'neox' ? base + i + half : base + 2 * i + 1;
      const x0 = vec[a];
      const x1 = vec[b];
      vec[a] = x0 * cos - x1 * sin;
      vec[b] = x0 * sin + x1 * cos;
    }
  }
}

/** YaRN's magnitude correction 0.1·m·ln(scale) + 1 (1 at scale <= 1): transformers' and llama.cpp's get_mscale. */
export function yarnMscale(scale: number, m = 1): number {
  return scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1;
}
