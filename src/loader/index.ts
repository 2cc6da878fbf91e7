/** The loader: resolve a model, cache its files, open it, stream its tensors to the GPU. */
export { LoadError, type LoadErrorCode } from './errors';
export { ProgressEmitter, type LoadPhase, type LoadProgress, type ProgressCallback, type FileProgress, type PhaseProgress } from './progress';
export { resolveModel, type ModelInput, type ResolvedModel, type ResolveOptions } from './resolve';
export type { ModelCache, CacheEntry, CachedModel, ChunkSource, PutOptions } from './cache';
export { nodeDirCache, defaultCacheDir } from './cache-node';
export { opfsCache } from './cache-opfs';
export { cacheApiCache } from './cache-api';
export { cachedSource, cachedText, lazySource, type CachedSourceOptions } from './download';
export { openModelWithCache, defaultModelCache, type LoadOptions, type LoadedModel } from './open';
export { uploadTensors, uploadOrder, type UploadFn, type UploadOptions, type UploadResult } from './upload';
