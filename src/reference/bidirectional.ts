/**
 * A decoder family's blocks run as an encoder, on the CPU: EmbeddingGemma (gemma3 text with
 * use_bidirectional_attention). Every token attends both ways, so the pass goes layer by layer over
 * the whole input (each layer needs every token's keys first), not token by token as forward.ts's
 * KV-cached decoder does. Windowed (local) layers see a symmetric window: half the configured size
 * on each side (symmetricWindowSees). The rest of each block is forward.ts's arithmetic, with its
 * helpers: (1 + w) RMSNorms, per-head q/k norms, the local layers' own RoPE base, GeGLU, sandwich
 * post-norms, the embedding scaled by √hidden.
 */
import { attentionScale, layerBlocks, layerRope, layerUsesRope, layerWindow, type ModelConfig } from '../model/config';
import type { DenseModule } from '../model/embedding';
import { applyRope, ropeAttentionFactor, ropeInvFreqs } from '../model/rope';
import type { OpenedModel } from '../model/open';
import { assembleWeights, type ModelWeights } from '../model/tensors';
import { denseNormalized, loadDenseWeights, type DenseWeights } from './dense';
import { glu, matmul, readWeights, rmsnorm, softmax } from './forward';

type Weights = ModelWeights<Float32Array, Float32Array>;

/**
 * Whether query position q sees key position k on a layer with window `window` (null: full). The
 * configured window W (config.json's and the GGUF's sliding_window) is halved: HF's Gemma 3 config,
 * when bidirectional, turns it into W//2 + 1 and masks |q − k| < that; llama.cpp's symmetric SWA
 * masks |q − k| > n_swa/2. Both: a token sees up to ⌊W/2⌋ positions on each side.
 */
export function symmetricWindowSees(q: number, k: number, window: number | null): boolean {
  return window === null || Math.abs(q - k) <= Math.floor(window / 2);
}

