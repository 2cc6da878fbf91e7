// webgpu-llm: the browser entry.
export { acquireGPU, type GPUContext, type GPUDescription, type AcquireOptions } from './gpu/device';
export { WebGPUError, type GPUErrorCode } from './gpu/errors';
export * from './formats/index';
export { createEngine, listCachedModels, deleteCachedModel } from './transport/browser';
export { installFetchShim, type FetchShimOptions } from './transport/shim';
export { registerServiceWorker, type RegisterServiceWorkerOptions, type ServiceWorkerHost } from './transport/sw-host';
export { EngineError, type StructuredError } from './transport/errors';
export type { CreateEngineOptions, EngineHandle, EngineInfo, ModelSpec } from './transport/types';
export type { LoadProgress, LoadPhase } from './loader/progress';
export type { CachedModel } from './loader/cache';
