/**
 * Tokenizers from Hugging Face `tokenizer.json` + `tokenizer_config.json`, run by
 * @huggingface/tokenizers (byte-level BPE, SentencePiece-style BPE with byte fallback, Unigram).
 * GGUF files get the same treatment: gguf-tokenizer.ts rebuilds a tokenizer.json from metadata.
 *
 * Special tokens in text: `encode(text)` parses them (as HF does). `parseSpecial: false` treats
 * every special token string as plain text, and `literalRanges` does so only inside the given
 * ranges: chat prompts use it so a `<|im_end|>` typed by a user is encoded as the characters
 * `<|`, `im`, ... while the template's own `<|im_end|>` stays the control token.
 */
import { Tokenizer } from '@huggingface/tokenizers';
import { AddedTokenMatcher, type AddedTokenInfo } from './added-tokens';
import { offThreadEncoder } from './encode-off-thread';
import { isNode, OffThreadError } from '../platform/off-thread';
import { TokenizerError } from './errors';
import type { ChatTemplateConfig } from './chat-template';

export interface EncodeOptions {
  /** Add the model's BOS/EOS as its config says (default true, as in HF). */
  addSpecialTokens?: boolean;
  /** Match special-token strings in the text as control tokens (default true). */
  parseSpecial?: boolean;
  /** [start, end) UTF-16 ranges where special-token strings are plain text (from `ChatTemplate.render`). */
  literalRanges?: ReadonlyArray<readonly [number, number]>;
}

export interface DecodeOptions {
  /** Leave out special (control) tokens (default false). */
  skipSpecialTokens?: boolean;
}

/** How token strings map to bytes, in xgrammar's terms. */
export type VocabType = 'byte_level' | 'byte_fallback' | 'raw';

/**
 * Texts at least this long are tokenized in a worker thread by `encodeAsync` (where one can be
 * had): 16k characters take at most about 40 ms in place (SentencePiece-style BPE, the slowest
 * measured; byte-level BPE about 12 ms), so shorter ones are not worth the round trip.
 */
export const OFF_THREAD_CHARS = 16 * 1024;

export interface TextTokenizer {
  encode(text: string, options?: EncodeOptions): number[];
  /**
   * The same ids as `encode`, without holding the event loop for long: a text of OFF_THREAD_CHARS
   * or more is tokenized in a worker thread in Node (src/text/encode-off-thread.ts). Absent on
   * tokenizers that are always fast; `encodeLong` picks whichever a tokenizer has.
   */
  encodeAsync?(text: string, options?: EncodeOptions): Promise<number[]>;
  decode(ids: readonly number[], options?: DecodeOptions): string;
  idToToken(id: number): string | undefined;
  tokenToId(token: string): number | undefined;
  /** Number of token ids (the highest id + 1); the model's embedding may be larger. */
  readonly vocabSize: number;
  readonly bosId: number | null;
  /** Every id that ends generation: the config's EOS, generation_config's, and known end-of-turn tokens. */
  readonly eosIds: readonly number[];
  /** Ids of special (control) tokens. */
  readonly specialIds: ReadonlySet<number>;
  /** The strings of the special tokens (for `ChatTemplateOptions.specialTokens`). */
  readonly specialTokens: readonly string[];
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  /** The raw token string of every id (`''` for holes), as xgrammar's TokenizerInfo wants. */
  readonly vocab: readonly string[];
  readonly vocabType: VocabType;
  /** SentencePiece-style vocabularies mark word starts with ▁ and prepend one to the text. */
  readonly prependSpace: boolean;
  /** The chat template(s) the tokenizer config carries, if any. */
  readonly chatTemplate: ChatTemplateConfig;
}

export interface TokenizerLoadOptions {
  /** Extra stop ids, e.g. generation_config.json's `eos_token_id` (a number or a list). */
  eosTokenIds?: readonly number[];
}

type Json = Record<string, any>;

/** Control tokens that end a turn in the families we know; added to `eosIds` when present. */
const END_OF_TURN = [
  '<|im_end|>', '<|eot_id|>', '<|eom_id|>', '<|end|>', '<end_of_turn>', '<|endoftext|>', '<|return|>', '<|call|>',
  '</s>', '<｜end▁of▁sentence｜>', '<|end_of_text|>',
];

/** `tokenizer.encodeAsync` where it has one, else `encode`. */
export function encodeLong(tokenizer: TextTokenizer, text: string, options?: EncodeOptions): Promise<number[]> {
  return tokenizer.encodeAsync ? tokenizer.encodeAsync(text, options) : Promise.resolve(tokenizer.encode(text, options));
}

export function loadTokenizer(tokenizerJson: unknown, tokenizerConfig: unknown = {}, opts: TokenizerLoadOptions = {}): TextTokenizer {
  return new HFTokenizer(tokenizerJson, tokenizerConfig, opts);
}

const tokenString = (v: unknown): string | null =>
  typeof v === 'string' ? v : v && typeof v === 'object' && typeof (v as Json).content === 'string' ? (v as Json).content : null;

