// webgpu-llm: the browser entry.
export { acquireGPU, type GPUContext, type GPUDescription, type AcquireOptions } from './gpu/device';
export { WebGPUError, type GPUErrorCode } from './gpu/errors';
export * from './formats/index';
