/**
 * WordPiece (BERT, MiniLM, bge, gte, e5): a hand-written uncased tokenizer.json, as
 * bert-base-uncased's (BertNormalizer lower-casing and stripping accents, BertPreTokenizer,
 * `[CLS] $A [SEP]`), and the GGUF of the same vocabulary in llama.cpp's phantom-space form (a
 * word's first piece `▁word`, a continuation `ing` for `##ing`, control tokens as they are). Both
 * give the ids the WordPiece rules give: the longest piece of the vocabulary first, then `##`
 * continuations, a word with no split `[UNK]`.
 */
import { describe, expect, it } from 'vitest';
import { GGUF_TOKEN_TYPE, loadGGUFTokenizer } from './gguf-tokenizer';
import { loadTokenizer } from './tokenizer';

const SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
const WORDS = ['hello', 'world', 'the', 'cafe', 'run', '##ning', '##s', 'un', '##believ', '##able', ',', '!', '.', 'a', 'b', '##b', '中', '文', 'spaced', 'text'];
const VOCAB = [...SPECIALS, ...WORDS];
const id = (t: string) => VOCAB.indexOf(t);

const hfJson = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: SPECIALS.map((content, i) => ({ id: i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
  normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
  pre_tokenizer: { type: 'BertPreTokenizer' },
  post_processor: {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
    special_tokens: { '[CLS]': { id: '[CLS]', ids: [2], tokens: ['[CLS]'] }, '[SEP]': { id: '[SEP]', ids: [3], tokens: ['[SEP]'] } },
  },
  decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
  model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: Object.fromEntries(VOCAB.map((t, i) => [t, i])) },
};
const hfConfig = { do_lower_case: true, cls_token: '[CLS]', sep_token: '[SEP]', unk_token: '[UNK]', pad_token: '[PAD]', mask_token: '[MASK]', tokenizer_class: 'BertTokenizer' };

/** The vocabulary as llama.cpp's converter writes it (its `phantom`). */
const phantom = (t: string, i: number) => (i < SPECIALS.length ? t : t.startsWith('##') ? t.slice(2) : `\u2581${t}`);
const ggufMeta = new Map<string, unknown>([
  ['tokenizer.ggml.model', 'bert'],
  ['tokenizer.ggml.tokens', VOCAB.map(phantom)],
  ['tokenizer.ggml.token_type', VOCAB.map((_, i) => (i < SPECIALS.length ? GGUF_TOKEN_TYPE.CONTROL : GGUF_TOKEN_TYPE.NORMAL))],
  ['tokenizer.ggml.unknown_token_id', 1],
  ['tokenizer.ggml.cls_token_id', 2],
  ['tokenizer.ggml.seperator_token_id', 3],
  ['tokenizer.ggml.padding_token_id', 0],
]);

const CASES: Array<[string, string[]]> = [
  ['Hello, World!', ['hello', ',', 'world', '!']],
  // Accents stripped and lower-cased; longest piece first, then continuations.
  ['Café RUNNING runs', ['cafe', 'run', '##ning', 'run', '##s']],
  ['Ünbelievable.', ['un', '##believ', '##able', '.']],
  // A word with no split is [UNK] whole; whitespace of any kind splits.
  ['xyz  spaced\ttext\n', ['[UNK]', 'spaced', 'text']],
  // CJK characters are words of their own.
  ['中文hello', ['中', '文', 'hello']],
  ['abb', ['a', '##b', '##b']],
];

describe('WordPiece tokenizers', () => {
  const hf = loadTokenizer(hfJson, hfConfig);
  const gguf = loadGGUFTokenizer(ggufMeta);

  it.each(CASES)('%j: the HF tokenizer.json gives [CLS] %j [SEP]', (text, pieces) => {
    expect(hf.encode(text)).toEqual([id('[CLS]'), ...pieces.map(id), id('[SEP]')]);
    expect(hf.encode(text, { addSpecialTokens: false })).toEqual(pieces.map(id));
  });

  it.each(CASES)('%j: the GGUF (phantom-space vocabulary) gives the same ids', (text) => {
    expect(gguf.encode(text)).toEqual(hf.encode(text));
  });

  it('reads the GGUF vocabulary back in HF’s form and matches [CLS] in text', () => {
    expect(gguf.vocab).toEqual(VOCAB);
    expect(gguf.warnings).toEqual([]);
    expect(gguf.encode('[CLS] hello')).toEqual([2, 2, id('hello'), 3]);
    expect(gguf.decode(gguf.encode('run runs'), { skipSpecialTokens: true })).toBe('run runs');
  });
});
