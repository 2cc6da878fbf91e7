import type { ModelConfig } from './config';

/**
 * Inverse frequency of each rotated pair i (headDim/2 of them): theta^(-2i/headDim), then
 * scaled as the config says. Float64, so the reference is at least as exact as HF's float32.
 *
 * `freqFactors` (GGUF `rope_freqs.weight`) are llama.cpp's precomputed divisors for Llama 3
 * scaling; when given they replace the config's scaling (the metadata carries none then).
 */
export function ropeInvFreqs(config: ModelConfig, freqFactors?: Float32Array): Float64Array {
  const { headDim, ropeTheta, ropeScaling } = config;
  const half = headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(ropeTheta, (2 * i) / headDim);

  if (freqFactors) {
    if (freqFactors.length !== half) throw new RangeError(`rope_freqs has ${freqFactors.length} factors, expected headDim/2 = ${half}`);
    for (let i = 0; i < half; i++) inv[i] /= freqFactors[i];
  } else if (ropeScaling?.type === 'linear') {
    for (let i = 0; i < half; i++) inv[i] /= ropeScaling.factor;
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

/**
 * Rotates each head of `vec` (numHeads x headDim, in place) by position `pos`.
 * neox pairs (i, i + headDim/2); interleaved pairs (2i, 2i + 1). Pair i turns by pos * invFreq[i].
 */
export function applyRope(
  vec: Float32Array,
  numHeads: number,
  headDim: number,
  pos: number,
  invFreq: Float64Array,
  style: 'neox' | 'interleaved',
): void {
  const half = headDim / 2;
  for (let h = 0; h < numHeads; h++) {
    const base = h * headDim;
    for (let i = 0; i < half; i++) {
      const angle = pos * invFreq[i];
      const cos = Math.cos(angle);
      const sin = Math.sin(angle);
      const a = style === 'neox' ? base + i : base + 2 * i;
      const b = style === 'neox' ? base + i + half : base + 2 * i + 1;
      const x0 = vec[a];
      const x1 = vec[b];
      vec[a] = x0 * cos - x1 * sin;
      vec[b] = x0 * sin + x1 * cos;
    }
  }
}
