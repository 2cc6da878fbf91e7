/**
 * Splits `<think>…</think>` reasoning (Qwen3, DeepSeek-R1) from the answer, incrementally.
 * Only a block at the very start of the output counts (after optional whitespace); when the
 * prompt already opened it (DeepSeek-R1's `<｜Assistant｜><think>\n`), generation starts inside.
 * Whitespace around the reasoning and right after `</think>` is dropped, as servers do; partial
 * tags are held back so nothing of a tag leaks into either stream. Where the format wraps the
 * answer too (Granite 3.3's `<response>…</response>`), those tags are dropped from the content.
 */
import { partialTagSuffix, pushEvent, type OutputEvent } from './stream-text';

export interface ReasoningOptions {
  startTag?: string;
  endTag?: string;
  /** The prompt ends inside an open reasoning block (see `promptOpensReasoning`). */
  startsInReasoning?: boolean;
  /** false: leave the reasoning in `content`, tags and all (default true). */
  separateReasoning?: boolean;
  /** false: hold the reasoning and send it in one piece when it ends (default true). */
  streamReasoning?: boolean;
  /**
   * Tags around the answer (Granite 3.3: `<response>`, `</response>`): an answer that begins with
   * `open` (after whitespace) has both dropped, with the whitespace inside them. Absent: none.
   */
  answerTags?: { open: string; close: string };
}

/** A way chat templates teach their models to reason: how to recognise the template, and the parser's tags. */
export interface ReasoningFormat {
  name: string;
  detect: (template: string) => boolean;
  options: Pick<ReasoningOptions, 'startTag' | 'endTag' | 'answerTags'>;
}

/** The reasoning formats, most specific first (the first whose `detect` holds is the template's). */
export const REASONING_FORMATS: readonly ReasoningFormat[] = [
  // Granite 3.3 with `thinking: true` (chat_template_kwargs): its system prompt asks for the
  // thoughts between <think></think> and the response between <response></response>.
  {
    name: 'granite',
    detect: (t) => t.includes('<think></think>') && t.includes('<response></response>'),
    options: { startTag: '<think>', endTag: '</think>', answerTags: { open: '<response>', close: '</response>' } },
  },
  // Qwen3, DeepSeek-R1 and kin.
  { name: 'think', detect: (t) => t.includes('<think>') && t.includes('</think>'), options: { startTag: '<think>', endTag: '</think>' } },
];

/** The reasoning format a chat template writes, or null. */
export function detectReasoningFormat(template: string): ReasoningFormat | null {
  return REASONING_FORMATS.find((f) => f.detect(template)) ?? null;
}

/** True when a rendered prompt ends with an open `<think>` (generation starts inside reasoning). */
export function promptOpensReasoning(prompt: string, startTag = '<think>', endTag = '</think>'): boolean {
  const t = prompt.trimEnd();
  return t.endsWith(startTag) || t.lastIndexOf(startTag) > t.lastIndexOf(endTag);
}

/** Whether a chat template writes reasoning blocks (Qwen3, DeepSeek-R1, Granite 3.3 and kin). */
export function templateHasReasoning(template: string): boolean {
  return detectReasoningFormat(template) !== null;
}

/** 'answerStart': the answer may open with answerTags.open; 'answer': inside those tags. */
type Mode = 'start' | 'reasoning' | 'answerStart' | 'answer' | 'content';

export class ReasoningParser {
  private readonly start: string;
  private readonly end: string;
  private readonly separate: boolean;
  private readonly stream: boolean;
  private readonly answer: ReasoningOptions['answerTags'];
  private mode: Mode;
  private buf = '';
  /** Reasoning text has begun (leading whitespace is skipped until it does). */
  private begun = false;
  /** Held reasoning when not streaming it. */
  private held = '';
  /** After `</think>`: skip whitespace before the answer. */
  private skipWs = false;

  constructor(opts: ReasoningOptions = {}) {
    this.start = opts.startTag ?? '<think>';
    this.end = opts.endTag ?? '</think>';
    this.separate = opts.separateReasoning ?? true;
    this.stream = opts.streamReasoning ?? true;
    this.answer = opts.answerTags;
    this.mode = opts.startsInReasoning ? 'reasoning' : 'start';
  }

  /** Where the answer begins: at its optional open tag, or plain content. */
  private get answerMode(): Mode {
    return this.answer ? 'answerStart' : 'content';
  }

