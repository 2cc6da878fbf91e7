/**
 * The bidirectional reference (EmbeddingGemma) against what can be checked without it: the
 * symmetric window's positions by hand, the causal reference where the two must agree (a 1-layer
 * model's last token sees the same keys both ways), the window's reach through a whole pass, and
 * mean pooling + Dense + L2 by hand.
 */
import { describe, expect, it } from 'vitest';
import { PLAIN_MATH, type ModelConfig } from '../model/config';
import type { DenseModule } from '../model/embedding';
import { assembleWeights } from '../model/tensors';
import { randomWeights } from '../testing/random-weights';
import { bidirectionalEmbedding, bidirectionalHidden, symmetricWindowSees } from './bidirectional';
import { logitsFor, matmul, ReferenceModel } from './forward';

// A 1-layer gemma3: sandwich (1 + w) norms, scaled embedding, GeGLU, per-head q/k norms, tied.
const GEMMA3: ModelConfig = {
  arch: 'gemma3',
  vocabSize: 11,
  hiddenSize: 8,
  intermediateSize: 6,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 4,
  rmsNormEps: 1e-6,
  ropeTheta: 100,
  ropeScaling: null,
  ropeStyle: 'neox',
  maxPositionEmbeddings: 32,
  tieWordEmbeddings: true,
  attentionBias: false,
  qkNorm: true,
  slidingWindow: null,
  noRopeLayers: [],
  qkNormScope: 'head',
  normPlacement: 'sandwich',
  ...PLAIN_MATH,
  normWeightOffset: 1,
  embeddingScale: Math.sqrt(8),
  ffnActivation: 'gelu_tanh',
  attentionScale: 0.9,
  bosTokenId: null,
  eosTokenIds: [],
};

const ids = [3, 1, 4, 1, 5, 9];
const weightsOf = (c: ModelConfig, seed: number) => {
  const m = randomWeights(c, seed);
  return { map: m, w: assembleWeights<Float32Array, Float32Array>(c, (t) => m.get(t.name)) };
};
const row = (rows: Float32Array, t: number, dim: number) => rows.subarray(t * dim, (t + 1) * dim);
const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i])));

describe('symmetric window', () => {
  it('lets a token see floor(W/2) positions each side: W = 4 and 5 at position 5 see 3..7', () => {
    const seen = (w: number | null) => [...Array(10).keys()].filter((k) => symmetricWindowSees(5, k, w));
    expect(seen(4)).toEqual([3, 4, 5, 6, 7]);
    expect(seen(5)).toEqual([3, 4, 5, 6, 7]);
    expect(seen(1)).toEqual([5]);
    expect(seen(null)).toEqual([...Array(10).keys()]);
  });

  it("is HF's mask |q - k| < W//2 + 1 (Gemma3TextConfig when bidirectional)", () => {
    for (let w = 1; w <= 9; w++) for (let d = -10; d <= 10; d++) expect(symmetricWindowSees(10, 10 + d, w)).toBe(Math.abs(d) < Math.floor(w / 2) + 1);
  });
});

describe('bidirectional pass', () => {
  // The last token's tied logits from the bidirectional rows, beside the causal reference's.
  const lastLogits = (c: ModelConfig, seed: number, causal: ModelConfig) => {
    const { map, w } = weightsOf(c, seed);
    const rows = bidirectionalHidden(c, w, ids);
    const logits = (t: number) => {
      const out = new Float32Array(c.vocabSize);
      matmul(out, row(rows, t, c.hiddenSize), w.tokenEmbd);
      return out;
    };
    return { bi: logits, causal: logitsFor(ReferenceModel.fromWeights(causal, map), ids) };
  };

  it("equals the causal reference at a 1-layer model's last token (full attention), and not at the first", () => {
    const { bi, causal } = lastLogits(GEMMA3, 7, GEMMA3);
    expect(maxDiff(bi(ids.length - 1), causal[ids.length - 1])).toBeLessThan(1e-5);
    expect(maxDiff(bi(0), causal[0])).toBeGreaterThan(1e-3);
  });

  it('equals the causal reference with a W/2 + 1 window at the last token of a windowed layer with its own RoPE base', () => {
    const c: ModelConfig = { ...GEMMA3, slidingWindow: { size: 4, layers: [0] }, ropeLocalTheta: 7 };
    const { bi, causal } = lastLogits(c, 9, { ...c, slidingWindow: { size: 3, layers: [0] } });
    expect(maxDiff(bi(ids.length - 1), causal[ids.length - 1])).toBeLessThan(1e-5);
    // and the causal window of 4 keys is a different model
    const { causal: wide } = lastLogits(c, 9, c);
    expect(maxDiff(bi(ids.length - 1), wide[ids.length - 1])).toBeGreaterThan(1e-3);
  });

  it('lets the first token of a W = 4 layer see tokens 1 and 2 but not 3', () => {
    const c: ModelConfig = { ...GEMMA3, slidingWindow: { size: 4, layers: [0] } };
    const { w } = weightsOf(c, 5);
    const first = (input: number[]) => row(bidirectionalHidden(c, w, input), 0, c.hiddenSize);
    const base = first(ids);
    expect(maxDiff(first([3, 1, 4, 7, 5, 9]), base)).toBe(0);
    expect(maxDiff(first([3, 1, 7, 1, 5, 9]), base)).toBeGreaterThan(1e-4);
  });
});

describe('bidirectional embedding', () => {
  it('is the rows mean-pooled, through Dense 2 and Dense 3 (Identity), L2-normalised', () => {
    const { w } = weightsOf(GEMMA3, 3);
    const rows = bidirectionalHidden(GEMMA3, w, ids);
    const m = [0, 1].map((i) => ids.reduce((s, _, t) => s + rows[t * 8 + i] / ids.length, 0));
    // Dense 2 picks coordinates 0 and 1, Dense 3 is [[1, 1], [0, 2]]: [m0 + m1, 2 m1], then L2.
    const dense: DenseModule[] = [
      { name: 'dense_2', inFeatures: 8, outFeatures: 2, bias: false, activation: 'identity' },
      { name: 'dense_3', inFeatures: 2, outFeatures: 2, bias: false, activation: 'identity' },
    ];
    const pick = new Float32Array(16);
    pick[0] = pick[9] = 1;
    const got = bidirectionalEmbedding(GEMMA3, w, dense, [{ weight: pick }, { weight: new Float32Array([1, 1, 0, 2]) }], ids);
    const want = [m[0] + m[1], 2 * m[1]];
    const n = Math.hypot(...want);
    expect(maxDiff(got, want.map((v) => v / n))).toBeLessThan(1e-6);
  });
});
