/**
 * The CPU reference forward pass: the oracle every GPU test compares against. Plain and slow on
 * purpose. Buffers are float32 like the GPU's; dot products accumulate in float64 so that the
 * reference's own rounding stays far below any tolerance a test states. Each paragraph of a
 * layer is one block of the GPU pass (src/engine/forward/: attention.ts, shortconv.ts, mlp.ts, moe.ts,
 * head.ts); Qwen3.5's DeltaNet runs here alone so far.
 */
import { attentionScale, deltaNetConvDim, layerBlocks, layerRope, layerUsesRope, layerWindow, mamba2ConvDim, type ModelConfig } from '../model/config';
import type { OpenedModel } from '../model/open';
import { assembleWeights, modelTensors, type ModelWeights } from '../model/tensors';
import { ModelError } from '../model/errors';
import { routeTopK } from '../model/moe';
import { shortConvStep } from '../model/short-conv';
import { deltaNetState, deltaNetToken, type DeltaNetState } from '../model/delta-net';
import { mamba2State, mamba2Token, type Mamba2State } from '../model/mamba2';
import { applyRope, ropeAttentionFactor, ropeInvFreqs } from '../model/rope';

// Every weight float32, named and shaped as src/model/tensors.ts's table says; output is
// token_embd when tied.
type Weights = ModelWeights<Float32Array, Float32Array>;

/** Canonical tensor name -> float32 values, e.g. from `readTensorF32`. */
export type WeightMap = ReadonlyMap<string, Float32Array>;

export class ReferenceModel {
  readonly config: ModelConfig;
  private readonly w: Weights;
  private readonly invFreq: Float64Array; // (rotaryDim / 2)
  private readonly invFreqLocal: Float64Array; // (rotaryDim / 2) of windowed layers with their own base (Gemma 3)
  private readonly mscale: number; // cos/sin multiplier (LongRoPE's or YaRN's attention factor; 1 elsewhere)

  // Run state, allocated once.
  private readonly x: Float32Array; // (dim) the residual stream
  private readonly xb: Float32Array; // (dim) normed input of a block
  private readonly xb2: Float32Array; // (dim) output of a block before the residual add
  private readonly q: Float32Array; // (numHeads * headDim)
  private readonly qGate: Float32Array; // (2 * numHeads * headDim) gated attention's q_proj: each head's query, then its gate
  private readonly k: Float32Array; // (numKvHeads * headDim)
  private readonly v: Float32Array; // (numKvHeads * headDim)
  private readonly attOut: Float32Array; // (numHeads * headDim)
  private readonly hb: Float32Array; // (hidden) silu(gate) * up
  private readonly hb2: Float32Array; // (hidden) up
  private readonly logits: Float32Array; // (vocab)
  // Mixture of experts: router logits (experts), one expert's act(gate)·up and up (its
  // intermediate size, or the shared expert's when larger), its output (dim).
  private readonly routerLogits: Float32Array;
  private readonly eh: Float32Array;
  private readonly eh2: Float32Array;
  private readonly eo: Float32Array;
  // The experts each layer routed the last token to, most probable first (`return_routed_experts`).
  private routed: number[][] = [];
  // LFM2's gated short convolution: in_proj's B, C, x rows (3 * dim), B ⊙ x and the conv's output (dim each).
  private readonly bcx: Float32Array;
  private readonly bx: Float32Array;
  private readonly convOut: Float32Array;
  // Per conv layer its state, the last kernel - 1 inputs B ⊙ x ((kernel - 1) * dim, oldest first); empty elsewhere.
  private readonly convState: Float32Array[];
  // Qwen3.5's DeltaNet: per layer its conv and delta-rule state (null on other layers); the
  // projections' outputs (qkv before the conv, z, b, a) and the core's output (numVHeads * headVDim).
  private readonly dnState: (DeltaNetState | null)[];
  private readonly dnQkv: Float32Array;
  private readonly dnZ: Float32Array;
  private readonly dnB: Float32Array;
  private readonly dnA: Float32Array;
  private readonly dnOut: Float32Array;
  // Granite 4.0-H's Mamba-2: per-layer state, in_proj's z/xBC/dt rows, the output before out_proj.
  private readonly mbState: (Mamba2State | null)[];
  private readonly mbProj: Float32Array;
  private readonly mbOut: Float32Array;
  private att: Float32Array; // (capacity) scores of one head
  // KV cache, grown by doubling: per layer (capacity, numKvHeads * headDim).
  private keyCache: Float32Array[];
  private valueCache: Float32Array[];
  private capacity = 0;
  private filled = 0; // positions held in the KV cache