  push(delta: string): OutputEvent[] {
    const out: OutputEvent[] = [];
    if (!this.separate) {
      pushEvent(out, { type: 'content', text: delta });
      return out;
    }
    this.buf += delta;
    this.run(out, false);
    return out;
  }

  finish(): OutputEvent[] {
    const out: OutputEvent[] = [];
    if (this.separate) this.run(out, true);
    return out;
  }

  private run(out: OutputEvent[], final: boolean): void {
    for (;;) {
      if (this.mode === 'start') {
        const t = this.buf.replace(/^\s+/, '');
        if (t.startsWith(this.start)) {
          this.buf = t.slice(this.start.length);
          this.mode = 'reasoning';
          continue;
        }
        if (!final && this.start.startsWith(t)) return; // whitespace or part of the tag so far
        this.mode = this.answerMode;
        continue;
      }
      if (this.mode === 'reasoning') {
        if (!this.begun) {
          // The prompt may have opened the block and the model repeats the tag.
          const t = this.buf.replace(/^\s+/, '');
          if (t.startsWith(this.start)) this.buf = t.slice(this.start.length);
          else if (!final && t.length > 0 && this.start.startsWith(t) && t.length < this.start.length) return;
          this.buf = this.buf.replace(/^\s+/, '');
          if (this.buf.length === 0) return;
          this.begun = true;
        }
        const at = this.buf.indexOf(this.end);
        if (at >= 0) {
          this.reason(out, this.buf.slice(0, at).trimEnd());
          this.flushHeld(out);
          this.buf = this.buf.slice(at + this.end.length);
          this.mode = this.answerMode;
          this.skipWs = true;
          continue;
        }
        if (final) {
          this.reason(out, this.buf.trimEnd());
          this.flushHeld(out);
          this.buf = '';
          return;
        }
        // Hold a possible partial end tag and trailing whitespace (dropped if the tag follows).
        const keepTag = partialTagSuffix(this.buf, [this.end]);
        let cut = this.buf.length - keepTag;
        while (cut > 0 && /\s/.test(this.buf[cut - 1])) cut--;
        this.reason(out, this.buf.slice(0, cut));
        this.buf = this.buf.slice(cut);
        return;
      }
      if (this.mode === 'answerStart') {
        const open = this.answer!.open;
        const t = this.buf.replace(/^\s+/, '');
        if (t.startsWith(open)) {
          this.buf = t.slice(open.length);
          this.mode = 'answer';
          this.skipWs = true;
          continue;
        }
        if (!final && open.startsWith(t)) return; // whitespace or part of the tag so far
        this.mode = 'content';
        continue;
      }
      if (this.mode === 'answer') {
        if (this.skipWs) {
          this.buf = this.buf.replace(/^\s+/, '');
          if (this.buf.length === 0) return;
          this.skipWs = false;
        }
        const close = this.answer!.close;
        const at = this.buf.indexOf(close);
        if (at >= 0) {
          pushEvent(out, { type: 'content', text: this.buf.slice(0, at).trimEnd() });
          // What follows the answer's close tag (whitespace, as a rule) stays content.
          this.buf = this.buf.slice(at + close.length).replace(/^\s+/, '');
          this.mode = 'content';
          continue;
        }
        if (final) {
          pushEvent(out, { type: 'content', text: this.buf.trimEnd() });
          this.buf = '';
          return;
        }
        // Hold a possible partial close tag and the whitespace before it (dropped if the tag follows).
        let cut = this.buf.length - partialTagSuffix(this.buf, [close]);
        while (cut > 0 && /\s/.test(this.buf[cut - 1])) cut--;
        pushEvent(out, { type: 'content', text: this.buf.slice(0, cut) });
        this.buf = this.buf.slice(cut);
        return;
      }
      // content
      if (this.skipWs) {
        this.buf = this.buf.replace(/^\s+/, '');
        if (this.buf.length === 0) return;
        this.skipWs = false;
      }
      pushEvent(out, { type: 'content', text: this.buf });
      this.buf = '';
      return;
    }
  }

  private reason(out: OutputEvent[], text: string): void {
    if (this.stream) pushEvent(out, { type: 'reasoning', text });
    else this.held += text;
  }

  private flushHeld(out: OutputEvent[]): void {
    if (!this.stream && this.held) pushEvent(out, { type: 'reasoning', text: this.held });
    this.held = '';
  }
}
