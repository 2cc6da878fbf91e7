/**
 * The one place a request becomes sampling parameters. Precedence for every field: the request,
 * then the model's generation_config.json, then OpenAI's default (llama.cpp's for DRY/mirostat).
 */
import type { GenerationDefaults } from '../model/generation-config';
import type { SamplingParams } from '../engine/types';
import type { SamplingFields } from './protocol/common';


/** llama.cpp's DRY defaults. */
export const DRY_DEFAULTS = { base: 1.75, allowedLength: 2, sequenceBreakers: ['\n', ':', '"', '*'] };

export interface LogprobFields {
  /** Completions: an int (alternatives per token); chat: a boolean. */
  logprobs?: number | boolean;
  /** Chat: alternatives per token. */
  top_logprobs?: number;
}

export type { GenerationDefaults };

export function toSamplingParams(request: SamplingFields & LogprobFields, generationConfig: GenerationDefaults = {}): SamplingParams {
  const r = request;
  const g = generationConfig;
  const pick = <T>(...values: (T | undefined | null)[]): T => values.find((v) => v !== undefined && v !== null) as T;
  const topK = pick<number>(r.top_k, g.top_k, 0);
  const logprobs = typeof r.logprobs === 'number' ? true : !!r.logprobs;
  const topLogprobs = typeof r.logprobs === 'number' ? r.logprobs : logprobs ? (r.top_logprobs ?? 0) : 0;
  const logitBias: Record<number, number> = {};
  for (const [k, v] of Object.entries(r.logit_bias ?? {})) logitBias[Number(k)] = v;
  return {
    temperature: pick(r.temperature, g.temperature, 1),
    topP: pick(r.top_p, g.top_p, 1),
    topK: topK < 0 ? 0 : topK,
    minP: pick(r.min_p, g.min_p, 0),
    ...(r.seed !== undefined ? { seed: r.seed } : {}),
    frequencyPenalty: r.frequency_penalty ?? 0,
    presencePenalty: r.presence_penalty ?? 0,
    repetitionPenalty: pick(r.repetition_penalty, g.repetition_penalty, 1),
    logitBias,
    dry: {
      multiplier: r.dry_multiplier ?? 0,
      base: r.dry_base ?? DRY_DEFAULTS.base,
      allowedLength: r.dry_allowed_length ?? DRY_DEFAULTS.allowedLength,
      sequenceBreakers: r.dry_sequence_breakers ?? DRY_DEFAULTS.sequenceBreakers,
    },
    mirostat: { mode: r.mirostat ?? 0, tau: r.mirostat_tau ?? 5, eta: r.mirostat_eta ?? 0.1 },
    topLogprobs,
    logprobs,
  };
}
