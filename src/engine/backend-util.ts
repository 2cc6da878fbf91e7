/** Pieces every Backend needs the same way: the request queue, prompt checks, prefix reuse, results. */
import { InvalidPromptError } from './errors';
import type { GenerationResult } from './types';

/** Runs requests one at a time (a backend with one sequence's KV in flight). */
export class RequestQueue {
  private tail: Promise<void> = Promise.resolve();

  /**
   * Resolves when the previous holder released; call the returned function to release. With a
   * `signal` aborted while it waits, resolves at once with null (a request that left its queue
   * frees its place without waiting its turn); the order of the others is kept.
   */
  acquire(): Promise<() => void>;
  acquire(signal: AbortSignal | undefined): Promise<(() => void) | null>;
  async acquire(signal?: AbortSignal): Promise<(() => void) | null> {
    let release!: () => void;
    const prev = this.tail;
    this.tail = new Promise<void>((ok) => (release = ok));
    if (!signal) {
      await prev;
      return release;
    }
    let onAbort = (): void => undefined;
    const aborted = new Promise<'abort'>((ok) => {
      onAbort = () => ok('abort');
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    const won = await Promise.race([prev.then(() => 'turn' as const), aborted]);
    signal.removeEventListener('abort', onAbort);
    if (won === 'turn') return release;
    // Our place passes on once the previous holder is done, so no one behind us overtakes it.
    void prev.then(release);
    return null;
  }
}

export function checkPromptIds(ids: readonly number[], vocab: number): void {
  if (ids.length === 0) throw new InvalidPromptError('the prompt has no tokens');
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= vocab) throw new InvalidPromptError(`token id ${id} is outside the vocabulary (0..${vocab - 1})`);
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

/**
 * Resolves after the current task, once pending microtasks have run: `setImmediate` in Node, a
 * MessageChannel message elsewhere (unlike `setTimeout`, never clamped to 4 ms). Awaited between
 * steps so that events (an abort, a closed connection) are seen. One channel for all callers,
 * made on first use.
 */
export function nextTask(): Promise<void> {
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  if (!taskChannel) {
    const channel = new MessageChannel();
    const waiting: Array<() => void> = [];
    channel.port1.onmessage = () => waiting.shift()?.();
    taskChannel = { post: (resolve) => (waiting.push(resolve), channel.port2.postMessage(null)) };
  }
  const { post } = taskChannel;
  return new Promise((resolve) => post(resolve));
}
let taskChannel: { post(resolve: () => void): void } | null = null;
