/**
 * The one place a request becomes sampling parameters: every shared field whose row's `into`
 * names `sampling`, `dry` or `mirostat` (SAMPLING_FIELDS in protocol/common.ts), each resolved
 * the same way: the request, then the model's generation_config.json (rows marked
 * `modelDefault`), then the row's default (OpenAI's; llama.cpp's for DRY and mirostat).
 */
import type { GenerationDefaults } from '../model/generation-config';
import type { SamplingParams } from '../engine/types';
import type { ChatCompletionRequest } from './protocol/chat';
import { SAMPLING_FIELDS, type SamplingFields } from './protocol/common';
import type { CompletionRequest } from './protocol/completions';
import { resolve } from './protocol/field';

/** llama.cpp's DRY defaults, as the table declares them. */
export const DRY_DEFAULTS = resolve(SAMPLING_FIELDS, 'dry', {});

/** Either endpoint's logprobs: completions' an int (alternatives per token), chat's a boolean with top_logprobs. */
export type LogprobFields = Pick<ChatCompletionRequest, 'top_logprobs'> & { logprobs?: ChatCompletionRequest['logprobs'] | CompletionRequest['logprobs'] };

export type { GenerationDefaults };

export function toSamplingParams(request: Partial<SamplingFields> & LogprobFields, generationConfig: GenerationDefaults = {}): SamplingParams {
  const r = request;
  const logprobs = typeof r.logprobs === 'number' ? true : !!r.logprobs;
  const topLogprobs = typeof r.logprobs === 'number' ? r.logprobs : logprobs ? (r.top_logprobs ?? 0) : 0;
  return {
    ...resolve(SAMPLING_FIELDS, 'sampling', r, generationConfig),
    dry: resolve(SAMPLING_FIELDS, 'dry', r, generationConfig),
    mirostat: resolve(SAMPLING_FIELDS, 'mirostat', r, generationConfig),
    topLogprobs,
    logprobs,
  };
}
