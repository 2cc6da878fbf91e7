/**
 * Qwen3.5's multi-token-prediction head on the CPU (ModelConfig.mtpLayers): the oracle for an MTP
 * proposer. From the trunk's final hidden state h_t at position t (after its output norm: what
 * vLLM's Qwen3NextMTP is handed, the trunk model's output) and the embedding e of token t+1:
 * x = fc · [rmsnorm(e)·enorm | rmsnorm(h_t)·hnorm] (embedding first, as vLLM's
 * Qwen3NextMultiTokenPredictor concatenates them), one full-attention decoder layer of the
 * trunk's kind at position t over the head's own KV, the head's norm, then the trunk's LM head:
 * logits for token t+2. Every norm is the family's (1 + w in HF, w + 1 stored in GGUF). The decoder
 * layer is a one-layer ReferenceModel fed x as its input row.
 */
import type { ModelConfig } from '../model/config';
import { ModelError } from '../model/errors';
import type { OpenedModel } from '../model/open';
import { assembleMtpWeights, modelTensors, mtpTensors, type MtpWeights } from '../model/tensors';
import { matmul, ReferenceModel, rmsnorm, type WeightMap } from './forward';

export class MtpReference {
  private readonly cat: Float32Array; // (2 · dim) [normed embedding | normed hidden]
  private readonly x: Float32Array; // (dim) fc's output: the decoder layer's input row

  private constructor(
    readonly config: ModelConfig,
    private readonly w: MtpWeights<Float32Array, Float32Array>,
    private readonly tokenEmbd: Float32Array,
    private readonly layer: ReferenceModel,
  ) {
    this.cat = new Float32Array(2 * config.hiddenSize);
    this.x = new Float32Array(config.hiddenSize);
  }

  /** Reads the trunk's embedding and LM head and the head's own tensors of an opened model. */
  static async load(opened: OpenedModel, opts: { contextLength?: number } = {}): Promise<MtpReference> {
    const weights = new Map<string, Float32Array>();
    const names = ['token_embd.weight', 'output.weight', ...mtpTensors(opened.config).map((t) => t.name)];
    for (const name of names) if (opened.tensors.has(name)) weights.set(name, await opened.readTensorF32(name));
    return MtpReference.fromWeights(opened.config, weights, opened.ropeFreqFactors, opts.contextLength);
  }

  /** From float32 weights under canonical names (the trunk's embedding and output, the head's `blk.{numLayers}.*`). */
  static fromWeights(config: ModelConfig, weights: WeightMap, ropeFreqFactors?: Float32Array, contextLength?: number): MtpReference {
    if (!config.mtpLayers) throw new ModelError('unsupported_arch', `${config.arch}: this model has no multi-token-prediction head`);
    // Qwen3.5's MoE checkpoints' heads route experts: not read yet (the dense family's only).
    if (config.moe) throw new ModelError('unsupported_arch', `${config.arch}: a mixture-of-experts MTP head is not supported`);
    const w = assembleMtpWeights<Float32Array, Float32Array>(config, (t) => weights.get(t.name))!;
    const tokenEmbd = weights.get('token_embd.weight');
    const output = config.tieWordEmbeddings ? tokenEmbd : weights.get('output.weight');
    if (!tokenEmbd || !output) throw new ModelError('missing_tensor', `the MTP head needs the trunk's ${tokenEmbd ? 'output' : 'token_embd'}.weight`);
    // The decoder layer alone: one attention layer (no DeltaNet), the head's norm as its output
    // norm, the trunk's LM head untied from the (unused) embedding rows.
    const one: ModelConfig = { ...config, numLayers: 1, deltaNet: null, mtpLayers: 0, tieWordEmbeddings: false };
    const layerWeights = new Map<string, Float32Array>([
      ['token_embd.weight', tokenEmbd],
      ['output_norm.weight', w.norm],
      ['output.weight', output],
    ]);
    const l = config.numLayers;
    for (const t of modelTensors(one)) {
      const own = weights.get(t.name.replace(/^blk\.0\./, `blk.${l}.`));
      if (t.layer === 0 && own) layerWeights.set(t.name, own);
    }
    return new MtpReference(config, w, tokenEmbd, ReferenceModel.fromWeights(one, layerWeights, ropeFreqFactors, contextLength));
  }

  /** Positions held in the head's KV. */
  get length(): number {
    return this.layer.length;
  }

  /** Forgets the head's KV; the next forward must be at position 0. */
  reset(): void {
    this.layer.reset();
  }

  /**
   * The head's logits for token t+2 (vocab, a fresh copy), from the trunk's final hidden state at
   * position `pos` = t and token t+1 (`next`). pos as ReferenceModel.forward's: at most the KV's
   * length, a smaller one rewinds.
   */
  forward(hidden: Float32Array, next: number, pos: number): Float32Array {
    const c = this.config;
    const dim = c.hiddenSize;
    if (hidden.length !== dim) throw new RangeError(`hidden state of ${hidden.length}, expected ${dim}`);
    if (!Number.isInteger(next) || next < 0 || next >= c.vocabSize) throw new RangeError(`token ${next} is outside the vocabulary (0..${c.vocabSize - 1})`);
    const { cat, x } = this;
    rmsnorm(cat.subarray(0, dim), this.tokenEmbd.subarray(next * dim, (next + 1) * dim), this.w.embNorm, c.rmsNormEps, c.normWeightOffset);
    rmsnorm(cat.subarray(dim), hidden, this.w.hiddenNorm, c.rmsNormEps, c.normWeightOffset);
    matmul(x, cat, this.w.fc);
    return this.layer.forward(next, pos, x);
  }

  /** The last forward's hidden state after the head's norm: what a second chained guess is fed (as vLLM does). */
  get hidden(): Float32Array {
    return this.layer.hidden;
  }
}
