/**
 * The GPU for tests: Dawn (`webgpu` package, SwiftShader here) in Node, `navigator.gpu` in Chromium.
 * One device per test file, shared by its tests.
 */
import { acquireGPU, type GPUContext } from '../gpu/device';

let context: Promise<GPUContext> | undefined;

export function testGPU(): Promise<GPUContext> {
  context ??= (async () => {
    const inBrowser = typeof window !== 'undefined' || typeof (globalThis as { importScripts?: unknown }).importScripts === 'function';
    const gpu = inBrowser ? undefined : await (await import('../gpu/node-gpu')).nodeGPU();
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