  private constructor(config: ModelConfig, weights: Weights, ropeFreqFactors?: Float32Array, contextLength?: number) {
    // This decoder is causal; EmbeddingGemma's pass is ./bidirectional.ts.
    if (config.bidirectional) throw new ModelError('unsupported_arch', `${config.arch}: a bidirectional model runs on reference/bidirectional.ts, not the causal reference`, 'use_bidirectional_attention');
    this.config = config;
    this.w = weights;
    // The context picks LongRoPE's factor set, as the engine's does (model/rope.ts).
    this.invFreq = ropeInvFreqs(config, ropeFreqFactors, contextLength);
    this.mscale = ropeAttentionFactor(config);
    // Gemma 3's local layers: their own base, unscaled.
    this.invFreqLocal = config.ropeLocalTheta === null ? this.invFreq : ropeInvFreqs({ ...config, ropeTheta: config.ropeLocalTheta, ropeScaling: null });
    const { hiddenSize: dim, intermediateSize: hidden, numHeads, numKvHeads, headDim, vocabSize } = config;
    this.x = new Float32Array(dim);
    this.xb = new Float32Array(dim);
    this.xb2 = new Float32Array(dim);
    this.q = new Float32Array(numHeads * headDim);
    this.qGate = new Float32Array(config.attnOutputGate ? 2 * numHeads * headDim : 0);
    this.k = new Float32Array(numKvHeads * headDim);
    this.v = new Float32Array(numKvHeads * headDim);
    this.attOut = new Float32Array(numHeads * headDim);
    this.hb = new Float32Array(hidden);
    this.hb2 = new Float32Array(hidden);
    this.logits = new Float32Array(vocabSize);
    const moe = config.moe;
    const expertHidden = moe ? Math.max(moe.expertIntermediateSize, moe.sharedExpertIntermediateSize ?? 0) : 0;
    this.routerLogits = new Float32Array(moe?.numExperts ?? 0);
    this.eh = new Float32Array(expertHidden);
    this.eh2 = new Float32Array(expertHidden);
    this.eo = new Float32Array(moe ? dim : 0);
    const sc = config.shortConv;
    this.bcx = new Float32Array(sc ? 3 * dim : 0);
    this.bx = new Float32Array(sc ? dim : 0);
    this.convOut = new Float32Array(sc ? dim : 0);
    this.convState = Array.from({ length: config.numLayers }, (_, l) => new Float32Array(sc && layerBlocks(config, l).mixer === 'shortconv' ? (sc.kernel - 1) * dim : 0));
    const dn = config.deltaNet;
    this.dnState = Array.from({ length: config.numLayers }, (_, l) => (dn && layerBlocks(config, l).mixer === 'deltanet' ? deltaNetState(dn) : null));
    this.dnQkv = new Float32Array(dn ? deltaNetConvDim(dn) : 0);
    this.dnZ = new Float32Array(dn ? dn.numVHeads * dn.headVDim : 0);
    this.dnB = new Float32Array(dn ? dn.numVHeads : 0);
    this.dnA = new Float32Array(dn ? dn.numVHeads : 0);
    this.dnOut = new Float32Array(dn ? dn.numVHeads * dn.headVDim : 0);
    const mb = config.mamba2;
    this.mbState = Array.from({ length: config.numLayers }, (_, l) => (mb && layerBlocks(config, l).mixer === 'mamba2' ? mamba2State(mb) : null));
    this.mbProj = new Float32Array(mb ? 2 * mb.numHeads * mb.headDim + 2 * mb.numGroups * mb.stateSize + mb.numHeads : 0);
    this.mbOut = new Float32Array(mb ? mb.numHeads * mb.headDim : 0);
    this.att = new Float32Array(0);
    this.keyCache = [];
    this.valueCache = [];
    this.grow(64);
  }

