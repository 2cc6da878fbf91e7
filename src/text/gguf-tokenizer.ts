/**
 * A GGUF file carries its tokenizer as metadata (`tokenizer.ggml.*`). This rebuilds the
 * equivalent Hugging Face tokenizer.json + tokenizer_config.json in memory, so one library
 * (@huggingface/tokenizers) runs both, and a GGUF file needs nothing else.
 *
 * - `gpt2`: byte-level BPE; `tokenizer.ggml.pre` names the split regex (llama.cpp's names).
 * - `llama`: SentencePiece-style BPE with byte fallback (Llama 2, Mistral); merges come from
 *   `tokenizer.ggml.merges` when present, else from the piece scores as HF's converter derives them.
 * - `bert`: WordPiece (BERT, MiniLM, bge, gte, e5), its vocabulary in llama.cpp's phantom-space
 *   form (a word's first piece `▁word`, a continuation `ing` for HF's `##ing`, control tokens as
 *   they are) turned back into HF's; lower-cased with accents stripped, as llama.cpp's WPM
 *   tokenizer does (GGUF records no flag), `[CLS] … [SEP]` around each text.
 */
import { chatTemplateFromGGUF } from './chat-template';
import { TokenizerError } from './errors';
import { loadTokenizer, type TextTokenizer, type TokenizerLoadOptions } from './tokenizer';

/** GGUF `tokenizer.ggml.token_type` values. */
export const GGUF_TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const LLAMA3_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const TEKKEN_PATTERN =
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

interface PreSpec {
  /** Split regex; null = GPT-2's, applied by the ByteLevel pre-tokenizer itself. */
  pattern: string | null;
  /** Whole words found in the vocabulary skip merging (Llama 3 sets `ignore_merges`). */
  ignoreMerges?: boolean;
  /** Qwen's tokenizer.json normalises to NFC; GGUF does not record it. */
  nfc?: boolean;
}

/** llama.cpp's `tokenizer.ggml.pre` names mapped to the split each stands for. */
export const GGUF_PRE_TOKENIZERS: Readonly<Record<string, PreSpec>> = {
  default: { pattern: null },
  gpt2: { pattern: null },
  'gpt-2': { pattern: null },
  'llama-bpe': { pattern: LLAMA3_PATTERN, ignoreMerges: true },
  llama3: { pattern: LLAMA3_PATTERN, ignoreMerges: true },
  'llama-v3': { pattern: LLAMA3_PATTERN, ignoreMerges: true },
  'smaug-bpe': { pattern: LLAMA3_PATTERN, ignoreMerges: true },
  qwen2: { pattern: QWEN2_PATTERN, nfc: true },
  'deepseek-r1-qwen': { pattern: QWEN2_PATTERN, nfc: true },
  tekken: { pattern: TEKKEN_PATTERN },
};

/** GGUF metadata: readGGUF's Map, or a plain object. */
export type GGUFMetadata = Readonly<Record<string, unknown>> | ReadonlyMap<string, unknown>;
type Meta = Readonly<Record<string, unknown>>;
const asRecord = (m: GGUFMetadata): Meta => (m instanceof Map ? Object.fromEntries(m) : (m as Meta));

export interface GGUFTokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** Things that may make ids differ from the original tokenizer (an unknown pre-tokenizer name). */
  warnings: string[];
}

function arrayOf<T>(meta: Meta, key: string, check: (x: unknown) => boolean, required: boolean): T[] | undefined {
  const v = meta[key];
  if (v === undefined) {
    if (required) throw new TokenizerError('missing_field', `GGUF metadata lacks ${key}`, key);
    return undefined;
  }
  const arr = ArrayBuffer.isView(v) ? Array.from(v as unknown as ArrayLike<number>) : v;
  if (!Array.isArray(arr) || !arr.every(check)) throw new TokenizerError('invalid_tokenizer', `GGUF ${key} is not the expected array`, key);
  return arr as T[];
}

const isString = (x: unknown) => typeof x === 'string';
const isNumber = (x: unknown) => typeof x === 'number' || typeof x === 'bigint';

