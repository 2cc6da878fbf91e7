/** Helpers for parsers that watch a text stream for tags. */

/** Length of the longest suffix of `text` that is a proper prefix of one of `tags` (held back, it may be a tag's start). */
export function partialTagSuffix(text: string, tags: readonly string[]): number {
  let best = 0;
  for (const tag of tags) {
    for (let n = Math.min(tag.length - 1, text.length); n > best; n--) {
      if (text.endsWith(tag.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

/** Events of the chat output parsers, in the order they happen. */
export type OutputEvent =
  | { type: 'content'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool_call'; delta: ToolCallDelta };

/** One element of OpenAI's streamed `delta.tool_calls`. */
export interface ToolCallDelta {
  index: number;
  /** On the first delta of a call only. */
  id?: string;
  type?: 'function';
  function: { name?: string; arguments?: string };
}

/** Adds an event, merging it into the previous one when both are text of the same kind. */
export function pushEvent(out: OutputEvent[], e: OutputEvent): void {
  if (e.type !== 'tool_call' && e.text === '') return;
  const last = out[out.length - 1];
  if (last && last.type === e.type && e.type !== 'tool_call') (last as { text: string }).text += (e as { text: string }).text;
  else out.push(e);
}