  /**
   * Reads (and dequantises) every weight of an opened model. `contextLength` is the context the
   * engine it stands for runs (default the engine's default): LongRoPE picks its factors by it.
   */
  static async load(opened: OpenedModel, opts: { contextLength?: number } = {}): Promise<ReferenceModel> {
    return ReferenceModel.fromWeights(opened.config, await readWeights(opened), opened.ropeFreqFactors, opts.contextLength);
  }

  /** Builds a model from float32 weights under canonical names (shapes as `expectedTensors`). */
  static fromWeights(config: ModelConfig, weights: WeightMap, ropeFreqFactors?: Float32Array, contextLength?: number): ReferenceModel {
    return new ReferenceModel(config, assembleWeights(config, (t) => weights.get(t.name)), ropeFreqFactors, contextLength);
  }

  /** Positions held in the KV cache. */
  get length(): number {
    return this.filled;
  }

  /** Forgets the KV cache; the next forward must be at position 0. */
  reset(): void {
    this.filled = 0;
  }

  /**
   * Runs one token at position `pos` (0 <= pos <= length; a smaller pos rewinds the cache) and
   * returns a fresh copy of its logits (vocab). `embedding` (dim) stands in for the token's row:
   * an image token's embedding from the vision tower, unscaled (models merge image features after
   * their embedding's scale). A hybrid model's recurrent state cannot rewind: there pos is the
   * length, or 0 (which starts over).
   */
  forward(token: number, pos: number, embedding?: Float32Array): Float32Array {
    const c = this.config;
    const { hiddenSize: dim, intermediateSize: hidden, numHeads, numKvHeads, headDim } = c;
    const kvDim = numKvHeads * headDim;
    const group = numHeads / numKvHeads; // query heads per kv head (GQA)
    if (!Number.isInteger(token) || token < 0 || token >= c.vocabSize) throw new RangeError(`token ${token} is outside the vocabulary (0..${c.vocabSize - 1})`);
    if (!Number.isInteger(pos) || pos < 0 || pos > this.length) throw new RangeError(`position ${pos} must be in 0..${this.length} (the KV cache holds ${this.length})`);
    const recurrent = this.convState.some((st) => st.length > 0) || this.dnState.some((st) => st !== null) || this.mbState.some((st) => st !== null);
    if (pos !== 0 && pos !== this.length && recurrent)
      throw new RangeError(`position ${pos}: a hybrid model's recurrent state cannot rewind (give ${this.length}, or 0 to start over)`);
    if (pos === 0) {
      for (const st of this.convState) st.fill(0);
      for (const st of this.dnState) if (st) (st.conv.fill(0), st.s.fill(0));
      for (const st of this.mbState) if (st) (st.conv.fill(0), st.s.fill(0));
    }
    if (pos >= this.capacity) this.grow(Math.max(2 * this.capacity, pos + 1));
    const { x, xb, xb2, q, k, v, attOut, hb, hb2 } = this;

    // token embedding, scaled (Gemma: by sqrt(dim); Granite: embedding_multiplier)
    if (embedding) x.set(embedding);
    else {
      x.set(this.w.tokenEmbd.subarray(token * dim, (token + 1) * dim));
      if (c.embeddingScale !== 1) for (let i = 0; i < dim; i++) x[i] *= c.embeddingScale;
    }
    // every RMSNorm scales by (offset + w): Gemma's checkpoints store w of (1 + w)
    const norm = (out: Float32Array, src: Float32Array | null, weight: Float32Array) => rmsnorm(out, src, weight, c.rmsNormEps, c.normWeightOffset);

    for (let l = 0; l < c.numLayers; l++) {
      const lw = this.w.layers[l];

      // attention input: the rmsnormed stream (pre-norm), or the stream itself (post-norm, OLMo 2)
      let input = x;
      if (lw.attnNorm) {
        norm(xb, x, lw.attnNorm);
        input = xb;
      }

      // the layer's token mixer (layerBlocks): LFM2's gated short convolution or Qwen3.5's DeltaNet into xb2, or attention
      const mixer = layerBlocks(c, l).mixer;
      if (mixer === 'shortconv') this.shortConv(l, lw, input, xb2);
      else if (mixer === 'deltanet') this.deltaNet(l, lw, input, xb2);
      else if (mixer === 'mamba2') this.mamba2(l, lw, input, xb2);
      else {
        // qkv matmuls (+ biases); gated attention's q_proj gives each head's query then its gate
        if (c.attnOutputGate) {
          matmul(this.qGate, input, lw.wq, lw.bq);
          for (let h = 0; h < numHeads; h++) q.set(this.qGate.subarray(2 * h * headDim, (2 * h + 1) * headDim), h * headDim);
        } else matmul(q, input, lw.wq, lw.bq);
        matmul(k, input, lw.wk, lw.bk);
        matmul(v, input, lw.wv, lw.bv);

        // q/k rmsnorm before RoPE: per head (Qwen3) or over the whole projection (OLMo 2)
        if (lw.qNorm && lw.kNorm) {
          if (c.qkNormScope === 'full') {
            norm(q, null, lw.qNorm);
            norm(k, null, lw.kNorm);
          } else {
            for (let h = 0; h < numHeads; h++) norm(q.subarray(h * headDim, (h + 1) * headDim), null, lw.qNorm);
            for (let h = 0; h < numKvHeads; h++) norm(k.subarray(h * headDim, (h + 1) * headDim), null, lw.kNorm);
          }
        }

        // RoPE on q and k (each head's first rotaryDim dimensions, cos/sin times LongRoPE's or YaRN's attention
        // factor), except on NoPE layers (SmolLM3); windowed layers may have their own (Gemma 3)
        if (layerUsesRope(c, l)) {
          const invFreq = layerRope(c, l) === 'local' ? this.invFreqLocal : this.invFreq;
          applyRope(q, numHeads, headDim, pos, invFreq, c.ropeStyle, this.mscale);
          applyRope(k, numKvHeads, headDim, pos, invFreq, c.ropeStyle, this.mscale);
        }

        // store k, v in the cache
        this.keyCache[l].set(k, pos * kvDim);
        this.valueCache[l].set(v, pos * kvDim);

        // attention: each query head reads its kv head over positions first..pos, where a
        // sliding window of w keys starts at pos - w + 1 and full attention at 0
        const keys = this.keyCache[l];
        const values = this.valueCache[l];
        const scale = attentionScale(c);
        const cap = c.attnLogitSoftcap;
        const att = this.att; // att[t - first]: score of position t
        const window = layerWindow(c, l);
        const first = window === null ? 0 : Math.max(0, pos + 1 - window);
        for (let h = 0; h < numHeads; h++) {
          const qOff = h * headDim;
          const kvOff = Math.floor(h / group) * headDim;
          // scores
          for (let t = first; t <= pos; t++) {
            let s = 0;
            const kOff = t * kvDim + kvOff;
            for (let i = 0; i < headDim; i++) s += q[qOff + i] * keys[kOff + i];
            // scaled, then soft-capped (Gemma 2): tanh(s / cap) * cap
            att[t - first] = cap === null ? s * scale : Math.tanh((s * scale) / cap) * cap;
          }
          // softmax
          softmax(att, pos + 1 - first);
          // weighted sum of values
          for (let i = 0; i < headDim; i++) {
            let s = 0;
            for (let t = first; t <= pos; t++) s += att[t - first] * values[t * kvDim + kvOff + i];
            attOut[qOff + i] = s;
          }
        }

        // gated attention (Qwen3.5): each head's output times sigmoid(its gate)
        if (c.attnOutputGate)
          for (let h = 0; h < numHeads; h++)
            for (let i = 0; i < headDim; i++) attOut[h * headDim + i] *= 1 / (1 + Math.exp(-this.qGate[(2 * h + 1) * headDim + i]));

        // output projection
        matmul(xb2, attOut, lw.wo, lw.bo);
      }

      // the mixer's post-norm (OLMo 2, Gemma), and residual, the branch scaled (Granite)
      if (lw.postAttnNorm) norm(xb2, null, lw.postAttnNorm);
      for (let i = 0; i < dim; i++) x[i] += c.residualScale * xb2[i];

      // ffn input: the rmsnormed stream (pre-norm), or the stream itself (post-norm)
      input = x;
      if (lw.ffnNorm) {
        norm(xb, x, lw.ffnNorm);
        input = xb;
      }

      // the layer's FFN block (layerBlocks): the dense MLP, or the mixture of experts
      if (layerBlocks(c, l).ffn === 'mlp') {
        // A mixture-of-experts model's dense layer routes nothing: k times -1 (return_routed_experts).
        if (c.moe) this.routed[l] = new Array<number>(c.moe.numExpertsUsed).fill(-1);
        // gate and up matmuls, act(gate) * up: SwiGLU (silu) or GeGLU (tanh-approximated GELU, Gemma)
        matmul(hb, input, lw.wGate!);
        matmul(hb2, input, lw.wUp!);
        glu(hb, hb2, hidden, c.ffnActivation);
        // down matmul
        matmul(xb2, hb, lw.wDown!);
      } else {
        this.routed[l] = this.experts(lw, input, xb2);
      }

      // the FFN's post-norm (OLMo 2, Gemma), and residual, the branch scaled (Granite)
      if (lw.postFfnNorm) norm(xb2, null, lw.postFfnNorm);
      for (let i = 0; i < dim; i++) x[i] += c.residualScale * xb2[i];
    }

    // final rmsnorm
    norm(x, x, this.w.outputNorm);

    // classifier into logits, divided by Granite's logits_scaling, soft-capped (Gemma 2): tanh(x / cap) * cap
    matmul(this.logits, x, this.w.output);
    if (c.logitsScaling !== 1) for (let i = 0; i < this.logits.length; i++) this.logits[i] /= c.logitsScaling;
    const finalCap = c.finalLogitSoftcap;
    if (finalCap !== null) for (let i = 0; i < this.logits.length; i++) this.logits[i] = Math.tanh(this.logits[i] / finalCap) * finalCap;
    this.filled = pos + 1;
    return this.logits.slice();
  }

