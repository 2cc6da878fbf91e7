/**
 * Streaming detokenizer: token ids in, text out as soon as it is final.
 *
 * Each step decodes only a small window, the tokens since the last emission plus the tokens
 * of that emission (the "prefix"), and emits what the window adds beyond the prefix. The
 * prefix gives the new tokens their context, so SentencePiece's leading-space rule (only the
 * very first token of a text loses its ▁) and byte-fallback runs come out as a full decode
 * would. Text is held back while the window ends in U+FFFD: a UTF-8 character split across
 * tokens is never emitted in halves. Cost per token is O(window), not O(output).
 */
import type { TextTokenizer } from './tokenizer';

export interface DetokenizerOptions {
  /** Leave special tokens out of the text (default true, as OpenAI-style servers do). */
  skipSpecialTokens?: boolean;
  /**
   * The last few prompt tokens, to decode the first generated tokens in context (then a
   * SentencePiece `▁Hello` after the prompt keeps its space). Without it, the output is
   * decoded as a text of its own, as HF's `decode(output_ids)` does.
   */
  context?: readonly number[];
  /**
   * Special tokens to keep even when skipping the others: tool-call markers that are control
   * tokens (`[TOOL_CALLS]`, `<|python_tag|>`) must reach the tool-call parser.
   */
  keepSpecialIds?: Iterable<number>;
}

const REPLACEMENT = '\uFFFD';

export class StreamingDetokenizer {
  /** Tokens from the start of the prefix; earlier ones are dropped. */
  private window: number[] = [];
  /** window[0, readAt) is the prefix: already emitted, kept for context. */
  private readAt = 0;
  private readonly skipSpecial: boolean;
  private readonly keep: ReadonlySet<number>;
  /** All text emitted so far. */
  text = '';

  constructor(
    private readonly tokenizer: TextTokenizer,
    opts: DetokenizerOptions = {},
  ) {
    this.skipSpecial = opts.skipSpecialTokens ?? true;
    this.keep = new Set(opts.keepSpecialIds ?? []);
    if (opts.context?.length) {
      this.window = opts.context.filter((id) => !this.skip(id)).slice(-4);
      this.readAt = this.window.length;
    }
  }

  private skip(id: number): boolean {
    return this.skipSpecial && this.tokenizer.specialIds.has(id) && !this.keep.has(id);
  }

  /** Adds one token; returns the text that became final (often '', never half a character). */
  push(id: number): string {
    if (this.skip(id)) return '';
    this.window.push(id);
    return this.emit(false);
  }

  /** Ends the stream: returns whatever is held back, a trailing broken character as U+FFFD. */
  flush(): string {
    return this.emit(true);
  }

  private emit(final: boolean): string {
    if (this.window.length === this.readAt) return '';
    const prefix = this.decode(this.window.slice(0, this.readAt));
    const full = this.decode(this.window);
    if (!final && (full.length <= prefix.length || full.endsWith(REPLACEMENT))) return '';
    const delta = full.startsWith(prefix) ? full.slice(prefix.length) : full.slice(Math.min(prefix.length, full.length));
    // The new tokens become the next prefix.
    this.window = this.window.slice(this.readAt);
    this.readAt = this.window.length;
    this.text += delta;
    return delta;
  }

  private decode(ids: number[]): string {
    // Skipped ids never enter the window, so decode everything in it (kept specials included).
    return ids.length ? this.tokenizer.decode(ids) : '';
  }
}
