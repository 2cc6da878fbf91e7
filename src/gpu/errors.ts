/**
 * Typed GPU errors. Each carries a stable `code` (for the API layer's error objects and the demo's
 * messages) and a message that says what to do, not just what went wrong.
 */
export type GPUErrorCode =
  | 'webgpu_unavailable'
  | 'no_adapter'
  | 'limits_too_small'
  | 'device_lost'
  | 'out_of_memory'
  | 'validation'
  | 'internal';

export class WebGPUError extends Error {
  override readonly name = 'WebGPUError';
  constructor(
    readonly code: GPUErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  /** A plain object that survives structured clone (postMessage) and JSON. */
  toJSON(): { name: string; code: GPUErrorCode; message: string; details?: Record<string, unknown> } {
    return { name: this.name, code: this.code, message: this.message, details: this.details };
  }
}

export const NO_WEBGPU_HELP =
  'WebGPU is not available here. Use Chrome or Edge 113+ (desktop or Android), Safari 26+, or Firefox 141+ on Windows; ' +
  'on Linux start Chrome with --enable-unsafe-webgpu (and --enable-features=Vulkan). Pages must be served over https or from http://localhost. ' +
  'In Node, install the `webgpu` package (and a Vulkan driver, or SwiftShader via VK_ICD_FILENAMES).';

export const NO_ADAPTER_HELP =
  'The browser exposes WebGPU but returned no GPU adapter. The GPU may be blocklisted or the driver missing: check chrome://gpu, ' +
  'update the graphics driver, or enable chrome://flags/#enable-unsafe-webgpu.';

/** Turns a WebGPU error object (from an error scope or `uncapturederror`) into a typed error. */
export function fromGPUError(error: GPUError, context = ''): WebGPUError {
  const where = context ? ` in ${context}` : '';
  if (isA(error, 'GPUOutOfMemoryError')) {
    return new WebGPUError(
      'out_of_memory',
      `The GPU ran out of memory${where}: ${error.message}. Close other GPU-heavy tabs or choose a smaller or more quantised model.`,
    );
  }
  if (isA(error, 'GPUValidationError')) {
    return new WebGPUError('validation', `WebGPU validation error${where}: ${error.message}`);
  }
  return new WebGPUError('internal', `WebGPU internal error${where}: ${error.message}`);
}

/** `instanceof` against a WebGPU global that may not exist (Node before `webgpu` is loaded). */
function isA(error: GPUError, className: string): boolean {
  const ctor = (globalThis as Record<string, unknown>)[className];
  return (typeof ctor === 'function' && error instanceof ctor) || error.constructor?.name === className;
}
