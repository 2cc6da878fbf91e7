/**
 * The draft model's rebuild after a lost device (./draft.ts `DraftModel.rebuild`), on a stand-in
 * backend (no GPU): while it rebuilds and after a rebuild that failed it guesses nothing at once,
 * without a step, so the model serves on without its guesses; a later rebuild that succeeds brings
 * them back. The GPU side (guesses taken on the new device, no buffer left on the lost one) is
 * speculation-loss.test.ts's.
 */
import { describe, expect, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import { DraftModel, type DraftBackend } from './draft';
import { KvPages } from './kv-pages';

/** A backend whose steps are counted and fail, and whose rebuild the test settles. */
function standIn() {
  let settle: { ok(): void; fail(e: Error): void } | null = null;
  const backend = {
    submits: 0,
    contextLength: 64,
    memoryUse: { weights: 0, kvCache: 0, other: 0 },
    stepper: {
      kv: new KvPages(8, 16),
      runner: {
        place() {},
        submit: () => {
          backend.submits++;
          return Promise.reject(new Error('no GPU'));
        },
      },
      env: { eosIds: [], contextLength: 64, breakers: () => () => false, moe: false, verifies: false },
      limits: { maxSeqs: 2, maxTokens: 8 },
      cutsBack: true,
    },
    rebuild: () => new Promise<void>((ok, fail) => (settle = { ok, fail })),
    dispose: async () => {},
  };
  return { backend: backend as DraftBackend & { submits: number }, settle: () => settle! };
}

const gpu = {} as GPUContext;

describe('DraftModel.rebuild', () => {
  it('guesses nothing while it rebuilds and after a failed rebuild, without a step; a later rebuild brings the guesses back', async () => {
    const { backend, settle } = standIn();
    const model = new DraftModel(backend, 4);
    const session = model.open();
    const rebuilding = model.rebuild(gpu);
    expect(await session.draft([1, 2, 3], 4)).toEqual([]);
    settle().fail(new Error('out of memory'));
    await expect(rebuilding).rejects.toThrow('out of memory');
    expect(model.failed).toBe(true);
    expect(await session.draft([1, 2, 3], 4)).toEqual([]);
    expect(backend.submits).toBe(0);
    // A later loss's rebuild succeeds: the draft steps again (this stand-in's steps fail: no guess, and the slot goes back).
    const again = model.rebuild(gpu);
    settle().ok();
    await again;
    expect(model.failed).toBe(false);
    expect(await session.draft([1, 2, 3], 4)).toEqual([]);
    expect(backend.submits).toBe(1);
    expect(model.pages.used).toBe(0);
  });
});
