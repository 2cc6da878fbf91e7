import { describe, expect, it } from 'vitest';
import {
  applyDry,
  applyFrequencyPresence,
  applyLogitBias,
  applyRepetitionPenalty,
  deriveSeed,
  filterAndDraw,
  logprobsOf,
  Mirostat,
  TokenSampler,
} from './logit-processors';
import type { SamplingParams } from './types';

const base: SamplingParams = {
  temperature: 1, topP: 1, topK: 0, minP: 0, seed: 1, frequencyPenalty: 0, presencePenalty: 0, repetitionPenalty: 1,
  logitBias: {}, dry: { multiplier: 0, base: 1.75, allowedLength: 2, sequenceBreakers: [] }, mirostat: { mode: 0, tau: 5, eta: 0.1 },
  topLogprobs: 0, logprobs: false,
};

describe('logit processors', () => {
  it('adds logit_bias to the named ids and ignores ids outside the vocabulary', () => {
    const l = new Float32Array([1, 2, 3]);
    applyLogitBias(l, { 0: 5, 2: -100, 9: 1 });
    expect([...l]).toEqual([6, 2, -97]);
  });

  it('divides positive and multiplies negative logits of seen tokens by the repetition penalty', () => {
    const l = new Float32Array([2, -2, 2]);
    applyRepetitionPenalty(l, [0, 1, 1], 2);
    expect([...l]).toEqual([1, -4, 2]);
  });

  it('subtracts count·frequency + presence for generated tokens', () => {
    const l = new Float32Array([0, 0, 0]);
    applyFrequencyPresence(l, [0, 0, 2], 0.5, 1);
    expect([...l]).toEqual([-2, 0, -1.5]);
  });

  it('penalises the token that would extend a repeat, growing with the match length, not across breakers', () => {
    // history: 5 6 7 9 5 6 7 → the tail "5 6 7" occurred before, followed by 9.
    const l = new Float32Array(10);
    applyDry(l, [5, 6, 7, 9, 5, 6, 7], { multiplier: 1, base: 2, allowedLength: 2 }, () => false);
    expect(l[9]).toBeCloseTo(-2); // match of 3: 1·2^(3−2)
    expect([...l].filter((x) => x !== 0)).toHaveLength(1);
    const broken = new Float32Array(10);
    applyDry(broken, [5, 6, 7, 9, 5, 6, 7], { multiplier: 1, base: 2, allowedLength: 2 }, (id) => id === 6);
    expect([...broken].every((x) => x === 0)).toBe(true);
  });

  it('is greedy at temperature 0 and reproducible for a seed', () => {
    const l = new Float32Array([0.1, 0.5, 0.3, 0.2]);
    expect(filterAndDraw(l, { ...base, temperature: 0 }, 1, 0)).toBe(1);
    const draws = (seed: number) => Array.from({ length: 32 }, (_, step) => filterAndDraw(l, base, seed, step));
    expect(draws(3)).toEqual(draws(3));
    expect(draws(3)).not.toEqual(draws(4));
    // top-k 1 is greedy whatever the draw.
    expect(new Set(Array.from({ length: 16 }, (_, s) => filterAndDraw(l, { ...base, topK: 1 }, 7, s)))).toEqual(new Set([1]));
  });

  it('mirostat 2 keeps the draws within the tokens of surprise ≤ mu', () => {
    const l = new Float32Array([5, 4, 0, -5, -10]);
    const m = new Mirostat(2, 0.5, 0.1);
    const seen = new Set(Array.from({ length: 50 }, (_, s) => m.sample(l, 1, (s * 0.618) % 1)));
    expect(seen.has(4)).toBe(false);
    expect(seen.has(0)).toBe(true);
  });

  it('gives each choice its own seed stream but keeps the seed for choice 0', () => {
    expect(deriveSeed(42, 0)).toBe(42);
    expect(deriveSeed(42, 1)).not.toBe(deriveSeed(42, 2));
  });

  it('bans ids before min_tokens and returns log-softmax logprobs of the raw logits', () => {
    const l = new Float32Array([0, 10, 0]);
    const s = new TokenSampler({ ...base, temperature: 0 }, { promptIds: [] });
    expect(s.sample(l, [1])).not.toBe(1);
    const lp = logprobsOf(l, 1, 2);
    const lse = Math.log(Math.exp(0) * 2 + Math.exp(10));
    expect(lp.logprob).toBeCloseTo(10 - lse, 6);
    expect(lp.top.map((t) => t.id)).toEqual([1, 0]);
  });
});
