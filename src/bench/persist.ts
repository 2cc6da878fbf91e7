/**
 * The bench's KV persistence part (issue #33 part 2): time to first token of a long prompt on a
 * fresh engine (cold: every page computed), then on another fresh engine over the same store (a
 * restart: the prompt's pages read back from storage and uploaded). The goal is restart ÷ cold
 * ≤ 0.2 at 2k tokens on a GPU. Each engine is warmed up on another prompt first, so neither time
 * holds a first-use pipeline compile. Node: a temp directory; Chromium: a fresh OPFS folder.
 */
import type { GPUContext } from '../gpu/device';
import { GpuEngine } from '../engine/engine';
import type { OpenedModel } from '../model/open';
import type { KvStore } from '../loader/kv-store';
import { GREEDY } from '../testing/sampling';
import { benchPrompt } from './batching';

export interface RestartBench {
  promptTokens: number;
  coldMs: number;
  restartMs: number;
  /** restartMs / coldMs. */
  ratio: number;
  /** Prompt tokens the restarted engine took from storage. */
  cachedTokens: number;
  /** Both runs drew the same first token (they must). */
  identical: boolean;
}

/** A store nobody used yet, and how to remove it. */
async function freshStore(): Promise<{ store: KvStore; remove: () => Promise<void> }> {
  if (typeof process !== 'undefined' && process.versions?.node) {
    const [{ mkdtemp, rm }, { tmpdir }, { nodeKvStore }] = await Promise.all([import('node:fs/promises'), import('node:os'), import('../loader/kv-store-node')]);
    const dir = await mkdtemp(`${tmpdir()}/webgpu-llm-bench-kv-`);
    return { store: nodeKvStore(dir), remove: () => rm(dir, { recursive: true, force: true }) };
  }
  const { opfsKvStore } = await import('../loader/kv-store-opfs');
  const name = `bench-kv-${crypto.randomUUID()}`;
  return { store: opfsKvStore(name), remove: async () => (await navigator.storage.getDirectory()).removeEntry(name, { recursive: true }) };
}

/** One fresh engine over `store`: warmed up, then the prompt's first token timed; unloaded after (its writes settle). */
async function firstToken(gpu: GPUContext, opened: OpenedModel, store: KvStore, prompt: number[], prefillChunk: number): Promise<{ ms: number; id: number; cached: number }> {
  const engine = await GpuEngine.load(opened, { gpu, contextLength: prompt.length + 16, prefillChunk, persistKv: { store } });
  try {
    const warm = engine.generate({ promptIds: benchPrompt(prefillChunk + 8, opened.config.vocabSize, 77), maxTokens: 2, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, cachePrompt: false });
    while (!(await warm.next()).done);
    const t0 = performance.now();
    const it = engine.generate({ promptIds: prompt, maxTokens: 1, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0 });
    const first = await it.next();
    const ms = performance.now() - t0;
    let last = await it.next();
    while (!last.done) last = await it.next();
    return { ms, id: first.done ? -1 : first.value.id, cached: last.value.cachedTokens };
  } finally {
    await engine.dispose();
  }
}

export async function benchRestart(gpu: GPUContext, opened: OpenedModel, promptTokens: number, prefillChunk: number): Promise<RestartBench> {
  const { store, remove } = await freshStore();
  try {
    const prompt = benchPrompt(promptTokens, opened.config.vocabSize, 55);
    const cold = await firstToken(gpu, opened, store, prompt, prefillChunk);
    const warm = await firstToken(gpu, opened, store, prompt, prefillChunk);
    return { promptTokens, coldMs: cold.ms, restartMs: warm.ms, ratio: warm.ms / cold.ms, cachedTokens: warm.cached, identical: warm.id === cold.id };
  } finally {
    await remove().catch(() => {});
  }
}
