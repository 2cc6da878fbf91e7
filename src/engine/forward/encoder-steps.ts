/**
 * What the GPU sentence encoders (./bert.ts, ./gemma-encoder.ts) share around their step: the
 * inputs split into steps of up to maxTokens tokens and maxSeqs inputs, in order, and the L2
 * normalisation of each pooled vector.
 */

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

/** `v` over its L2 norm (sentence-transformers' Normalize); a zero vector stays zero. */
export function normalized(v: Float32Array): Float32Array {
  let ss = 0;
  for (const x of v) ss += x * x;
  const inv = ss > 0 ? 1 / Math.sqrt(ss) : 0;
  return Float32Array.from(v, (x) => x * inv);
}