/** The final norm's output of every token ((T, hidden) rows) with bidirectional attention. */
export function bidirectionalHidden(c: ModelConfig, w: Weights, ids: readonly number[]): Float32Array {
  const { hiddenSize: dim, intermediateSize: hidden, numHeads, numKvHeads, headDim } = c;
  const T = ids.length;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const group = numHeads / numKvHeads;
  const norm = (out: Float32Array, src: Float32Array | null, weight: Float32Array) => rmsnorm(out, src, weight, c.rmsNormEps, c.normWeightOffset);
  const invFreq = ropeInvFreqs(c);
  const invFreqLocal = c.ropeLocalTheta === null ? invFreq : ropeInvFreqs({ ...c, ropeTheta: c.ropeLocalTheta, ropeScaling: null });
  const mscale = ropeAttentionFactor(c);
  const row = (a: Float32Array, t: number, n: number) => a.subarray(t * n, (t + 1) * n);

  const x = new Float32Array(T * dim);
  ids.forEach((id, t) => {
    if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize) throw new RangeError(`token ${id} is outside the vocabulary (0..${c.vocabSize - 1})`);
    const r = row(x, t, dim);
    r.set(w.tokenEmbd.subarray(id * dim, (id + 1) * dim));
    for (let i = 0; i < dim; i++) r[i] *= c.embeddingScale;
  });
  const xb = new Float32Array(dim);
  const xb2 = new Float32Array(dim);
  const q = new Float32Array(T * qDim);
  const k = new Float32Array(T * kvDim);
  const v = new Float32Array(T * kvDim);
  const attOut = new Float32Array(T * qDim);
  const att = new Float32Array(T);
  const hb = new Float32Array(hidden);
  const hb2 = new Float32Array(hidden);

  for (let l = 0; l < c.numLayers; l++) {
    const lw = w.layers[l];
    const blocks = layerBlocks(c, l);
    if (blocks.mixer !== 'attention' || blocks.ffn !== 'mlp' || c.attnOutputGate) throw new RangeError(`layer ${l}: only attention and dense MLP blocks run bidirectionally`);

    // every token's q, k, v from the stream before this layer
    for (let t = 0; t < T; t++) {
      let input = row(x, t, dim);
      if (lw.attnNorm) (norm(xb, input, lw.attnNorm), (input = xb));
      const [qt, kt] = [row(q, t, qDim), row(k, t, kvDim)];
      matmul(qt, input, lw.wq, lw.bq);
      matmul(kt, input, lw.wk, lw.bk);
      matmul(row(v, t, kvDim), input, lw.wv, lw.bv);
      if (lw.qNorm && lw.kNorm) {
        if (c.qkNormScope === 'full') (norm(qt, null, lw.qNorm), norm(kt, null, lw.kNorm));
        else {
          for (let h = 0; h < numHeads; h++) norm(qt.subarray(h * headDim, (h + 1) * headDim), null, lw.qNorm);
          for (let h = 0; h < numKvHeads; h++) norm(kt.subarray(h * headDim, (h + 1) * headDim), null, lw.kNorm);
        }
      }
      if (layerUsesRope(c, l)) {
        const f = layerRope(c, l) === 'local' ? invFreqLocal : invFreq;
        applyRope(qt, numHeads, headDim, t, f, c.ropeStyle, mscale);
        applyRope(kt, numKvHeads, headDim, t, f, c.ropeStyle, mscale);
      }
    }

    // attention over the keys each query sees, both ways
    const window = layerWindow(c, l);
    const scale = attentionScale(c);
    const cap = c.attnLogitSoftcap;
    for (let t = 0; t < T; t++) {
      const seen = ids.map((_, s) => s).filter((s) => symmetricWindowSees(t, s, window));
      for (let h = 0; h < numHeads; h++) {
        const qOff = t * qDim + h * headDim;
        const kvOff = Math.floor(h / group) * headDim;
        seen.forEach((s, j) => {
          let dot = 0;
          for (let i = 0; i < headDim; i++) dot += q[qOff + i] * k[s * kvDim + kvOff + i];
          att[j] = cap === null ? dot * scale : Math.tanh((dot * scale) / cap) * cap;
        });
        softmax(att, seen.length);
        for (let i = 0; i < headDim; i++) {
          let sum = 0;
          seen.forEach((s, j) => (sum += att[j] * v[s * kvDim + kvOff + i]));
          attOut[qOff + i] = sum;
        }
      }
    }

    // per token: output projection, post-norm, residual; then the MLP as forward.ts runs it
    for (let t = 0; t < T; t++) {
      const xt = row(x, t, dim);
      matmul(xb2, row(attOut, t, qDim), lw.wo, lw.bo);
      if (lw.postAttnNorm) norm(xb2, null, lw.postAttnNorm);
      for (let i = 0; i < dim; i++) xt[i] += c.residualScale * xb2[i];
      let input = xt;
      if (lw.ffnNorm) (norm(xb, xt, lw.ffnNorm), (input = xb));
      matmul(hb, input, lw.wGate!);
      matmul(hb2, input, lw.wUp!);
      glu(hb, hb2, hidden, c.ffnActivation);
      matmul(xb2, hb, lw.wDown!);
      if (lw.postFfnNorm) norm(xb2, null, lw.postFfnNorm);
      for (let i = 0; i < dim; i++) xt[i] += c.residualScale * xb2[i];
    }
  }
  for (let t = 0; t < T; t++) norm(row(x, t, dim), null, w.outputNorm);
  return x;
}

/**
 * One input's embedding: the final norm's rows, mean-pooled over every token (special ones
 * included), through the Dense modules, L2-normalised: EmbeddingGemma's sentence-transformers chain.
 */
export function bidirectionalEmbedding(c: ModelConfig, w: Weights, dense: readonly DenseModule[], denseWeights: readonly DenseWeights[], ids: readonly number[]): Float32Array {
  const rows = bidirectionalHidden(c, w, ids);
  const dim = c.hiddenSize;
  const mean = new Float64Array(dim);
  for (let t = 0; t < ids.length; t++) for (let i = 0; i < dim; i++) mean[i] += rows[t * dim + i] / ids.length;
  return denseNormalized(Float32Array.from(mean), dense, denseWeights);
}

/** An opened bidirectional model's reference embedder (EmbeddingGemma from its folder or GGUF): ids -> its vector. */
export async function loadBidirectionalEmbedder(opened: OpenedModel): Promise<(ids: readonly number[]) => Float32Array> {
  const c = opened.config;
  const weights = await readWeights(opened);
  const w = assembleWeights<Float32Array, Float32Array>(c, (t) => weights.get(t.name));
  const dense = c.embedding?.dense ?? [];
  const denseWeights = await loadDenseWeights(dense, (name) => opened.readTensorF32(name));
  return (ids) => bidirectionalEmbedding(c, w, dense, denseWeights, ids);
}
