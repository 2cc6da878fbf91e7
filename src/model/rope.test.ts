import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../model/config';
import { ropeAttentionFactor, ropeInvFreqs } from './rope';

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

  /*
   * YaRN by hand (transformers' _compute_yarn_parameters): 16 rotary dims, theta 10000, original
   * context 64, factor 4. The pair turning b times in 64 positions is 16 ln(64 / (2π b)) / (2 ln 10000):
   * b = 32 gives -0.994 (floored: -1, kept at 0), b = 1 gives 2.016 (ceiled: 3). The ramp i / 3 over
   * the 8 pairs is 0, 1/3, 2/3, 1, 1, …, and each frequency is f (1 - r) + f r / 4: times 1, 3/4,
   * 1/2 and 1/4 from the fourth pair on. Untruncated the ramp is i / 2.016.
   */
  const yarn = { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 64, betaFast: 32, betaSlow: 1, attentionFactor: 1.1386, truncate: true } as const;
  const small = { headDim: 16, ropeTheta: 10000, ropeScaling: null } as unknown as ModelConfig;

  it('blend each frequency with itself over the factor along the YaRN ramp (hand-derived)', () => {
    const plain = ropeInvFreqs(small);
    const scaled = ropeInvFreqs({ ...small, ropeScaling: yarn });
    expect([...scaled].map((v, i) => v / plain[i]!)).toEqual([1, 0.75, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25].map((x) => expect.closeTo(x, 14)));
    const untruncated = ropeInvFreqs({ ...small, ropeScaling: { ...yarn, truncate: false } });
    const high = (16 * Math.log(64 / (2 * Math.PI))) / (2 * Math.log(10000));
    expect(high).toBeCloseTo(2.016, 3);
    for (let i = 0; i < 8; i++) expect(untruncated[i]! / plain[i]!).toBeCloseTo(1 - 0.75 * Math.min(1, i / high), 14);
    // cos and sin carry its attention factor, as LongRoPE's.
    expect(ropeAttentionFactor({ ropeScaling: yarn })).toBe(1.1386);
    expect(ropeAttentionFactor({ ropeScaling: { type: 'linear', factor: 4 } })).toBe(1);
  });

  it("ramp Qwen3's 128-dim heads between pairs 23 and 40 for its 131072-token recipe (theta 1e6, original 32768, factor 4)", () => {
    // 128 ln(32768 / (64π)) / (2 ln 1e6) = 23.60 → 23; 128 ln(32768 / (2π)) / (2 ln 1e6) = 39.65 → 40.
    const qwen3 = { headDim: 128, ropeTheta: 1e6, ropeScaling: null } as unknown as ModelConfig;
    const plain = ropeInvFreqs(qwen3);
    const scaled = ropeInvFreqs({ ...qwen3, ropeScaling: { ...yarn, originalMaxPositionEmbeddings: 32768 } });
    for (let i = 0; i < 64; i++) expect(scaled[i]! / plain[i]!).toBeCloseTo(1 - 0.75 * Math.min(1, Math.max(0, (i - 23) / 17)), 14);
  });

  it('divide every frequency by the factor under linear scaling', () => {
    const plain = ropeInvFreqs(config);
    const scaled = ropeInvFreqs({ ...config, ropeScaling: { type: 'linear', factor: 4 } });
    for (let i = 0; i < 32; i++) expect(scaled[i]).toBeCloseTo(plain[i] / 4, 15);
  });
});
