/** Seeded random weights for small reference models (tests). */
import type { ModelConfig } from '../model/config';
import { expectedTensors } from '../model/tensors';

/** A linear congruential generator: the same seed, the same values in (-0.5, 0.5). */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}

/** Every required tensor of `c` under its canonical name, random; norms about 1 as applied. */
export function randomWeights(c: ModelConfig, seed: number): Map<string, Float32Array> {
  const r = rng(seed);
  const w = new Map<string, Float32Array>();
  for (const t of expectedTensors(c)) {
    if (t.optional) continue;
    const n = t.shape.reduce((a, b) => a * b, 1);
    const isNorm = t.shape.length === 1 && !t.name.endsWith('.bias');
    // norms applied as about 1 (Gemma stores w of 1 + w)
    w.set(t.name, Float32Array.from({ length: n }, () => (isNorm ? 1 - c.normWeightOffset + r() : r())));
  }
  return w;
}
