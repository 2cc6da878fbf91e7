import type { GeneratedToken, GenerateRequest, GenerationResult, SamplingParams } from '../engine/types';

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

/** A request for `promptIds` with GREEDY sampling changed by `sampling`, EOS ignored. */
export function greedyRequest(promptIds: number[], maxTokens: number, sampling: Partial<SamplingParams> = {}, extra: Partial<GenerateRequest> = {}): GenerateRequest {
  return { promptIds, maxTokens, sampling: { ...GREEDY, ...sampling }, stopTokenIds: [], ignoreEos: true, minTokens: 0, ...extra };
}

/** Every token of a generation and its result; `onToken` sees the count so far after each. */
export async function drainGeneration(
  gen: AsyncGenerator<GeneratedToken, GenerationResult, void>,
  onToken?: (n: number) => void,
): Promise<{ ids: number[]; result: GenerationResult }> {
  const ids: number[] = [];
  for (;;) {
    const r = await gen.next();
    if (r.done) return { ids, result: r.value };
    ids.push(r.value.id);
    onToken?.(ids.length);
  }
}