  /**
   * LFM2's gated short convolution of one token into `out` (dim): in_proj's rows B, C, x; the
   * causal depthwise conv of B ⊙ x over this layer's state (its last kernel - 1 inputs), which it
   * then advances; C ⊙ the conv; out_proj.
   */
  private shortConv(l: number, lw: Weights['layers'][number], input: Float32Array, out: Float32Array): void {
    const dim = this.config.hiddenSize;
    const { bcx, bx, convOut } = this;
    matmul(bcx, input, lw.convIn!);
    for (let i = 0; i < dim; i++) bx[i] = bcx[i] * bcx[2 * dim + i];
    shortConvStep(this.convState[l], bx, lw.convKernel!, this.config.shortConv!.kernel, convOut);
    for (let i = 0; i < dim; i++) convOut[i] *= bcx[dim + i];
    matmul(out, convOut, lw.convOut!);
  }

  /**
   * Qwen3.5's gated DeltaNet of one token into `out` (dim): the qkv, z, b and a projections, the
   * conv, norms, gates and delta rule over this layer's state (model/delta-net.ts), out_proj.
   */
  private deltaNet(l: number, lw: Weights['layers'][number], input: Float32Array, out: Float32Array): void {
    const c = this.config;
    matmul(this.dnQkv, input, lw.dnQkv!);
    matmul(this.dnZ, input, lw.dnZ!);
    matmul(this.dnB, input, lw.dnBeta!);
    matmul(this.dnA, input, lw.dnAlpha!);
    const vectors = { conv: lw.dnConv!, dtBias: lw.dnDtBias!, decay: lw.dnDecay!, norm: lw.dnNorm! };
    deltaNetToken(c.deltaNet!, c.rmsNormEps, vectors, this.dnState[l]!, this.dnQkv, this.dnZ, this.dnB, this.dnA, this.dnOut);
    matmul(out, this.dnOut, lw.dnOut!);
  }

