/**
 * Unigram tokenizers (T5, ALBERT, XLNet style): a hand-written tokenizer.json with a scored
 * vocabulary and the Metaspace pre-tokenizer, loaded through the same `loadTokenizer` path.
 * Unigram picks the segmentation with the highest total log-probability (Viterbi), so the ids
 * below follow from the scores.
 */
import { describe, expect, it } from 'vitest';
import { StreamingDetokenizer } from './detokenizer';
import { loadTokenizer } from './tokenizer';

const VOCAB: Array<[string, number]> = [
  ['<pad>', 0],
  ['</s>', 0],
  ['<unk>', 0],
  ['▁', -2],
  ['▁the', -3],
  ['▁cat', -4],
  ['▁ca', -6],
  ['t', -5],
  ['s', -5],
  ['▁sat', -4],
  ['▁on', -4],
  ['▁mat', -4],
  ['m', -6],
  ['a', -6],
  ['c', -6],
  ['h', -6],
  ['e', -6],
  ['o', -6],
  ['n', -6],
  ['.', -4],
];

const tokenizerJson = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [
    { id: 0, content: '<pad>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    { id: 1, content: '</s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    { id: 2, content: '<unk>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  ],
  normalizer: null,
  pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
  post_processor: {
    type: 'TemplateProcessing',
    single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }, { Sequence: { id: 'B', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
    special_tokens: { '</s>': { id: '</s>', ids: [1], tokens: ['</s>'] } },
  },
  decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
  model: { type: 'Unigram', unk_id: 2, vocab: VOCAB, byte_fallback: false },
};
const tokenizerConfig = { eos_token: '</s>', pad_token: '<pad>', unk_token: '<unk>', add_bos_token: false };

describe('a Unigram tokenizer', () => {
  const tok = loadTokenizer(tokenizerJson, tokenizerConfig);
  const id = (t: string) => VOCAB.findIndex(([p]) => p === t);

  it('segments by the best total score and round-trips', () => {
    const ids = tok.encode('the cat sat on the mat.', { addSpecialTokens: false });
    expect(ids).toEqual(['▁the', '▁cat', '▁sat', '▁on', '▁the', '▁mat', '.'].map(id));
    expect(tok.decode(ids)).toBe('the cat sat on the mat.');
  });

  it('falls back to pieces, then to <unk>, for words outside the vocabulary', () => {
    // "▁chat": no ▁ch piece; the best path is ▁ + c + h + a + t.
    expect(tok.encode('chat', { addSpecialTokens: false })).toEqual(['▁', 'c', 'h', 'a', 't'].map(id));
    expect(tok.encode('zoo', { addSpecialTokens: false })).toContain(2);
  });

  it('adds EOS as its post-processor says and reports its special tokens', () => {
    const ids = tok.encode('the cat');
    expect(ids.at(-1)).toBe(1);
    expect(tok.eosIds).toContain(1);
    expect(tok.decode(ids, { skipSpecialTokens: true })).toBe('the cat');
  });

  it('streams the same text through the detokenizer', () => {
    const ids = tok.encode('the cat sat on the mat.', { addSpecialTokens: false });
    const detok = new StreamingDetokenizer(tok);
    let text = '';
    for (const i of ids) text += detok.push(i);
    text += detok.flush();
    expect(text).toBe('the cat sat on the mat.');
  });
});
