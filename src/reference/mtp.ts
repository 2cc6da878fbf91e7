/**
 * Qwen3.5's multi-token-prediction head on the CPU (ModelConfig.mtpLayers): the oracle for an MTP
 * proposer. From the trunk's final hidden state h_t at position t (after its output norm: what
 * vLLM's Qwen3NextMTP is handed, the trunk model's output) and the embedding e of token t+1:
 * x = fc · [rmsnorm(e)·enorm | rmsnorm(h_t)·hnorm] (embedding first, as vLLM's
 * Qwen3NextMultiTokenPredictor concatenates them), one full-attention decoder layer of the
 * trunk's kind at position t over the head's own KV, the head's norm, then the trunk's LM head:
 * logits for token t+2. Every norm is the family's (1 + w in HF, w + 1 stored in GGUF). The decoder
 * layer is a one-layer ReferenceModel (model/mtp.ts) fed x as its input row.
 */
import type { ModelConfig } from '../model/config';
import { ModelError } from '../model/errors';
import type { OpenedModel } from '../model/open';
import { mtpLayerConfig, mtpLayerNames } from '../model/mtp';
import { assembleMtpWeights, mtpTensors, type MtpWeights } from '../model/tensors';
import { argmax, matmul, ReferenceModel, rmsnorm, type WeightMap } from './forward';

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
    // The decoder layer alone (model/mtp.ts): one attention layer, the head's norm as its output norm.
    const one = mtpLayerConfig(config);
    const w = assembleMtpWeights<Float32Array, Float32Array>(config, (t) => weights.get(t.name))!;
    const layerWeights = new Map([...mtpLayerNames(config)].flatMap(([own, file]) => (weights.has(file) ? [[own, weights.get(file)!] as const] : [])));
    const tokenEmbd = weights.get('token_embd.weight');
    if (!tokenEmbd) throw new ModelError('missing_tensor', "the MTP head needs the trunk's token_embd.weight", 'token_embd.weight');
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

  /** The last forward's hidden state after the head's norm (a copy): what a chained guess is fed (see `chain`). */
  get hidden(): Float32Array {
    return this.layer.hidden;
  }

  /**
   * `k` chained guesses (k ≥ 1): the row (hidden, next) at `pos` as `forward`, its argmax the first
   * guess; guess j + 1 runs the layer again at pos + j on [norm(embed(guess j)) | norm(h')], h' the
   * head's own hidden state of the row before, after its final norm. vLLM chains that one for
   * Qwen3-Next and Qwen3.5 (qwen3_5_mtp.py's Qwen3_5MultiTokenPredictor.forward returns the
   * hidden states after `self.norm`, and v1/spec_decode/eagle.py's propose, method "mtp", feeds
   * the model's output back as the next step's hidden_states); DeepSeek's MTP layer returns its
   * state before the shared head's norm instead. The chained rows go into the head's KV after
   * `pos` (speculative: the next forward at pos + 1 overwrites them). Returns each guess and its logits.
   */
  chain(hidden: Float32Array, next: number, pos: number, k: number): { ids: number[]; logits: Float32Array[] } {
    if (!Number.isInteger(k) || k < 1) throw new RangeError(`a chain of ${k} guesses`);
    const logits = [this.forward(hidden, next, pos)];
    const ids = [argmax(logits[0]!)];
    for (let j = 1; j < k; j++) {
      logits.push(this.forward(this.hidden, ids[j - 1]!, pos + j));
      ids.push(argmax(logits[j]!));
    }
    return { ids, logits };
  }
}