  /** Granite 4.0-H's Mamba-2 for one token into `out` (dim): in_proj, the token step over this layer's state (model/mamba2.ts), out_proj. */
  private mamba2(l: number, lw: Weights['layers'][number], input: Float32Array, out: Float32Array): void {
    const m = this.config.mamba2!;
    const inner = m.numHeads * m.headDim;
    const convDim = mamba2ConvDim(m);
    matmul(this.mbProj, input, lw.mbIn!);
    const vectors = { conv: lw.mbConv!, convBias: lw.mbConvBias!, dtBias: lw.mbDtBias!, decay: lw.mbDecay!, d: lw.mbD!, norm: lw.mbNorm! };
    const p = this.mbProj;
    mamba2Token(m, this.config.rmsNormEps, vectors, this.mbState[l]!, p.subarray(0, inner), p.subarray(inner, inner + convDim), p.subarray(inner + convDim), this.mbOut);
    matmul(out, this.mbOut, lw.mbOut!);
  }

  /**
   * The mixture-of-experts FFN of one token into `out` (dim): router logits, softmax, top-k
   * (renormalised when the config says), then the weighted sum of the k experts' SwiGLU MLPs,
   * plus the shared expert scaled by sigmoid(input · its gate) where there is one. Returns the
   * chosen experts.
   */
  private experts(lw: Weights['layers'][number], input: Float32Array, out: Float32Array): number[] {
    const moe = this.config.moe!;
    const dim = this.config.hiddenSize;
    const size = moe.expertIntermediateSize;
    const { routerLogits, eo } = this;
    matmul(routerLogits, input, lw.wRouter!);
    const { ids, weights } = routeTopK(routerLogits, moe.numExpertsUsed, moe.normTopkProb);
    out.fill(0);
    // expert e's rows are the e-th slice of each stacked matrix
    const mlp = (gate: Float32Array, up: Float32Array, down: Float32Array, n: number, scale: number) => {
      const eh = this.eh.subarray(0, n);
      const eh2 = this.eh2.subarray(0, n);
      matmul(eh, input, gate);
      matmul(eh2, input, up);
      glu(eh, eh2, n, this.config.ffnActivation);
      matmul(eo, eh, down);
      for (let i = 0; i < dim; i++) out[i] += scale * eo[i];
    };
    ids.forEach((e, j) => {
      const inner = size * dim;
      mlp(lw.wGateExps!.subarray(e * inner, (e + 1) * inner), lw.wUpExps!.subarray(e * inner, (e + 1) * inner), lw.wDownExps!.subarray(e * inner, (e + 1) * inner), size, weights[j]);
    });
    if (lw.wSharedGateInp) {
      let g = 0;
      for (let i = 0; i < dim; i++) g += input[i] * lw.wSharedGateInp[i];
      mlp(lw.wGateShexp!, lw.wUpShexp!, lw.wDownShexp!, moe.sharedExpertIntermediateSize!, 1 / (1 + Math.exp(-g)));
    }
    return ids;
  }

