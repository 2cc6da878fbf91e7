import { describe, expect, it } from 'vitest';
import { makeTokenizer, type FixtureTokenizer } from '../testing/fixtures/tokenizer';
import type { Arch } from '../model/arch';
import { loadTokenizer } from './tokenizer';
import { loadGGUFTokenizer, mergesFromScores } from './gguf-tokenizer';
import { TokenizerError } from './errors';
import { VARIED_TEXT } from './testdata/varied-text';



const ARCHES: Arch[] = ['qwen2', 'qwen3', 'llama', 'mistral'];

/** The metadata a GGUF converter writes for this tokenizer (as the fixture writer does). */
function ggufMeta(tok: FixtureTokenizer): Record<string, unknown> {
  const m: Record<string, unknown> = {
    'tokenizer.ggml.model': tok.ggmlModel,
    'tokenizer.ggml.pre': tok.ggmlPre,
    'tokenizer.ggml.tokens': tok.tokens,
    'tokenizer.ggml.token_type': Int32Array.from(tok.tokenTypes),
    'tokenizer.ggml.eos_token_id': tok.eosId,
    'tokenizer.ggml.add_bos_token': tok.addBos,
    'tokenizer.ggml.add_eos_token': false,
    'tokenizer.chat_template': tok.tokenizerConfig.chat_template,
  };
  if (tok.scores) m['tokenizer.ggml.scores'] = Float32Array.from(tok.scores);
  if (tok.ggmlModel === 'gpt2') m['tokenizer.ggml.merges'] = tok.merges;
  if (tok.bosId !== null) m['tokenizer.ggml.bos_token_id'] = tok.bosId;
  if (tok.ggmlModel === 'llama') m['tokenizer.ggml.unknown_token_id'] = tok.special['<unk>'];
  return m;
}

describe.each(ARCHES)('the %s fixture tokenizer', (arch) => {
  const fx = makeTokenizer(arch);
  const hf = loadTokenizer(fx.tokenizerJson, fx.tokenizerConfig);
  const special = Object.keys(fx.special).find((s) => fx.special[s] !== fx.bosId && /im_end|eot_id|INST|<\/s>/.test(s)) ?? fx.eosToken;
  const withSpecial = `${VARIED_TEXT}${special}after`;

  it('round-trips the varied text', () => {
    const ids = hf.encode(VARIED_TEXT, { addSpecialTokens: false });
    const expected = arch === 'qwen2' || arch === 'qwen3' ? VARIED_TEXT.normalize('NFC') : VARIED_TEXT;
    expect(hf.decode(ids)).toBe(expected);
  });

  it('reports BOS, EOS and add_bos as the config says', () => {
    expect(hf.bosId).toBe(fx.tokenizerConfig.bos_token ? fx.bosId : null);
    expect(hf.addBos).toBe(fx.addBos);
    expect(hf.eosIds).toContain(fx.eosId);
    const ids = hf.encode('hi');
    expect(ids[0] === fx.bosId).toBe(fx.addBos);
    expect(hf.vocab.length).toBe(hf.vocabSize);
    expect(hf.vocab[fx.eosId]).toBe(fx.eosToken);
    expect(hf.specialIds.has(fx.eosId)).toBe(true);
  });

  it('parses special tokens only when asked', () => {
    const parsed = hf.encode(withSpecial, { addSpecialTokens: false });
    expect(parsed).toContain(fx.special[special]);
    const plain = hf.encode(withSpecial, { addSpecialTokens: false, parseSpecial: false });
    expect(plain).not.toContain(fx.special[special]);
    expect(hf.decode(plain)).toBe(hf.decode(parsed));
  });

  it('keeps special tokens literal only inside the literal ranges', () => {
    const text = `${special}user typed ${special} here${special}`;
    const at = text.indexOf(special, 1);
    const ids = hf.encode(text, { addSpecialTokens: false, literalRanges: [[at, at + special.length]] });
    expect(ids.filter((x) => x === fx.special[special]).length).toBe(2);
    expect(hf.decode(ids)).toBe(text);
  });

  it('encodes the same ids through the filtered path when nothing is filtered', () => {
    const direct = hf.encode(VARIED_TEXT, { addSpecialTokens: false });
    const filtered = hf.encode(VARIED_TEXT, { addSpecialTokens: false, literalRanges: [[0, 1]] });
    expect(filtered).toEqual(direct);
  });

  it('built from GGUF metadata alone gives the same ids as tokenizer.json', () => {
    const gg = loadGGUFTokenizer(ggufMeta(fx));
    expect(gg.warnings).toEqual([]);
    for (const text of [...VARIED_TEXT.split('\n'), VARIED_TEXT, withSpecial, ' leading space', '']) {
      expect(gg.encode(text), JSON.stringify(text)).toEqual(hf.encode(text));
      expect(gg.encode(text, { parseSpecial: false })).toEqual(hf.encode(text, { parseSpecial: false }));
    }
    // Qwen's tokenizer_config has no bos_token while its GGUF names one (never added).
    if (hf.addBos) expect(gg.bosId).toBe(hf.bosId);
    expect(gg.addBos).toBe(hf.addBos);
    expect(gg.vocab).toEqual(hf.vocab);
    expect([...gg.specialIds].sort()).toEqual([...hf.specialIds].sort());
    expect(gg.vocabType).toBe(hf.vocabType);
    expect(gg.decode(gg.encode(VARIED_TEXT))).toBe(hf.decode(hf.encode(VARIED_TEXT)));
  });
});

describe('GGUF tokenizer metadata', () => {
  it('rejects an unknown tokenizer model with a typed error naming the key', () => {
    expect(() => loadGGUFTokenizer({ 'tokenizer.ggml.model': 'rwkv', 'tokenizer.ggml.tokens': [] })).toThrow(TokenizerError);
    try {
      loadGGUFTokenizer({ 'tokenizer.ggml.model': 'rwkv' });
    } catch (e) {
      expect((e as TokenizerError).field).toBe('tokenizer.ggml.model');
    }
  });

  it('warns and falls back to GPT-2 splitting for an unknown pre-tokenizer', () => {
    const fx = makeTokenizer('qwen2');
    const gg = loadGGUFTokenizer({ ...ggufMeta(fx), 'tokenizer.ggml.pre': 'no-such-pre' });
    expect(gg.warnings[0]).toMatch(/no-such-pre/);
  });

  it('derives SentencePiece merges from scores, best-scored merged piece first', () => {
    const merges = mergesFromScores(['a', 'b', 'ab', 'abb', 'bb'], [1, 1, 1, 1, 1], [0, 0, -1, -3, -2]);
    expect(merges).toEqual([
      ['a', 'b'],
      ['b', 'b'],
      // two ways to make "abb": ordered by the left piece's id, as HF's converter does
      ['a', 'bb'],
      ['ab', 'b'],
    ]);
  });
});

describe('decode', () => {
  const fx = makeTokenizer('qwen2');
  const tok = loadTokenizer(fx.tokenizerJson, fx.tokenizerConfig);
  it('skips special tokens when asked and rejects ids outside the vocabulary', () => {
    const ids = tok.encode('<|im_start|>hi<|im_end|>');
    expect(tok.decode(ids)).toBe('<|im_start|>hi<|im_end|>');
    expect(tok.decode(ids, { skipSpecialTokens: true })).toBe('hi');
    expect(tok.decode([])).toBe('');
    expect(() => tok.decode([tok.vocabSize])).toThrow(TokenizerError);
  });
});
