/**
 * The CPU reference of a BERT encoder (src/model/bert.ts), as transformers' BertModel and
 * sentence-transformers compute an embedding, composed of the kernels' own references:
 *   x   = LayerNorm(word[id] + position[p] + tokenType[0])          (embeddings; every input is segment A)
 *   per layer (post-norm: each sub-block's output is added to its input, then normed)
 *     a = attention(x Wqᵀ + bq, x Wkᵀ + bk, x Wvᵀ + bv)             (bidirectional: every token sees every token)
 *     x = LayerNorm(x + a Woᵀ + bo)                                  (BertSelfOutput)
 *     x = LayerNorm(x + gelu(x Wupᵀ + bup) Wdownᵀ + bdown)           (BertIntermediate, BertOutput; erf GELU)
 *   embedding = L2(mean of x over every token, [CLS] and [SEP] included)   (Pooling mean_tokens, Normalize)
 */
import { attentionRef } from '../kernels/attention-ref';
import { addRef } from '../kernels/add';
import { geluRef } from '../kernels/gelu';
import { layerNormRef } from '../kernels/layer-norm';
import { matmulRef } from '../kernels/matmul';
import { BERT_HEAD_TENSORS, BERT_LAYER_TENSORS, type BertConfig, type BertField } from '../model/bert';

export type BertWeights = { [F in BertField]?: Float32Array } & { layers: Array<{ [F in BertField]?: Float32Array }> };

/** The weights read by llama.cpp name (`read`), checked against the config's shapes. */
export async function loadBertWeights(c: BertConfig, read: (name: string) => Promise<Float32Array>): Promise<BertWeights> {
  const take = async (gguf: string, shape: number[]) => {
    const v = await read(gguf);
    const n = shape.reduce((a, b) => a * b, 1);
    if (v.length !== n) throw new RangeError(`${gguf} has ${v.length} values, expected [${shape.join(', ')}]`);
    return v;
  };
  const w: BertWeights = { layers: [] };
  for (const t of BERT_HEAD_TENSORS) w[t.field] = await take(t.gguf, t.shape(c));
  for (let l = 0; l < c.numLayers; l++) {
    const layer: BertWeights['layers'][number] = {};
    for (const t of BERT_LAYER_TENSORS) layer[t.field] = await take(`blk.${l}.${t.gguf}`, t.shape(c));
    w.layers.push(layer);
  }
  return w;
}

/** The last layer's rows of one input, [ids.length, hidden] (BertModel's last_hidden_state). */
export function bertForward(c: BertConfig, w: BertWeights, ids: readonly number[]): Float32Array {
  const T = ids.length;
  const H = c.hiddenSize;
  if (T > c.maxPositionEmbeddings) throw new RangeError(`an input of ${T} tokens exceeds the ${c.maxPositionEmbeddings} positions`);
  const emb = new Float32Array(T * H);
  ids.forEach((id, p) => {
    for (let i = 0; i < H; i++) emb[p * H + i] = w.wordEmbd![id * H + i]! + w.posEmbd![p * H + i]! + w.typeEmbd![i]!;
  });
  let x = layerNormRef(emb, w.embdNorm!, w.embdNormBias!, T, H, c.layerNormEps);
  const headDim = H / c.numHeads;
  const positions = Array.from({ length: T }, (_, p) => p);
  for (const l of w.layers) {
    const lin = (input: Float32Array, f: 'q' | 'k' | 'v' | 'o' | 'up' | 'down', K: number, N: number) => matmulRef(input, T, K, l[f]!, N, l[`${f}Bias`]!);
    const [q, k, v] = (['q', 'k', 'v'] as const).map((f) => lin(x, f, H, H));
    const a = attentionRef({ q: q!, keys: [k!], values: [v!], tokenSeq: new Array(T).fill(0), positions, causal: false, nHeads: c.numHeads, nKv: c.numHeads, headDim });
    x = layerNormRef(addRef(x, lin(a, 'o', H, H)), l.attnNorm!, l.attnNormBias!, T, H, c.layerNormEps);
    const h = geluRef(lin(x, 'up', H, c.intermediateSize));
    x = layerNormRef(addRef(x, lin(h, 'down', c.intermediateSize, H)), l.ffnNorm!, l.ffnNormBias!, T, H, c.layerNormEps);
  }
  return x;
}

/** Mean of `rows` ([T, H]) over every row, then L2-normalised: sentence-transformers' mean pooling of one input. */
export function meanPoolNormalized(rows: Float32Array, T: number, H: number): Float32Array {
  const mean = new Float64Array(H);
  for (let t = 0; t < T; t++) for (let i = 0; i < H; i++) mean[i]! += rows[t * H + i]! / T;
  const norm = Math.hypot(...mean);
  return Float32Array.from(mean, (m) => m / norm);
}
