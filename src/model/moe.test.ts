import { describe, expect, it } from 'vitest';
import { routeTopK } from './moe';

describe('routeTopK', () => {
  const logits = [0.5, 2, -1, 2, 1];
  const probs = (() => {
    const e = logits.map((v) => Math.exp(v));
    const s = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / s);
  })();

  it('keeps the k most probable experts, equal ones by ascending id, with their softmax probabilities', () => {
    const r = routeTopK(logits, 3, false);
    expect(r.ids).toEqual([1, 3, 4]);
    r.weights.forEach((w, j) => expect(w).toBeCloseTo(probs[r.ids[j]!]!, 12));
  });

  it('renormalises the k weights to sum 1 when asked (Qwen3-MoE), keeping their ratios', () => {
    const r = routeTopK(logits, 2, true);
    expect(r.ids).toEqual([1, 3]);
    expect(r.weights).toEqual([0.5, 0.5]);
    const three = routeTopK(logits, 3, true);
    expect(three.weights.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
    expect(three.weights[0]! / three.weights[2]!).toBeCloseTo(probs[1]! / probs[4]!, 12);
  });

  it('refuses k outside 1..experts', () => {
    expect(() => routeTopK(logits, 0, false)).toThrow(RangeError);
    expect(() => routeTopK(logits, 6, false)).toThrow(RangeError);
  });
});
