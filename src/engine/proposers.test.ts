/** The proposers of speculative decoding: their lookups on small sequences. */
import { describe, expect, it } from 'vitest';
import { DraftProposer, findAfter, NgramProposer, PredictionProposer, proposerFor } from './proposers';

describe('proposers', () => {
  it('finds where a tail occurs: the first end at or after `from`, else the last before it', () => {
    const src = [1, 2, 3, 1, 2, 4, 1, 2];
    expect(findAfter(src, [9, 1, 2], 2, 0)).toBe(2);
    expect(findAfter(src, [9, 1, 2], 2, 3)).toBe(5);
    expect(findAfter(src, [9, 1, 2], 2, 9)).toBe(8);
    expect(findAfter(src, [9, 1, 2], 2, 9, 7)).toBe(5);
    expect(findAfter(src, [7], 1, 0)).toBe(-1);
  });

  it('proposes a prediction from its start, then from where the output re-aligns with it after an edit', () => {
    const p = new PredictionProposer([10, 11, 12, 13, 14, 15, 16]);
    const prompt = [1, 2];
    expect(p.propose(prompt, 0, 3)).toEqual([10, 11, 12]);
    expect(p.propose([...prompt, 10, 11], 2, 3)).toEqual([12, 13, 14]);
    // The output inserted 99 then went on with 13: the lookup finds 13 and proposes what follows it.
    expect(p.propose([...prompt, 10, 11, 12, 99, 13], 5, 8)).toEqual([14, 15, 16]);
    // A token the prediction does not hold: no guess.
    expect(p.propose([...prompt, 10, 11, 12, 99, 13, 77], 6, 8)).toEqual([]);
  });

  it('looks the last n tokens up in the prompt and output (the most recent occurrence), down to one token', () => {
    const ng = new NgramProposer(2, 3);
    expect(ng.propose([5, 6, 7, 8, 5, 6, 9, 9, 5, 6], 0, 10)).toEqual([9, 9, 5]);
    expect(ng.propose([5, 6, 7, 8, 4, 7], 0, 10)).toEqual([8, 4, 7]);
    expect(ng.propose([5, 6, 7, 8, 5, 6, 9, 9, 5, 6], 0, 2)).toEqual([9, 9]);
    expect(ng.propose([1, 2, 3], 0, 4)).toEqual([]);
  });

  it('makes no proposer unless asked, and a prediction wins over n-gram lookup', () => {
    expect(proposerFor(undefined)).toBeNull();
    expect(proposerFor({ prediction: [] })).toBeNull();
    expect(proposerFor({ prediction: [1], ngram: { n: 2, k: 2 } })).toBeInstanceOf(PredictionProposer);
    expect(proposerFor({ ngram: { n: 2, k: 2 } })).toBeInstanceOf(NgramProposer);
  });

  it("hands out a draft model's guess only for the tokens it was prepared for, at most its own count; its stream closes with it", async () => {
    const asked: Array<[number, number]> = [];
    let closed = 0;
    const stream = { draft: async (ids: readonly number[], count: number) => (asked.push([ids.length, count]), Array.from({ length: count }, (_, i) => 100 + ids.length + i)), close: () => closed++ };
    const drafter = { tokens: 3, open: () => stream };
    const p = proposerFor({ draft: drafter })!;
    expect(p).toBeInstanceOf(DraftProposer);
    expect(p.propose([1, 2], 0, 8)).toEqual([]);
    await p.prepare!([1, 2], 0, 8);
    await p.prepare!([1, 2], 0, 8);
    expect(asked).toEqual([[2, 3]]);
    expect(p.propose([1, 2], 0, 8)).toEqual([102, 103, 104]);
    expect(p.propose([1, 2], 0, 2)).toEqual([102, 103]);
    expect(p.propose([1, 2, 102], 1, 8)).toEqual([]);
    p.close!();
    expect(closed).toBe(1);
  });
});
