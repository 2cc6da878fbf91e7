/**
 * createEngine() for pages (and workers): in a dedicated Worker by default, or in this thread.
 * Everything under the engine (loader, tokenizers, templates, GPU code) is imported dynamically
 * here, so that a page using the default Worker loads only the transport (comlink, fetch shim).
 */
import type { CachedModel } from '../loader/cache';
import { createWorkerEngine } from './worker-client';
import type { CreateEngineOptions, EngineHandle } from './types';

export async function createEngine(options: CreateEngineOptions): Promise<EngineHandle> {
  const w = options.worker ?? true;
  if (w === false || (w === true && typeof Worker === 'undefined')) {
    const { worker: _, ...rest } = options;
    const { createLocalEngine } = await import('./local');
    return createLocalEngine(rest);
  }
  return createWorkerEngine(options, w === true ? undefined : w);
}

/** The models in this origin's model cache (OPFS or the Cache API). */
export async function listCachedModels(): Promise<CachedModel[]> {
  const { defaultModelCache } = await import('../loader/open');
  const cache = await defaultModelCache();
  return cache ? cache.list() : [];
}

/**
 * Removes a cached model by its `modelKey` (from listCachedModels), and its KV pages (persistKv)
 * in the default KV directory (Node) or OPFS folder (browsers); false when there was neither.
 */
export async function deleteCachedModel(modelKey: string): Promise<boolean> {
  const { defaultModelCache } = await import('../loader/open');
  const cache = await defaultModelCache();
  const model = cache ? await cache.delete(modelKey) : false;
  if (typeof process === 'undefined' || !process.versions?.node) {
    if (typeof navigator === 'undefined' || typeof navigator.storage?.getDirectory !== 'function') return model;
    const { deleteOpfsKvPages } = await import('../loader/kv-store-opfs');
    return (await deleteOpfsKvPages(modelKey)) || model;
  }
  const { deleteKvPages, defaultKvDir } = await import('../loader/kv-store-node');
  return (await deleteKvPages(await defaultKvDir(), modelKey)) || model;
}
