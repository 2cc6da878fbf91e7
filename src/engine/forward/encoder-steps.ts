/**
 * What the GPU sentence encoders (./bert.ts, ./gemma-encoder.ts) share around their step: the
 * inputs split into steps of up to maxTokens tokens and maxSeqs inputs, in order, and the L2
 * normalisation of each pooled vector.
 */
import { readBuffer } from '../../gpu/buffers';
import type { DenseHead } from './dense';

/** Each input's vector from `step` over batches that fit; every input must fit one step alone. */
export async function embedInSteps(
  inputs: readonly (readonly number[])[],
  limits: { maxTokens: number; maxSeqs: number; maxLength: number },
  step: (batch: readonly (readonly number[])[]) => Promise<Float32Array[]>,
): Promise<Float32Array[]> {
  const most = Math.min(limits.maxTokens, limits.maxLength);
  for (const [i, ids] of inputs.entries()) {
    if (ids.length === 0) throw new RangeError(`input ${i} is empty`);
    if (ids.length > most) throw new RangeError(`input ${i} has ${ids.length} tokens; a step takes at most ${most}`);
  }
  const out: Float32Array[] = [];
  let batch: (readonly number[])[] = [];
  let tokens = 0;
  for (const ids of inputs) {
    if (batch.length === limits.maxSeqs || tokens + ids.length > limits.maxTokens) {
      out.push(...(await step(batch)));
      batch = [];
      tokens = 0;
    }
    batch.push(ids);
    tokens += ids.length;
  }
  if (batch.length) out.push(...(await step(batch)));
  return out;
}

/**
 * The end of an encoder's step: the Dense modules (./dense.ts) on the pooled f32 [S, d] rows,
 * before they are normalised, the step submitted, and each input's vector read back, L2-normalised.
 */
export async function finishStep(device: GPUDevice, encoder: GPUCommandEncoder, pooled: GPUBuffer, dense: DenseHead | null, seqs: number, d: number): Promise<Float32Array[]> {
  dense?.encode(encoder, seqs);
  device.queue.submit([encoder.finish()]);
  const n = dense?.size ?? d;
  const all = new Float32Array(await readBuffer(device, dense?.out ?? pooled, seqs * n * 4));
  return Array.from({ length: seqs }, (_, s) => normalized(all.subarray(s * n, (s + 1) * n)));
}

/** `v` over its L2 norm (sentence-transformers' Normalize); a zero vector stays zero. */
export function normalized(v: Float32Array): Float32Array {
  let ss = 0;
  for (const x of v) ss += x * x;
  const inv = ss > 0 ? 1 / Math.sqrt(ss) : 0;
  return Float32Array.from(v, (x) => x * inv);
}
