import { describe, expect, it } from 'vitest';
import { MASK_COST_DOCUMENT, MaskCheckError, measureMaskCost, percentile } from './mask-cost';
import { LLAMA3_VOCAB, SyntheticTokenizer, specialCount, syntheticVocab } from './synthetic-vocab';
import { byteVocabOrder } from '../testing/fixtures/bpe-train';

describe('the synthetic vocabulary', () => {
  it("has Llama 3's 128,256 distinct ids: the 256 byte symbols first, 256 special tokens last, EOS among them", () => {
    const v = syntheticVocab();
    expect(v.tokens).toHaveLength(LLAMA3_VOCAB);
    expect(new Set(v.tokens).size).toBe(LLAMA3_VOCAB);
    expect(v.tokens.slice(0, 256)).toEqual(byteVocabOrder());
    expect(v.specialStart).toBe(LLAMA3_VOCAB - 256);
    expect(v.tokens.slice(v.specialStart).every((t) => /^<\|.+\|>$/.test(t))).toBe(true);
    expect(v.eosIds.map((id) => v.tokens[id])).toEqual(['<|end_of_text|>', '<|eot_id|>']);
    // Byte-level alphabet: spaces are Ġ, no raw space or newline in a regular token.
    expect(v.tokens.slice(0, v.specialStart).some((t) => /[ \n]/.test(t))).toBe(false);
    expect(v.tokens).toContain('Ġthe');
  });

  it('is the same for the same size, and scales its special tokens down for small vocabularies', () => {
    expect(syntheticVocab(2048).tokens).toEqual(syntheticVocab(2048).tokens);
    expect(specialCount(2048)).toBe(32);
    expect(syntheticVocab(2048).tokens).toHaveLength(2048);
    expect(() => syntheticVocab(100)).toThrow(RangeError);
  });

  it('tokenizes by greedy longest match and decodes back exactly, multi-byte characters included', () => {
    const tok = new SyntheticTokenizer(syntheticVocab(8192));
    const text = MASK_COST_DOCUMENT + ' Ünïcödé 漢字\n\t😀';
    const ids = tok.encode(text);
    expect(tok.decode(ids)).toBe(text);
    expect(ids.every((id) => !tok.specialIds.has(id))).toBe(true);
    expect(tok.encode(' quick')).toEqual([tok.tokenToId('Ġquick')]);
    expect(tok.decode([tok.eosIds[0]!, ...tok.encode('a')], { skipSpecialTokens: true })).toBe('a');
  });
});

describe('the mask cost measurement', () => {
  it('times one mask per document token, every step checked', async () => {
    const r = await measureMaskCost({ vocabSize: 4096, passes: 1 });
    const tokens = new SyntheticTokenizer(syntheticVocab(4096)).encode(MASK_COST_DOCUMENT).length;
    expect(r).toMatchObject({ vocab: 4096, tokens });
    expect(r.p50Ms).toBeLessThanOrEqual(r.p95Ms);
    expect(r.p95Ms).toBeLessThanOrEqual(r.maxMs);
    expect([r.compileMs, r.meanMs, r.p50Ms, r.p95Ms, r.maxMs].every((x) => Number.isFinite(x) && x >= 0)).toBe(true);
  });

  it('fails at the step where a document leaves the schema, and when it ends too early', async () => {
    const bad = MASK_COST_DOCUMENT.replace('"active":true', '"active":"yes"');
    const err = await measureMaskCost({ vocabSize: 4096, document: bad, passes: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MaskCheckError);
    expect((err as MaskCheckError).message).toMatch(/forbids token/);
    const prefix = new SyntheticTokenizer(syntheticVocab(4096)).encode(MASK_COST_DOCUMENT.slice(0, MASK_COST_DOCUMENT.indexOf('"active"'))).length;
    expect((err as MaskCheckError).step).toBeGreaterThanOrEqual(prefix);

    const cut = MASK_COST_DOCUMENT.slice(0, -1);
    await expect(measureMaskCost({ vocabSize: 4096, document: cut, passes: 0 })).rejects.toThrow(/does not let it end/);
  });

  it('takes percentiles by nearest rank', () => {
    const xs = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(xs, 0.95)).toBe(95);
    expect(percentile(xs, 0.5)).toBe(50);
    expect(percentile([7], 0.95)).toBe(7);
    expect(percentile([], 0.5)).toBeNaN();
  });
});