export function tokenizerFilesFromGGUF(metadata: GGUFMetadata): GGUFTokenizerFiles {
  const meta = asRecord(metadata);
  const model = meta['tokenizer.ggml.model'];
  if (model !== 'gpt2' && model !== 'llama' && model !== 'bert')
    throw new TokenizerError('unsupported_model', `tokenizer.ggml.model ${JSON.stringify(model)} is not supported (gpt2, llama or bert)`, 'tokenizer.ggml.model');
  const stored = arrayOf<string>(meta, 'tokenizer.ggml.tokens', isString, true)!;
  const types = (arrayOf<number>(meta, 'tokenizer.ggml.token_type', isNumber, false) ?? stored.map(() => GGUF_TOKEN_TYPE.NORMAL)).map(Number);
  const tokens = model === 'bert' ? stored.map((t, id) => fromPhantomSpace(t, types[id]!)) : stored;
  const scores = arrayOf<number>(meta, 'tokenizer.ggml.scores', isNumber, false)?.map(Number);
  const merges = arrayOf<string>(meta, 'tokenizer.ggml.merges', isString, false);
  const warnings: string[] = [];

  const vocab: Record<string, number> = {};
  tokens.forEach((t, id) => {
    if (!(t in vocab)) vocab[t] = id;
  });
  const added = tokens.flatMap((content, id) => {
    const type = types[id];
    if (type !== GGUF_TOKEN_TYPE.CONTROL && type !== GGUF_TOKEN_TYPE.USER_DEFINED && type !== GGUF_TOKEN_TYPE.UNKNOWN) return [];
    // SentencePiece's <unk>/<s>/</s> are CONTROL/UNKNOWN too; all are matched whole in text.
    return [{ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: type !== GGUF_TOKEN_TYPE.USER_DEFINED }];
  });

  const idKey = (k: string) => {
    const v = meta[`tokenizer.ggml.${k}`];
    return v === undefined ? undefined : Number(v);
  };
  const tokenAt = (id: number | undefined) => (id !== undefined && id >= 0 && id < tokens.length ? tokens[id] : null);
  // BERT's [CLS] and [SEP] (llama.cpp's converter writes cls/seperator ids, older files bos/eos).
  const bosId = model === 'bert' ? (idKey('cls_token_id') ?? idKey('bos_token_id')) : idKey('bos_token_id');
  const eosId = model === 'bert' ? (idKey('seperator_token_id') ?? idKey('eos_token_id')) : idKey('eos_token_id');

  let tokenizerJson: Record<string, unknown>;
  let addBosDefault: boolean;
  if (model === 'gpt2') {
    const preName = String(meta['tokenizer.ggml.pre'] ?? 'default');
    let pre = GGUF_PRE_TOKENIZERS[preName];
    if (!pre) {
      warnings.push(`tokenizer.ggml.pre "${preName}" is not known; splitting text as GPT-2 does`);
      pre = GGUF_PRE_TOKENIZERS.default;
    }
    if (!merges) throw new TokenizerError('missing_field', 'GGUF metadata lacks tokenizer.ggml.merges (needed by gpt2 tokenizers)', 'tokenizer.ggml.merges');
    const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: pre.pattern === null };
    tokenizerJson = {
      version: '1.0',
      added_tokens: added,
      normalizer: pre.nfc ? { type: 'NFC' } : null,
      pre_tokenizer: pre.pattern === null
        ? byteLevel
        : { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: pre.pattern }, behavior: 'Isolated', invert: false }, byteLevel] },
      post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: !!pre.ignoreMerges, vocab, merges },
    };
    addBosDefault = false;
  } else if (model === 'bert') {
    tokenizerJson = wordPieceJson(vocab, added, tokenAt(bosId), tokenAt(eosId), tokenAt(idKey('unknown_token_id')) ?? '[UNK]');
    addBosDefault = true;
  } else {
    const unkId = idKey('unknown_token_id') ?? types.indexOf(GGUF_TOKEN_TYPE.UNKNOWN);
    tokenizerJson = {
      version: '1.0',
      added_tokens: added,
      normalizer: null,
      pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
      post_processor: null,
      decoder: {
        type: 'Sequence',
        decoders: [
          { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
          { type: 'ByteFallback' },
          { type: 'Fuse' },
          { type: 'Strip', content: ' ', start: 1, stop: 0 },
        ],
      },
      model: {
        type: 'BPE', dropout: null, unk_token: tokenAt(unkId >= 0 ? unkId : undefined), continuing_subword_prefix: null, end_of_word_suffix: null,
        fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges: merges ?? mergesFromScores(tokens, types, scores),
      },
    };
    addBosDefault = true;
  }

  const addBos = meta['tokenizer.ggml.add_bos_token'];
  const addEos = meta['tokenizer.ggml.add_eos_token'];
  const tokenizerConfig: Record<string, unknown> = {
    bos_token: tokenAt(bosId),
    eos_token: tokenAt(eosId),
    unk_token: tokenAt(idKey('unknown_token_id')),
    pad_token: tokenAt(idKey('padding_token_id')),
    add_bos_token: typeof addBos === 'boolean' ? addBos : addBosDefault,
    add_eos_token: typeof addEos === 'boolean' ? addEos : model === 'bert',
    clean_up_tokenization_spaces: false,
    chat_template: chatTemplateFromGGUF(meta),
  };
  return { tokenizerJson, tokenizerConfig, warnings };
}