  /** The experts each layer routed the last forward's token to (most probable first; -1s on a dense layer); empty on a dense model. */
  get routedExperts(): number[][] {
    return this.routed.map((ids) => ids.slice());
  }

  /** The last forward's final hidden state (after the output norm): the row the LM head reads (`return_hidden_states`). */
  get hidden(): Float32Array {
    return this.x.slice();
  }

  private grow(capacity: number): void {
    const kvDim = this.config.numKvHeads * this.config.headDim;
    const copy = (old: Float32Array | undefined) => {
      const next = new Float32Array(capacity * kvDim);
      if (old) next.set(old.subarray(0, this.filled * kvDim));
      return next;
    };
    this.keyCache = Array.from({ length: this.config.numLayers }, (_, l) => copy(this.keyCache[l]));
    this.valueCache = Array.from({ length: this.config.numLayers }, (_, l) => copy(this.valueCache[l]));
    this.att = new Float32Array(capacity);
    this.capacity = capacity;
  }
}

/** Every weight of an opened model the config implies, dequantised to float32, by canonical name. */
export async function readWeights(opened: OpenedModel): Promise<Map<string, Float32Array>> {
  const weights = new Map<string, Float32Array>();
  for (const { row, name } of modelTensors(opened.config)) {
    if (row.field && opened.tensors.has(name)) weights.set(name, await opened.readTensorF32(name));
  }
  return weights;
}

