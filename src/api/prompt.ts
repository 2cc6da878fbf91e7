/** Fitting a prompt into the context: resolving max_tokens, refusing or truncating what does not fit. */
import type { Backend } from '../engine/types';
import { invalid } from './errors';

export interface FitOptions {
  /** max_tokens / max_completion_tokens as asked (-1 or undefined: until EOS or the end of the context). */
  maxTokens: number | undefined;
  maxTokensParam: string;
  promptParam: string;
  truncate: boolean;
}

/** The prompt ids to run (maybe cut to their end) and the tokens they leave room for. */
export function fitPrompt(ids: number[], backend: Backend, o: FitOptions): { promptIds: number[]; maxTokens: number } {
  const ctx = backend.contextLength;
  const asked = o.maxTokens === undefined || o.maxTokens === -1 ? undefined : o.maxTokens;
  if (asked !== undefined && asked >= ctx)
    throw invalid(o.maxTokensParam, `${o.maxTokensParam} must be less than the model's context length (${ctx} tokens); got ${asked}`, 'context_length_exceeded');
  const room = asked ?? 1;
  if (ids.length + room > ctx) {
    if (!o.truncate)
      throw invalid(
        o.promptParam,
        `This model's maximum context length is ${ctx} tokens. However, you requested ${ids.length + room} tokens ` +
          `(${ids.length} in the prompt, ${room} for the completion). Shorten the prompt, lower ${o.maxTokensParam}, or set truncate_sequence.`,
        'context_length_exceeded',
      );
    ids = ids.slice(ids.length - (ctx - room));
  }
  return { promptIds: ids, maxTokens: asked ?? ctx - ids.length };
}