/**
 * A piece of llama.cpp's phantom-space WordPiece vocabulary in HF's form: control tokens (and, in
 * files from before token types were consulted, `[…]` tokens) as they are, `▁word` a word's first
 * piece `word`, any other a continuation `##…`.
 */
function fromPhantomSpace(token: string, type: number): string {
  if (type === GGUF_TOKEN_TYPE.CONTROL) return token;
  if (token.startsWith('\u2581')) return token.slice(1);
  if (token.startsWith('[') && token.endsWith(']')) return token;
  return `##${token}`;
}

/** An uncased BERT tokenizer.json over `vocab`: BertNormalizer, BertPreTokenizer, WordPiece, `cls $A sep`. */
function wordPieceJson(vocab: Record<string, number>, added: object[], cls: string | null, sep: string | null, unk: string): Record<string, unknown> {
  if (cls === null || sep === null) throw new TokenizerError('missing_field', 'a GGUF bert vocabulary needs its [CLS] and [SEP] ids (tokenizer.ggml.cls_token_id, seperator_token_id)', 'tokenizer.ggml.cls_token_id');
  const special = (t: string, typeId: number) => ({ SpecialToken: { id: t, type_id: typeId } });
  const sequence = (id: string, typeId: number) => ({ Sequence: { id, type_id: typeId } });
  return {
    version: '1.0',
    added_tokens: added,
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [special(cls, 0), sequence('A', 0), special(sep, 0)],
      pair: [special(cls, 0), sequence('A', 0), special(sep, 0), sequence('B', 1), special(sep, 1)],
      special_tokens: { [cls]: { id: cls, ids: [vocab[cls]], tokens: [cls] }, [sep]: { id: sep, ids: [vocab[sep]], tokens: [sep] } },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: unk, continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  };
}

/**
 * SentencePiece BPE merges as HF's converter derives them: every split of a piece into two
 * pieces of the vocabulary is a merge, ranked by the merged piece's score (higher first).
 */
export function mergesFromScores(tokens: readonly string[], types: readonly number[], scores?: readonly number[]): [string, string][] {
  const ids = new Map<string, number>();
  tokens.forEach((t, i) => {
    if (!ids.has(t)) ids.set(t, i);
  });
  const out: { pair: [string, string]; score: number; id: number; left: number; right: number }[] = [];
  tokens.forEach((piece, id) => {
    if (types[id] !== GGUF_TOKEN_TYPE.NORMAL && types[id] !== GGUF_TOKEN_TYPE.USER_DEFINED) return;
    const chars = Array.from(piece);
    for (let k = 1; k < chars.length; k++) {
      const a = chars.slice(0, k).join('');
      const b = chars.slice(k).join('');
      const ia = ids.get(a);
      const ib = ids.get(b);
      if (ia !== undefined && ib !== undefined) out.push({ pair: [a, b], score: scores?.[id] ?? -id, id, left: ia, right: ib });
    }
  });
  out.sort((x, y) => y.score - x.score || x.id - y.id || x.left - y.left || x.right - y.right);
  return out.map((m) => m.pair);
}

/** Loads the tokenizer of a GGUF file from its metadata alone. */
export function loadGGUFTokenizer(metadata: GGUFMetadata, opts: TokenizerLoadOptions = {}): TextTokenizer & { warnings: string[] } {
  const meta = asRecord(metadata);
  const { tokenizerJson, tokenizerConfig, warnings } = tokenizerFilesFromGGUF(meta);
  const extra = ['eot_token_id', 'eom_token_id']
    .map((k) => meta[`tokenizer.ggml.${k}`])
    .filter((v) => v !== undefined)
    .map(Number);
  const tok = loadTokenizer(tokenizerJson, tokenizerConfig, { ...opts, eosTokenIds: [...(opts.eosTokenIds ?? []), ...extra] });
  return Object.assign(tok, { warnings });
}
