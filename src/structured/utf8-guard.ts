/**
 * Keeps constrained output valid UTF-8 whatever the grammar engine allows. xgrammar matches
 * bytes, and some of its byte classes (a length-bounded JSON string, for one) admit bytes that
 * never occur in UTF-8 or occur only after a lead byte: a sampled `C1 A7` (an overlong form)
 * then decodes to two U+FFFD and breaks the schema it was meant to follow.
 *
 * The output's bytes so far are tracked by the UTF-8 validating automaton (RFC 3629 §4): one
 * state for "between characters" and seven for "inside a character, these continuation bytes may
 * come" (the restricted ones after E0, ED, F0 and F4 exclude overlongs, surrogates and code
 * points past U+10FFFF). Once per tokenizer, each token's bytes are run from every state, giving
 * the state it ends in (or none) and, per state, a bitmask of the tokens valid from it. Per step
 * the grammar's mask is ANDed with the current state's: O(vocab / 32).
 */
import { tokenBytes } from '../text/token-bytes';
import type { TextTokenizer } from '../text/tokenizer';

/** Between characters; every other state is inside one. */
export const UTF8_ACCEPT = 0;
const STATES = 8;
const INVALID = -1;

/** The automaton: the state after `byte` in `state`, or INVALID. */
export function utf8Step(state: number, byte: number): number {
  const cont = byte >= 0x80 && byte <= 0xbf;
  switch (state) {
    case 0:
      if (byte <= 0x7f) return 0;
      if (byte >= 0xc2 && byte <= 0xdf) return 1;
      if (byte === 0xe0) return 4;
      if (byte === 0xed) return 5;
      if (byte >= 0xe1 && byte <= 0xef) return 2;
      if (byte === 0xf0) return 6;
      if (byte >= 0xf1 && byte <= 0xf3) return 3;
      if (byte === 0xf4) return 7;
      return INVALID; // 80-C1 (continuations, overlong leads) and F5-FF
    case 1: // one continuation left
      return cont ? 0 : INVALID;
    case 2: // two left
      return cont ? 1 : INVALID;
    case 3: // three left
      return cont ? 2 : INVALID;
    case 4: // after E0: A0-BF (no overlong 3-byte forms)
      return byte >= 0xa0 && byte <= 0xbf ? 1 : INVALID;
    case 5: // after ED: 80-9F (no surrogates D800-DFFF)
      return byte >= 0x80 && byte <= 0x9f ? 1 : INVALID;
    case 6: // after F0: 90-BF (no overlong 4-byte forms)
      return byte >= 0x90 && byte <= 0xbf ? 2 : INVALID;
    case 7: // after F4: 80-8F (nothing past U+10FFFF)
      return byte >= 0x80 && byte <= 0x8f ? 2 : INVALID;
  }
  return INVALID;
}

export interface Utf8Tables {
  /** Words per mask. */
  words: number;
  /** Per state, the tokens valid from it (bit set = allowed). */
  masks: Uint32Array[];
  /** `next[id * 8 + state]`: the state after token `id`, or -1. */
  next: Int8Array;
}

const cache = new WeakMap<TextTokenizer, Map<number, Utf8Tables>>();

/**
 * The tables for `tokenizer` with `vocabSize` logit rows (built once, cached). Special tokens
 * (EOS, template markers) carry no text: valid between characters only, where they leave the
 * state as it is. Rows past the tokenizer's vocabulary are never valid.
 */
export function utf8Tables(tokenizer: TextTokenizer, vocabSize: number): Utf8Tables {
  let bySize = cache.get(tokenizer);
  if (!bySize) cache.set(tokenizer, (bySize = new Map()));
  const hit = bySize.get(vocabSize);
  if (hit) return hit;
  const words = Math.ceil(vocabSize / 32);
  const masks = Array.from({ length: STATES }, () => new Uint32Array(words));
  const next = new Int8Array(vocabSize * STATES).fill(INVALID);
  for (let id = 0; id < Math.min(vocabSize, tokenizer.vocabSize); id++) {
    if (tokenizer.specialIds.has(id)) {
      next[id * STATES] = UTF8_ACCEPT;
      masks[UTF8_ACCEPT]![id >>> 5]! |= 1 << (id & 31);
      continue;
    }
    const bytes = tokenBytes(tokenizer, id);
    for (let s = 0; s < STATES; s++) {
      let state = s;
      for (let i = 0; i < bytes.length && state !== INVALID; i++) state = utf8Step(state, bytes[i]!);
      next[id * STATES + s] = state;
      if (state !== INVALID) masks[s]![id >>> 5]! |= 1 << (id & 31);
    }
  }
  const tables = { words, masks, next };
  bySize.set(vocabSize, tables);
  return tables;
}

/** One choice's position in the automaton: masks the grammar's bitmask and follows accepted tokens. */
export class Utf8Guard {
  private state = UTF8_ACCEPT;
  /** The state before each accepted token (`rollBack`). */
  private readonly before: number[] = [];

  constructor(private readonly tables: Utf8Tables) {}

  /**
   * ANDs the state's valid tokens into `mask`. Should nothing survive (a grammar allowing only
   * bytes no UTF-8 text can hold next), the grammar's mask is kept so the step still has a token.
   */
  apply(mask: Uint32Array): void {
    const allowed = this.tables.masks[this.state]!;
    const n = Math.min(mask.length, allowed.length);
    let any = 0;
    for (let i = 0; i < n; i++) any |= mask[i]! & allowed[i]!;
    if (any === 0) return;
    for (let i = 0; i < n; i++) mask[i]! &= allowed[i]!;
  }

  /** Back to the state before the last `tokens` accepted tokens. */
  rollBack(tokens: number): void {
    if (tokens <= 0) return;
    if (tokens > this.before.length) throw new RangeError(`utf8 guard: rolling back ${tokens} of ${this.before.length} tokens`);
    this.state = this.before[this.before.length - tokens]!;
    this.before.length -= tokens;
  }

  accept(id: number): void {
    this.before.push(this.state);
    const s = this.tables.next[id * STATES + this.state];
    // A token that was not valid here (only through the fallback above) restarts the automaton.
    this.state = s === undefined || s === INVALID ? UTF8_ACCEPT : s;
  }
}