class HFTokenizer implements TextTokenizer {
  private readonly tk: Tokenizer;
  private readonly matcher: AddedTokenMatcher;
  private readonly added: AddedTokenInfo[];
  private readonly prefix: number[];
  private readonly suffix: number[];
  /** What the off-thread encoder builds its own copy from (Node only: nowhere else is it used). */
  private readonly source: { json: Json; config: Json } | null;
  readonly vocab: string[];
  readonly vocabSize: number;
  readonly bosId: number | null;
  readonly eosIds: number[];
  readonly specialIds: Set<number>;
  readonly specialTokens: string[];
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly vocabType: VocabType;
  readonly prependSpace: boolean;
  readonly chatTemplate: ChatTemplateConfig;

  constructor(json: unknown, config: unknown, opts: TokenizerLoadOptions) {
    if (!json || typeof json !== 'object' || !(json as Json).model)
      throw new TokenizerError('invalid_tokenizer', 'tokenizer.json must be an object with a "model"', 'model');
    const j = json as Json;
    const c = (config && typeof config === 'object' ? config : {}) as Json;
    this.source = isNode() ? { json: j, config: c } : null;
    try {
      this.tk = new Tokenizer({ added_tokens: [], ...j }, c);
    } catch (e) {
      throw new TokenizerError('invalid_tokenizer', `tokenizer.json is not usable: ${(e as Error).message}`);
    }

    this.added = ((j.added_tokens ?? []) as Json[]).map((t) => ({
      id: t.id, content: t.content, special: !!t.special, lstrip: !!t.lstrip, rstrip: !!t.rstrip, normalized: !!t.normalized,
    }));
    this.matcher = new AddedTokenMatcher(this.added.filter((t) => !t.normalized || !this.tk.normalizer));
    this.specialIds = new Set(this.added.filter((t) => t.special).map((t) => t.id));
    this.specialTokens = this.added.filter((t) => t.special).map((t) => t.content);

    const modelVocab = (this.tk.model as unknown as { vocab: (string | undefined)[] }).vocab;
    this.vocabSize = modelVocab.length;
    this.vocab = Array.from({ length: this.vocabSize }, (_, i) => modelVocab[i] ?? '');

    this.bosToken = tokenString(c.bos_token);
    this.eosToken = tokenString(c.eos_token);
    this.bosId = this.bosToken !== null ? (this.tokenToId(this.bosToken) ?? null) : null;
    const eos = new Set<number>();
    const eosId = this.eosToken !== null ? this.tokenToId(this.eosToken) : undefined;
    if (eosId !== undefined) eos.add(eosId);
    for (const id of opts.eosTokenIds ?? []) eos.add(id);
    for (const s of END_OF_TURN) {
      const id = this.tokenToId(s);
      if (id !== undefined && this.specialIds.has(id)) eos.add(id);
    }
    this.eosIds = [...eos];

    // What the post-processor adds around a text, then the config's explicit add_bos/add_eos.
    [this.prefix, this.suffix] = this.probeSpecials();
    if (typeof c.add_bos_token === 'boolean' && this.bosId !== null) {
      const has = this.prefix.includes(this.bosId);
      if (c.add_bos_token && !has) this.prefix.unshift(this.bosId);
      if (!c.add_bos_token && has) this.prefix = this.prefix.filter((x) => x !== this.bosId);
    }
    const eosMain = eosId ?? null;
    if (typeof c.add_eos_token === 'boolean' && eosMain !== null) {
      const has = this.suffix.includes(eosMain);
      if (c.add_eos_token && !has) this.suffix.push(eosMain);
      if (!c.add_eos_token && has) this.suffix = this.suffix.filter((x) => x !== eosMain);
    }
    this.addBos = this.bosId !== null && this.prefix.includes(this.bosId);
    this.addEos = eosMain !== null && this.suffix.includes(eosMain);

    this.vocabType = detectVocabType(j);
    this.prependSpace = this.vocabType !== 'byte_level' && JSON.stringify([j.pre_tokenizer, j.normalizer]).includes('\u2581');
    this.chatTemplate = (c.chat_template ?? null) as ChatTemplateConfig;
  }

  private probeSpecials(): [number[], number[]] {
    const plain = this.tk.encode('a', { add_special_tokens: false }).ids;
    const full = this.tk.encode('a', { add_special_tokens: true }).ids;
    for (let at = 0; at + plain.length <= full.length; at++) {
      if (plain.every((id, k) => full[at + k] === id)) return [full.slice(0, at), full.slice(at + plain.length)];
    }
    return [[], []];
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const { addSpecialTokens = true, parseSpecial = true, literalRanges } = options;
    let ids: number[];
    if (text.length === 0) ids = [];
    else if (parseSpecial && !literalRanges?.length) ids = this.tk.encode(text, { add_special_tokens: false }).ids;
    else ids = this.encodeFiltered(text, parseSpecial, literalRanges ?? []);
    return addSpecialTokens ? [...this.prefix, ...ids, ...this.suffix] : ids;
  }

