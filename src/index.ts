/// <reference types="@webgpu/types" preserve="true" />
// webgpu-llm: the browser entry. It loads only the transport; the engine comes with createEngine
// (in its Worker, or as a dynamic import with `worker: false`). Node-only code is in ./node.
// The reference above (kept in the emitted index.d.ts) brings WebGPU's types (GPUDevice, ...) along.
export { acquireGPU, type GPUContext, type GPUDescription, type AcquireOptions } from './gpu/device';
export { WebGPUError, type GPUErrorCode } from './gpu/errors';
// The formats layer, less its Node-only parts (fileSource, writeChunks: webgpu-llm/node).
export * from './formats/types';
export * from './formats/halfs';
export { memorySource, blobSource, httpSource, type ByteSource } from './formats/source';
export { dequantize, quantize, packScalesMinsK4, unpackScalesMinsK4 } from './formats/quants';
export { readGGUF, type GGUFFile } from './formats/gguf';
export { GGUFType, type GGUFValue, type GGUFMeta, type GGUFScalarType, type GGUFArrayItemType } from './formats/gguf-common';
export { encodeGGUF, meta, concatChunks, type GGUFTensorInput, type GGUFWriteOptions } from './formats/gguf-writer';
export {
  readSafetensors,
  encodeSafetensors,
  readSafetensorsIndex,
  type SafetensorsFile,
  type SafetensorsDType,
  type SafetensorsTensorInput,
  type SafetensorsIndex,
} from './formats/safetensors';
export { createEngine, listCachedModels, deleteCachedModel } from './transport/browser';
export { selfCheck, type SelfCheckOptions } from './transport/selfcheck-client';
export type { SelfCheckReport, SelfCheckResult, SelfCheckPrecision, AdapterReport } from './selfcheck/run';
export { installFetchShim, type FetchShimOptions } from './transport/shim';
export { registerServiceWorker, type RegisterServiceWorkerOptions, type ServiceWorkerHost } from './transport/sw-host';
export { EngineError, type StructuredError } from './transport/errors';
export type { CreateEngineOptions, EngineHandle, EngineInfo, LoraInfo, LoraPoolSpec, LoraSpec, ModelSpec } from './transport/types';
export type { LoadProgress, LoadPhase } from './loader/progress';
export type { CachedModel } from './loader/cache';
