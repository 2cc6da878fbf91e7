/**
 * The reference merge: W + scale · B · A for every adapted matrix, in float64, stored as float32.
 * The oracle for the GPU's low-rank path (which never modifies W); the result is a weight map
 * ReferenceModel.fromWeights takes.
 */
import type { ModelConfig } from '../model/config';
import { fitLora } from './fit';
import { baseTensorName } from './targets';
import { LoraError, type LoraAdapter, type LoraWeight } from './types';

/**
 * Base float32 weights (canonical names) with the adapter merged in: the adapted matrices are
 * new arrays, every other entry is the base's own. The adapter is fitted to `config` first.
 */
export function mergeLora(config: ModelConfig, weights: ReadonlyMap<string, Float32Array>, adapter: LoraAdapter): Map<string, Float32Array> {
  const fitted = fitLora(adapter, config);
  const out = new Map(weights);
  for (const w of fitted.weights) {
    const name = baseTensorName(w.layer, w.target);
    const base = out.get(name);
    if (!base || base.length !== w.outFeatures * w.inFeatures)
      throw new LoraError('wrong_base', fitted.file, `the base weights have no ${name} of ${w.outFeatures}x${w.inFeatures} values to merge into`);
    out.set(name, mergeOne(base, w));
  }
  return out;
}

/** W [out, in] + scale · B [out, r] · A [r, in], accumulated in float64. */
export function mergeOne(base: Float32Array, w: LoraWeight): Float32Array {
  const { rank, inFeatures: n, outFeatures: m, a, b, scale } = w;
  const out = new Float32Array(m * n);
  const row = new Float64Array(n);
  for (let o = 0; o < m; o++) {
    row.fill(0);
    for (let k = 0; k < rank; k++) {
      const bk = b[o * rank + k]!;
      const aRow = k * n;
      for (let i = 0; i < n; i++) row[i] += bk * a[aRow + i]!;
    }
    for (let i = 0; i < n; i++) out[o * n + i] = base[o * n + i]! + scale * row[i]!;
  }
  return out;
}
