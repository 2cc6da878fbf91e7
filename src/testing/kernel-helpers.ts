/** Helpers shared by the kernel GPU tests: seeded data, act-precision upload/read-back, one-pass runs. */
import { f16ArrayToF32, f32ArrayToF16 } from '../formats/halfs';
import { readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import type { Precision } from '../gpu/pipelines';
import { pipelineCache } from '../gpu/run-kernel';
import type { OpContext } from '../kernels/op';

/** Uniform values in [-scale, scale) from a seeded LCG. */
export function random(n: number, seed: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  let s = (seed * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s / 2 ** 32) * 2 - 1) * scale;
  }
  return out;
}

/** A seeded permutation of 0..n-1 (Fisher-Yates over the same LCG). */
export function shuffled(n: number, seed: number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  const r = random(n, seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(((r[i]! + 1) / 2) * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

/** Values as the kernel's `act` sees them: f16-rounded when precision is f16. */
export function actRound(x: Float32Array, precision: Precision): Float32Array {
  return precision === 'f16' ? f16ArrayToF32(f32ArrayToF16(x)) : x;
}

export function uploadAct(device: GPUDevice, x: Float32Array, precision: Precision): GPUBuffer {
  return uploadBuffer(device, precision === 'f16' ? f32ArrayToF16(x) : x, STORAGE);
}

export async function readAct(device: GPUDevice, buffer: GPUBuffer, n: number, precision: Precision): Promise<Float32Array> {
  const bytes = await readBuffer(device, buffer, n * (precision === 'f16' ? 2 : 4));
  return precision === 'f16' ? f16ArrayToF32(new Uint16Array(bytes)) : new Float32Array(bytes);
}

export function opContext(device: GPUDevice, precision: Precision): OpContext {
  return { device, cache: pipelineCache(device), precision };
}

/** Records `encode` into one compute pass, submits it and fails on a validation error. */
export async function runPass(device: GPUDevice, encode: (pass: GPUComputePassEncoder) => void): Promise<void> {
  device.pushErrorScope('validation');
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  encode(pass);
  pass.end();
  device.queue.submit([encoder.finish()]);
  const error = await device.popErrorScope();
  if (error) throw new Error(`validation error: ${error.message}`);
}

/** Largest |a - b| / max(1, |b|) — relative for large values, absolute near zero. */
export function maxRelDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length mismatch: ${a.length} vs ${b.length}`);
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!) / Math.max(1, Math.abs(b[i]!));
    if (Number.isNaN(d)) return NaN; // a NaN anywhere fails the comparison; a later finite value must not hide it
    if (d > worst) worst = d;
  }
  return worst;
}