  async encodeAsync(text: string, options: EncodeOptions = {}): Promise<number[]> {
    if (text.length < OFF_THREAD_CHARS || !this.source) return this.encode(text, options);
    const worker = await offThreadEncoder(this, this.source.json, this.source.config);
    if (!worker) return this.encode(text, options);
    const { addSpecialTokens = true, parseSpecial = true, literalRanges } = options;
    const ids: number[] = addSpecialTokens ? [...this.prefix] : [];
    const append = (from: Int32Array) => {
      for (let i = 0; i < from.length; i++) ids.push(from[i]!);
    };
    try {
      if (parseSpecial && !literalRanges?.length) append(await worker.encode(text));
      else {
        // As encodeFiltered: the special-token split here (cheap), each plain section there.
        const parts = this.parts(text, parseSpecial, literalRanges ?? []);
        const plain = parts.flatMap((p, i): [string, number][] => (typeof p === 'string' && p.length > 0 ? [[p, i]] : []));
        const { ids: encoded, lengths } = await worker.sections(plain);
        let at = 0;
        let k = 0;
        for (const p of parts) {
          if (typeof p !== 'string') ids.push(p.id);
          else if (p.length > 0) append(encoded.subarray(at, (at += lengths[k++]!)));
        }
      }
    } catch (e) {
      if (e instanceof OffThreadError) throw new TokenizerError('invalid_id', e.message);
      throw e;
    }
    if (addSpecialTokens) ids.push(...this.suffix);
    return ids;
  }

  /** The added-token split of encodeFiltered: plain sections and the added tokens allowed between them. */
  private parts(text: string, parseSpecial: boolean, ranges: ReadonlyArray<readonly [number, number]>): (string | AddedTokenInfo)[] {
    const allow = (t: AddedTokenInfo, s: number, e: number) =>
      !t.special || (parseSpecial && !ranges.some(([a, b]) => s < b && e > a));
    const parts: (string | AddedTokenInfo)[] = this.matcher.split(text, allow).map((x) => x);
    parts.forEach((p, i) => {
      if (typeof p === 'string') return;
      if (p.lstrip && i > 0 && typeof parts[i - 1] === 'string') parts[i - 1] = (parts[i - 1] as string).trimEnd();
      if (p.rstrip && i + 1 < parts.length && typeof parts[i + 1] === 'string') parts[i + 1] = (parts[i + 1] as string).trimStart();
    });
    return parts;
  }

  /**
   * The library's `encode_text`, with special tokens matched only where allowed. Mirrors its
   * steps (added-token split, lstrip/rstrip, normalizer, pre-tokenizer, model) through the
   * Tokenizer's public pieces, so ids equal the library's wherever specials are allowed.
   * encode-off-thread.ts's worker encodes each plain section the same way.
   */
  private encodeFiltered(text: string, parseSpecial: boolean, ranges: ReadonlyArray<readonly [number, number]>): number[] {
    const parts = this.parts(text, parseSpecial, ranges);
    const { normalizer, pre_tokenizer: pre, model } = this.tk as unknown as {
      normalizer: ((s: string) => string) | null;
      pre_tokenizer: ((s: string, o: { section_index: number }) => string[]) | null;
      model: ((tokens: string[]) => string[]) & { tokens_to_ids: Map<string, number>; unk_token_id?: number };
    };
    const ids: number[] = [];
    parts.forEach((p, sectionIndex) => {
      if (typeof p !== 'string') return void ids.push(p.id);
      if (p.length === 0) return;
      const normalised = normalizer ? normalizer(p) : p;
      if (normalised.length === 0) return;
      const words = pre ? pre(normalised, { section_index: sectionIndex }) : [normalised];
      for (const tok of model(words)) {
        const id = model.tokens_to_ids.get(tok) ?? model.unk_token_id;
        if (id === undefined) throw new TokenizerError('invalid_id', `token ${JSON.stringify(tok)} has no id and the model has no unk token`);
        ids.push(id);
      }
    });
    return ids;
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    if (ids.length === 0) return '';
    for (const id of ids)
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize)
        throw new TokenizerError('invalid_id', `token id ${id} is outside the vocabulary (0..${this.vocabSize - 1})`);
    // No clean-up of spaces before punctuation: text must come out as the model wrote it,
    // and the streaming detokenizer relies on decode being a plain concatenation.
    return this.tk.decode(ids as number[], { skip_special_tokens: !!options.skipSpecialTokens, clean_up_tokenization_spaces: false });
  }

  idToToken(id: number): string | undefined {
    return this.tk.id_to_token(id);
  }

  tokenToId(token: string): number | undefined {
    return this.tk.token_to_id(token);
  }
}

function detectVocabType(j: Json): VocabType {
  if (j.model?.byte_fallback) return 'byte_fallback';
  const s = JSON.stringify([j.decoder, j.pre_tokenizer]);
  if (s.includes('"ByteLevel"')) return 'byte_level';
  return 'raw';
}
