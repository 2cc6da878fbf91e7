/** Pieces every Backend needs the same way: the request queue, prompt checks, prefix reuse, results. */
import type { GenerationResult } from './types';

/** Runs requests one at a time (a backend with one sequence's KV in flight). */
export class RequestQueue {
  private tail: Promise<void> = Promise.resolve();

  /** Resolves when the previous holder released; call the returned function to release. */
  async acquire(): Promise<() => void> {
    let release!: () => void;
    const prev = this.tail;
    this.tail = new Promise<void>((ok) => (release = ok));
    await prev;
    return release;
  }
}

export function checkPromptIds(ids: readonly number[], vocab: number): void {
  if (ids.length === 0) throw new RangeError('the prompt has no tokens');
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= vocab) throw new RangeError(`token id ${id} is outside the vocabulary (0..${vocab - 1})`);
  }
}

/** Length of the prefix of `ids` held in `cached`, leaving at least the last id to compute (its logits are needed). */
export function reusablePrefix(cached: readonly number[], ids: readonly number[]): number {
  let common = 0;
  while (common < cached.length && common < ids.length - 1 && cached[common] === ids[common]) common++;
  return common;
}

/** Builds the GenerationResults of one request. */
export function resultFor(promptTokens: number) {
  return (finishReason: GenerationResult['finishReason'], completionTokens: number, cachedTokens: number, stopTokenId?: number): GenerationResult => ({
    finishReason,
    ...(stopTokenId !== undefined ? { stopTokenId } : {}),
    promptTokens,
    completionTokens,
    cachedTokens,
  });
}
