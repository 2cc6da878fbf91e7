import { describe, expect, it } from 'vitest';
import { makeTokenizer } from '../testing/fixtures/tokenizer';
import type { Arch } from '../model/arch';
import { loadTokenizer, type TextTokenizer } from './tokenizer';
import { StreamingDetokenizer } from './detokenizer';
import { VARIED_TEXT } from './testdata/varied-text';

const ARCHES: Arch[] = ['qwen2', 'llama', 'mistral'];

/** Counts how many ids each decode call sees, to check the window stays small. */
function spy(tok: TextTokenizer): { tok: TextTokenizer; maxIds: () => number } {
  let max = 0;
  const wrapped = Object.create(tok) as TextTokenizer;
  wrapped.decode = (ids, o) => {
    max = Math.max(max, ids.length);
    return tok.decode(ids, o);
  };
  return { tok: wrapped, maxIds: () => max };
}

const noHalfCharacters = (s: string) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s) && !s.includes('\uFFFD');

describe.each(ARCHES)('streaming detokenizer on the %s tokenizer', (arch) => {
  const fx = makeTokenizer(arch);
  const base = loadTokenizer(fx.tokenizerJson, fx.tokenizerConfig);

  it('emits, token by token, exactly the full decode, never half a character, in a small window', () => {
    const ids = base.encode(VARIED_TEXT, { addSpecialTokens: false });
    const { tok, maxIds } = spy(base);
    const d = new StreamingDetokenizer(tok);
    const chunks = ids.map((id) => d.push(id));
    chunks.push(d.flush());
    expect(chunks.join('')).toBe(base.decode(ids));
    for (const c of chunks) expect(noHalfCharacters(c), JSON.stringify(c)).toBe(true);
    // Text came out as it went, not all at the end.
    expect(chunks.filter((c) => c.length > 0).length).toBeGreaterThan(ids.length / 2);
    expect(maxIds()).toBeLessThanOrEqual(12);
  });

  it('holds a character split across byte tokens until it is whole', () => {
    // Emoji are rare in the fixture corpus, so they arrive as several byte tokens.
    const ids = base.encode('a🚀b', { addSpecialTokens: false });
    const d = new StreamingDetokenizer(base);
    const chunks = ids.map((id) => d.push(id));
    expect(chunks.join('') + d.flush()).toBe('a🚀b');
    expect(chunks.some((c) => c.includes('🚀'))).toBe(true);
    for (const c of chunks) expect(noHalfCharacters(c)).toBe(true);
  });

  it('skips special tokens by default and keeps them when asked', () => {
    const ids = [...base.encode('hi there', { addSpecialTokens: false }), fx.eosId];
    const a = new StreamingDetokenizer(base);
    expect(ids.map((id) => a.push(id)).join('') + a.flush()).toBe('hi there');
    const b = new StreamingDetokenizer(base, { skipSpecialTokens: false });
    expect(ids.map((id) => b.push(id)).join('') + b.flush()).toBe(`hi there${fx.eosToken}`);
    const c = new StreamingDetokenizer(base, { keepSpecialIds: [fx.eosId] });
    expect(ids.map((id) => c.push(id)).join('') + c.flush()).toBe(`hi there${fx.eosToken}`);
  });

  it('flushes a broken trailing character as U+FFFD', () => {
    const ids = base.encode('🚀', { addSpecialTokens: false });
    if (ids.length < 2) return; // a whole-emoji token: nothing to break
    const d = new StreamingDetokenizer(base);
    expect(ids.slice(0, -1).map((id) => d.push(id)).join('')).not.toContain('\uFFFD');
    expect(d.flush()).toContain('\uFFFD');
  });
});

describe('streaming detokenizer with prompt context', () => {
  it('keeps the leading space of the first SentencePiece token after the prompt', () => {
    const fx = makeTokenizer('mistral');
    const tok = loadTokenizer(fx.tokenizerJson, fx.tokenizerConfig);
    const prompt = tok.encode('The cat', { addSpecialTokens: false });
    const out = tok.encode('The cat sat down', { addSpecialTokens: false }).slice(prompt.length);
    const d = new StreamingDetokenizer(tok, { context: prompt });
    expect(out.map((id) => d.push(id)).join('') + d.flush()).toBe(' sat down');
    const bare = new StreamingDetokenizer(tok);
    expect(out.map((id) => bare.push(id)).join('') + bare.flush()).toBe('sat down');
  });
});
