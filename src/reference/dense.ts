/**
 * sentence-transformers' modules after pooling, on the CPU: each Dense module in order,
 * y = act(W x + b) (Tanh or Identity, src/model/embedding.ts), then Normalize (L2). They act on the
 * pooled vector before it is normalised, as the modules run in modules.json's order.
 */
import { matmulRef } from '../kernels/matmul';
import { softcapRef } from '../kernels/softcap';
import type { DenseModule } from '../model/embedding';

export interface DenseWeights {
  weight: Float32Array;
  bias?: Float32Array;
}

/** Each module's weight (and bias) by llama.cpp name (`dense_2.weight`, ...). */
export async function loadDenseWeights(modules: readonly DenseModule[], read: (name: string) => Promise<Float32Array>): Promise<DenseWeights[]> {
  return Promise.all(modules.map(async (m) => ({ weight: await read(`${m.name}.weight`), ...(m.bias ? { bias: await read(`${m.name}.bias`) } : {}) })));
}

/** The pooled vector through the Dense modules, then L2-normalised. */
export function denseNormalized(pooled: Float32Array, modules: readonly DenseModule[], weights: readonly DenseWeights[]): Float32Array {
  let v = pooled;
  modules.forEach((m, i) => {
    const y = matmulRef(v, 1, m.inFeatures, weights[i]!.weight, m.outFeatures, weights[i]!.bias);
    // tanh(x) is the soft cap at 1.
    v = m.activation === 'tanh' ? softcapRef(y, 1) : y;
  });
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}
