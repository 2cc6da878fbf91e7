import type { SamplingParams } from '../engine/types';

/** Greedy decoding with every processor off: what the correctness tests compare. */
export const GREEDY: SamplingParams = {
  temperature: 0,
  topP: 1,
  topK: 0,
  minP: 0,
  frequencyPenalty: 0,
  presencePenalty: 0,
  repetitionPenalty: 1,
  logitBias: {},
  dry: { multiplier: 0, base: 1.75, allowedLength: 2, sequenceBreakers: [] },
  mirostat: { mode: 0, tau: 5, eta: 0.1 },
  topLogprobs: 0,
  logprobs: false,
};
