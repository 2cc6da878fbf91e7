/**
 * Stop strings and stop regexes over streamed text. Text that could still turn into a stop string
 * is held back, so no chunk ever shows a stop string (or its start) that is later trimmed.
 */
import { partialTagSuffix } from '../text/stream-text';

/** The API's side of a choice: stopping on the text, and detokenizing. */
export interface TextOptions {
  stop: string[];
  stopRegex: string[];
  noStopTrim: boolean;
  skipSpecialTokens: boolean;
  /** Special tokens kept in the text even when skipping (tool-call markers). */
  keepSpecialIds?: number[];
}

export interface StopHit {
  /** The stop string, or the regex's source, that matched. */
  matched: string;
}

export class StopMatcher {
  /** Text received but not yet released. */
  private pending = '';
  /** Everything released so far (regexes look at the whole output). */
  private released = '';
  private readonly regexes: RegExp[];

  constructor(
    private readonly stops: readonly string[],
    regexes: readonly string[] = [],
    /** Keep the matched stop text in the output (SGLang's `no_stop_trim`). */
    private readonly keepStop = false,
  ) {
    this.regexes = regexes.map((r) => new RegExp(r, 'u'));
  }

  /**
   * Adds text; returns what may be released now and, when a stop matched, which one. After a
   * hit the output ends: the caller stops generating. `final` releases everything held.
   */
  push(delta: string, final = false): { text: string; hit?: StopHit } {
    this.pending += delta;
    const hit = this.find();
    if (hit) {
      const text = this.pending.slice(0, hit.end);
      this.pending = '';
      this.released += text;
      return { text, hit: { matched: hit.matched } };
    }
    const hold = final ? 0 : partialTagSuffix(this.pending, this.stops);
    const text = this.pending.slice(0, this.pending.length - hold);
    this.pending = this.pending.slice(this.pending.length - hold);
    this.released += text;
    return { text };
  }

  /** The earliest match in the pending text; `end` is where the output stops (after the stop with keepStop). */
  private find(): { end: number; matched: string } | null {
    let best: { at: number; end: number; matched: string } | null = null;
    for (const s of this.stops) {
      const at = this.pending.indexOf(s);
      if (at >= 0 && (!best || at < best.at)) best = { at, end: this.keepStop ? at + s.length : at, matched: s };
    }
    if (this.regexes.length) {
      // A regex can match across released text, which cannot be taken back: it then stops at the release point.
      const all = this.released + this.pending;
      for (const re of this.regexes) {
        const m = re.exec(all);
        if (!m) continue;
        const at = Math.max(0, m.index - this.released.length);
        const end = this.keepStop ? Math.max(0, m.index + m[0].length - this.released.length) : at;
        if (!best || at < best.at) best = { at, end, matched: re.source };
      }
    }
    return best;
  }
}
