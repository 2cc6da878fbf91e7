import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../model/config';
import { ropeInvFreqs } from './rope';

const config = {
  headDim: 64,
  ropeTheta: 500000,
  ropeScaling: null,
} as unknown as ModelConfig;

const llama3 = { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 } as const;

/**
 * llama.cpp's converter writes Llama 3 scaling as per-frequency divisors (rope_freqs.weight):
 * 1 for short wavelengths, `factor` for long ones, 1 / ((1 - s) / factor + s) in between.
 */
function converterFactors(): Float32Array {
  const { factor, lowFreqFactor: lo, highFreqFactor: hi, originalMaxPositionEmbeddings: old } = llama3;
  return Float32Array.from({ length: 32 }, (_, i) => {
    const wavelen = (2 * Math.PI) / 500000 ** (-(2 * i) / 64);
    if (wavelen < old / hi) return 1;
    if (wavelen > old / lo) return factor;
    const s = (old / wavelen - lo) / (hi - lo);
    return 1 / ((1 - s) / factor + s);
  });
}

describe('RoPE inverse frequencies', () => {
  it('are theta^(-2i/d) without scaling', () => {
    const inv = ropeInvFreqs(config);
    expect(inv).toHaveLength(32);
    expect(inv[0]).toBe(1);
    expect(inv[1]).toBeCloseTo(500000 ** (-2 / 64), 15);
  });

  it('keep high frequencies, divide low ones by factor and blend between under llama3 scaling', () => {
    const plain = ropeInvFreqs(config);
    const scaled = ropeInvFreqs({ ...config, ropeScaling: llama3 });
    expect(scaled[0]).toBe(plain[0]);
    expect(scaled[31]).toBeCloseTo(plain[31] / 32, 20);
    // some frequency lies in the blended band, strictly between the two
    const blended = [...scaled].filter((v, i) => v < plain[i] && v > plain[i] / 32);
    expect(blended.length).toBeGreaterThan(0);
  });

  it('equal the GGUF rope_freqs divisors the llama.cpp converter computes for the same scaling', () => {
    const fromConfig = ropeInvFreqs({ ...config, ropeScaling: llama3 });
    const fromFactors = ropeInvFreqs(config, converterFactors());
    for (let i = 0; i < 32; i++) expect(fromFactors[i] / fromConfig[i]).toBeCloseTo(1, 6);
  });

  it('divide every frequency by the factor under linear scaling', () => {
    const plain = ropeInvFreqs(config);
    const scaled = ropeInvFreqs({ ...config, ropeScaling: { type: 'linear', factor: 4 } });
    for (let i = 0; i < 32; i++) expect(scaled[i]).toBeCloseTo(plain[i] / 4, 15);
  });
});
