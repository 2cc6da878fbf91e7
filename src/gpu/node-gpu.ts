/**
 * WebGPU in Node through the `webgpu` package (Dawn). Imported dynamically so that browser bundles
 * never see it. Installs the WebGPU globals (GPUBufferUsage, GPUMapMode, error classes, ...) that
 * browser code expects to find on `globalThis`.
 */
import { WebGPUError } from './errors';

let cached: GPU | undefined;

/**
 * `flags`: Dawn's, e.g. `disable-dawn-features=timestamp_quantization` (the bench); used by the first
 * call only, which creates the instance every later call shares.
 */
export async function nodeGPU(flags: string[] = []): Promise<GPU> {
  if (cached) return cached;
  let mod: { create: (flags: string[]) => GPU; globals: Record<string, unknown> };
  try {
    mod = (await import(/* @vite-ignore */ 'webgpu')) as typeof mod;
  } catch (cause) {
    throw new WebGPUError(
      'webgpu_unavailable',
      'The `webgpu` package (Dawn for Node) could not be loaded: run `npm install webgpu`. ' + String(cause),
    );
  }
  Object.assign(globalThis, mod.globals);
  cached = mod.create(flags);
  return cached;
}
