/** createEngine() for pages (and workers): in a dedicated Worker by default, or in this thread. */
import { defaultModelCache } from '../loader/open';
import type { CachedModel } from '../loader/cache';
import { createLocalEngine } from './local';
import { createWorkerEngine } from './worker-client';
import type { CreateEngineOptions, EngineHandle } from './types';

export async function createEngine(options: CreateEngineOptions): Promise<EngineHandle> {
  const w = options.worker ?? true;
  if (w === false || (w === true && typeof Worker === 'undefined')) {
    const { worker: _, ...rest } = options;
    return createLocalEngine(rest);
  }
  return createWorkerEngine(options, w === true ? undefined : w);
}

/** The models in this origin's model cache (OPFS or the Cache API). */
export async function listCachedModels(): Promise<CachedModel[]> {
  const cache = await defaultModelCache();
  return cache ? cache.list() : [];
}

/** Removes a cached model by its `modelKey` (from listCachedModels); false when it was not cached. */
export async function deleteCachedModel(modelKey: string): Promise<boolean> {
  const cache = await defaultModelCache();
  return cache ? cache.delete(modelKey) : false;
}