/** gate = act(gate) * up over the first n: SwiGLU (silu) or GeGLU (tanh-approximated GELU, Gemma). */
export function glu(gate: Float32Array, up: Float32Array, n: number, activation: ModelConfig['ffnActivation']): void {
  const gelu = activation === 'gelu_tanh';
  for (let i = 0; i < n; i++) {
    const g = gate[i];
    gate[i] = (gelu ? 0.5 * g * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (g + 0.044715 * g * g * g))) : g / (1 + Math.exp(-g))) * up[i];
  }
}

/** out = rmsnorm(x) * (offset + weight); x defaults to out (in place). */
export function rmsnorm(out: Float32Array, x: Float32Array | null, weight: Float32Array, eps: number, offset = 0): void {
  const src = x ?? out;
  let ss = 0;
  for (let i = 0; i < src.length; i++) ss += src[i] * src[i];
  const inv = 1 / Math.sqrt(ss / src.length + eps);
  for (let i = 0; i < src.length; i++) out[i] = src[i] * inv * (offset + weight[i]);
}

/** out (n) = W (n, d) @ x (d) + bias. */
export function matmul(out: Float32Array, x: Float32Array, w: Float32Array, bias?: Float32Array): void {
  const d = x.length;
  for (let r = 0; r < out.length; r++) {
    // Four float64 partial sums: the same exactness, fewer loop-carried dependencies.
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const off = r * d;
    let i = 0;
    for (; i + 4 <= d; i += 4) {
      s0 += w[off + i] * x[i];
      s1 += w[off + i + 1] * x[i + 1];
      s2 += w[off + i + 2] * x[i + 2];
      s3 += w[off + i + 3] * x[i + 3];
    }
    for (; i < d; i++) s0 += w[off + i] * x[i];
    out[r] = (bias ? bias[r] : 0) + (s0 + s1) + (s2 + s3);
  }
}

/** In-place softmax of the first n entries, max-subtracted. */
export function softmax(x: Float32Array, n: number): void {
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (x[i] > max) max = x[i];
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const e = Math.exp(x[i] - max);
    x[i] = e;
    sum += e;
  }
  for (let i = 0; i < n; i++) x[i] /= sum;
}

/** Feeds `promptIds` then picks the argmax `n` times; returns the n generated ids. */
export function greedy(model: ReferenceModel, promptIds: readonly number[], n: number): number[] {
  if (promptIds.length === 0) throw new RangeError('greedy() needs at least one prompt token');
  model.reset();
  let logits: Float32Array = new Float32Array(0);
  promptIds.forEach((id, pos) => (logits = model.forward(id, pos)));
  const out: number[] = [];
  for (let pos = promptIds.length; out.length < n; pos++) {
    const next = argmax(logits);
    out.push(next);
    if (out.length < n) logits = model.forward(next, pos);
  }
  return out;
}

/**
 * Greedy tokens and, in the same run, the logits from the prompt's last position on (n + 1 rows:
 * the last generated token is run too), what teacher forcing over prompt + tokens would give.
 */
export function greedyWithLogits(model: ReferenceModel, promptIds: readonly number[], n: number): { tokens: number[]; logits: Float32Array[] } {
  if (promptIds.length === 0) throw new RangeError('greedyWithLogits() needs at least one prompt token');
  model.reset();
  let last: Float32Array = new Float32Array(0);
  promptIds.forEach((id, pos) => (last = model.forward(id, pos)));
  const logits = [last];
  const tokens: number[] = [];
  for (let pos = promptIds.length; tokens.length < n; pos++) {
    tokens.push(argmax(logits[logits.length - 1]!));
    logits.push(model.forward(tokens[tokens.length - 1]!, pos));
  }
  return { tokens, logits };
}

/** Teacher forcing: the logits after each of `ids`, from an empty cache. */
export function logitsFor(model: ReferenceModel, ids: readonly number[]): Float32Array[] {
  model.reset();
  return ids.map((id, pos) => model.forward(id, pos));
}

export function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}
