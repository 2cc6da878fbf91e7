/**
 * The GPU for tests: Dawn (`webgpu` package, SwiftShader here) in Node, `navigator.gpu` in Chromium.
 * One device per test file, shared by its tests.
 */
import { acquireGPU, type GPUContext } from '../gpu/device';
import { DTYPES, type DType } from '../formats/types';

let context: Promise<GPUContext> | undefined;

/** Whether the tests run in a page or Worker (the browser project) rather than in Node. */
export const IN_BROWSER = typeof window !== 'undefined' || typeof (globalThis as { importScripts?: unknown }).importScripts === 'function';

/**
 * The weight types a kernel test loops over: every type in Node (Dawn, SwiftShader and
 * lavapipe); in Chromium, whose WebGPU is the same Dawn and Tint, a sample with one type of each
 * decode path (plain floats, the 32-blocks of the structure-of-arrays layout, a lookup-table
 * type, the K-quants' 256-blocks with 16-byte loads and with words): the browser run checks the
 * browser's device and bindings, not each type's arithmetic again. (F32, Q5_1 and IQ4_XS, the
 * second of their paths, went: 30 s of the Chromium step.)
 */
export const KERNEL_TYPES: readonly DType[] = IN_BROWSER ? (['F16', 'Q8_0', 'IQ4_NL', 'Q4_K', 'Q6_K'] as const) : DTYPES;

export function testGPU(): Promise<GPUContext> {
  context ??= (async () => {
    const gpu = IN_BROWSER ? undefined : await (await import('../gpu/node-gpu')).nodeGPU();
    return acquireGPU({ gpu });
  })();
  return context;
}

/** Largest absolute difference between two arrays, and where. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): { diff: number; index: number } {
  if (a.length !== b.length) throw new Error(`length mismatch: ${a.length} vs ${b.length}`);
  let diff = 0;
  let index = -1;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    // The first NaN is the answer: a later finite difference must not hide it.
    if (Number.isNaN(d)) return { diff: NaN, index: i };
    if (d > diff) {
      diff = d;
      index = i;
    }
  }
  return { diff, index };
}
