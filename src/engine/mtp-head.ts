/**
 * Qwen3.5's multi-token-prediction head on the GPU (ModelConfig.mtpLayers): reference/mtp.ts's
 * arithmetic as GPU ops, on its own KV pages. Rows of one sequence, each the trunk's final hidden
 * state h_t (after its output norm) and token t+1:
 *   e  = embedding(token t+1)                     (the trunk's table, unscaled)
 *   x  = fc_e · rmsnorm(e)·enorm + fc_h · rmsnorm(h_t)·hnorm
 *        (fc's two column halves, split at upload: fc · [embedding | hidden] without a concat)
 *   the decoder layer as a one-layer model (model/mtp.ts) whose rows are x (the image splice puts
 *   them over its embedded rows), its output norm the head's, the LM head the trunk's.
 * A call records one command buffer: the fed rows, then up to `maxGuesses` − 1 chained rows, each
 * the head's layer again on [norm(embed(guess j)) | norm(h')] with h' the head's own hidden state
 * (after its final norm) of the row before, at the next position (reference/mtp.ts `chain` says
 * why that state). After each pass the greedy sampler (kernels/sample.ts at temperature 0) writes
 * the guess into the next pass's token; copies between the passes carry the hidden row and the
 * chained row's step metadata (staged per chained row before the submit: a queue write would land
 * before the whole command buffer). Only the guesses (u32) are read back, never the logits. The
 * chained rows' KV is dropped after the run, so the head holds only fed rows and the next feed
 * overwrites those positions. Everything is made once, at creation. The proposer over it is
 * ./mtp-proposer.ts. The embedding and LM head are the trunk's GPU matrices (uploadWeights'
 * `shared`), not copies: the head's own weights are its layer, fc and norms (Qwen3.5 0.8B's table
 * alone is 248k × 1024).
 */
import { createBuffer, READBACK, readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import type { GPUContext } from '../gpu/device';
import { createEmbedOp } from '../kernels/embed';
import { createLinearOp, engineLinearSpecs } from '../kernels/matmul';
import { engineOpContext, type Op } from '../kernels/op';
import type { Precision } from '../gpu/pipelines';
import { createRmsNormOp } from '../kernels/rms-norm';
import { createSampleOp, LOGPROB_WORDS, packSamplingParams } from '../kernels/sample';
import { uploadWeightParts, type WeightPart } from '../kernels/weights';
import { tensorByteLength } from '../formats/dtypes';
import { ModelError } from '../model/errors';
import { mtpLayerModel } from '../model/mtp';
import type { OpenedModel } from '../model/open';
import { mtpTensors } from '../model/tensors';
import { GpuForward, type ForwardLimits } from './forward/forward';
import { maxWeightPartBytes, uploadWeights, type GpuWeights, type SharedMatrices } from './gpu-weights';
import { KvPages } from './kv-pages';
import { StepBuffers } from './step';

/** Guesses one run chains at most (the request's `speculative.k`): see MTP_MAX_GUESSES in ./mtp-proposer.ts for why 8. */
export interface MtpHeadLimits extends ForwardLimits {
  maxGuesses: number;
}

export class GpuMtpHead {
  private readonly kv: KvPages;
  private readonly readback: GPUBuffer;

  private constructor(
    private readonly gpu: GPUContext,
    private readonly opened: OpenedModel,
    private readonly forward: GpuForward,
    private readonly step: StepBuffers,
    private readonly weights: GpuWeights,
    /** u32 [maxTokens] the rows' next tokens, f32 [maxTokens, hidden] their hidden states. */
    private readonly ids: GPUBuffer,
    private readonly hidden: GPUBuffer,
    /** embed, the two input norms, fc's halves: the rows' x, before the layer. */
    private readonly pre: readonly Op[],
    private readonly own: readonly GPUBuffer[],
    /** Bytes of `own`'s weights (fc's halves, the two input norms). */
    private readonly ownWeightBytes: number,
    /** The greedy sampler over the last row's logits: writes the guess into `ids` row 0 (the next pass's token). */
    private readonly sample: Op,
    /** u32 [maxGuesses] the run's guesses, copied out of `ids` after each pass. */
    private readonly guesses: GPUBuffer,
    /** Each chained row's step metadata (j − 1 for row j), copied over `step` before its pass. */
    private readonly chained: readonly StepBuffers[],
  ) {
    this.kv = new KvPages(forward.limits.numPages, forward.limits.pageSize);
    this.readback = createBuffer(gpu.device, guesses.size, READBACK, 'mtp guesses readback');
  }

  /** Guesses one run chains at most. */
  get maxGuesses(): number {
    return this.chained.length + 1;
  }

  /** `trunk`: the model's embedding and LM head on the GPU (the engine's weights), which the head reads but does not own. */
  static async create(gpu: GPUContext, opened: OpenedModel, trunk: SharedMatrices, opts: { precision: Precision; limits: MtpHeadLimits }): Promise<GpuMtpHead> {
    const c = opened.config;
    const { device } = gpu;
    const layer = mtpLayerModel(opened);
    const maxPart = maxWeightPartBytes(device.limits);
    const weights = await uploadWeights(device, layer, undefined, maxPart, { tokenEmbd: trunk.tokenEmbd, output: trunk.output });
    const own: GPUBuffer[] = [];
    const ctx = engineOpContext(gpu, opts.precision);
    // The head's input side in f32 whatever the precision: the hidden state is the trunk's f32 row.
    const f32 = { ...ctx, precision: 'f32' as const };
    const H = c.hiddenSize;
    const T = opts.limits.maxTokens;
    const head = new Map(mtpTensors(c).map((t) => [t.row.field, t.name]));
    const [fcE, fcH] = await fcHalves(device, opened, head.get('fc')!, H, maxPart);
    own.push(...[...fcE, ...fcH].map((p) => p.buffer));
    // Norm weights as applied: offset + w (HF's 1 + w).
    const norm = async (field: string) => {
      const b = uploadBuffer(device, (await opened.readTensorF32(head.get(field)!)).map((v) => v + c.normWeightOffset), STORAGE, head.get(field));
      own.push(b);
      return b;
    };
    const [embNorm, hiddenNorm] = [await norm('embNorm'), await norm('hiddenNorm')];
    const ownWeightBytes = own.reduce((n, b) => n + b.size, 0);
    const make = (bytes: number, label: string) => {
      const b = createBuffer(device, bytes, STORAGE, label);
      own.push(b);
      return b;
    };
    const ids = make(T * 4, 'mtp next tokens');
    const hidden = make(T * H * 4, 'mtp hidden');
    const e = make(T * H * 4, 'mtp embedding');
    const eN = make(T * H * 4, 'mtp normed embedding');
    const hN = make(T * H * 4, 'mtp normed hidden');
    const sampled = make(2 * opts.limits.maxSeqs * 4, 'mtp sampled');
    const K = opts.limits.maxGuesses;
    if (!(Number.isInteger(K) && K >= 1)) throw new RangeError(`the MTP head chains 1 or more guesses, got ${K}`);
    const guesses = make(K * 4, 'mtp guesses');
    // Greedy (temperature 0), no logprobs: the sampler's argmax, the lowest id among equal logits.
    const greedy = uploadBuffer(device, new Uint8Array(packSamplingParams([{ temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0, step: 0, logprobs: false, topLogprobs: 0 }])), STORAGE, 'mtp greedy params');
    own.push(greedy);
    const logprobs = make(LOGPROB_WORDS * 4, 'mtp logprobs (unused)');

    const step = new StepBuffers(device, opts.limits);
    const forward = await GpuForward.create(ctx, layer.config, weights, step, sampled, opts.limits, opened.ropeFreqFactors);
    const splice = await forward.enableImages(ctx);
    // Every row takes its x: the splice's index is the identity.
    device.queue.writeBuffer(splice.index, 0, Uint32Array.from({ length: T }, (_, i) => i));
    const table = weights.tokenEmbd;
    const eps = c.rmsNormEps;
    const specs = engineLinearSpecs(ctx);
    const fc = (parts: WeightPart[], x: GPUBuffer, residual: boolean, role: string) =>
      createLinearOp(f32, { weight: parts, dtype: opened.tensors.get(head.get('fc')!)!.info.dtype, n: H, k: H, x, y: splice.rows, xF32: true, yF32: true, step: step.counts, maxTokens: T, label: { role }, residual }, specs);
    const pre = [
      await createEmbedOp(f32, { tokens: ids, table: table.parts, x: e, xF32: true, dtype: table.dtype, n: H, vocab: c.vocabSize, label: { role: 'mtp_embed' } }),
      await createRmsNormOp(f32, { x: e, xF32: true, weight: embNorm, y: eN, yF32: true, n: H, maxTokens: T, eps, label: { role: 'mtp_enorm' } }),
      await createRmsNormOp(f32, { x: hidden, xF32: true, weight: hiddenNorm, y: hN, yF32: true, n: H, maxTokens: T, eps, label: { role: 'mtp_hnorm' } }),
      await fc(fcE, eN, false, 'mtp_fc_e'),
      await fc(fcH, hN, true, 'mtp_fc_h'),
    ];
    // One row (maxSeqs 1 of the logits): its token lands in ids[0], where the next chained row's embedding reads it.
    const sample = await createSampleOp(ctx, { logits: forward.logits, params: greedy, tokens: ids, logprobs, vocab: c.vocabSize, maxSeqs: 1, label: { role: 'mtp_argmax', perSeq: true } });
    const chained = Array.from({ length: K - 1 }, () => new StepBuffers(device, opts.limits));
    return new GpuMtpHead(gpu, opened, forward, step, weights, ids, hidden, pre, own, ownWeightBytes, sample, guesses, chained);
  }

  /**
   * Feeds rows of sequence `seq` at its next positions: `hidden` f32 [n, hidden], each the trunk's
   * final hidden state at that position, and `next` the n tokens that follow them. Returns the
   * head's `guesses` greedy guesses (0..maxGuesses) for the tokens after `next`'s last, chained;
   * fewer where the head's KV has no room for the chained rows. 0: the rows are fed, nothing is read back.
   */
  async run(seq: number, hidden: Float32Array, next: readonly number[], guesses = 1): Promise<number[]> {
    const { device } = this.gpu;
    const n = next.length;
    const H = this.opened.config.hiddenSize;
    if (hidden.length !== n * H) throw new RangeError(`${n} rows need ${n * H} hidden values, got ${hidden.length}`);
    if (!(Number.isInteger(guesses) && guesses >= 0 && guesses <= this.maxGuesses)) throw new RangeError(`the MTP head chains 0..${this.maxGuesses} guesses, got ${guesses}`);
    device.queue.writeBuffer(this.hidden, 0, hidden as Float32Array<ArrayBuffer>);
    device.queue.writeBuffer(this.ids, 0, Uint32Array.from(next));
    const fed = this.step.write([{ seq, tokens: next }], this.kv);
    const plans = [{ ...this.forward.plan({ tokens: fed.tokens, seqs: fed.seqs, adapted: false, hidden: guesses > 1, maxKeys: this.kv.length(seq) }), images: true }];
    const length = this.kv.length(seq);
    try {
      // The chained rows' metadata, staged now (positions length, length + 1, …); a full KV ends the chain early.
      for (let j = 1; j < guesses; j++) {
        try {
          // The step's token is a placeholder: the row's x is the head's own (the splice), its embedding never read.
          this.chained[j - 1]!.write([{ seq, tokens: [0] }], this.kv);
        } catch {
          break;
        }
        plans.push({ ...this.forward.plan({ tokens: 1, seqs: 1, adapted: false, hidden: j + 1 < guesses, maxKeys: this.kv.length(seq) }), images: true });
      }
      const encoder = device.createCommandEncoder({ label: 'mtp head' });
      plans.forEach((plan, j) => {
        if (j > 0) {
          encoder.copyBufferToBuffer(this.chained[j - 1]!.buffer, 0, this.step.buffer, 0, this.step.buffer.size);
          // h': row 0 of the head's final hidden states (the step's one sequence), after its norm.
          encoder.copyBufferToBuffer(this.forward.hidden, 0, this.hidden, 0, H * 4);
        }
        const pass = encoder.beginComputePass();
        for (const op of this.pre) op.encode(pass, plan.tokens);
        this.forward.encode(pass, plan);
        if (guesses > 0) this.sample.encode(pass, 1);
        pass.end();
        if (guesses > 0) encoder.copyBufferToBuffer(this.ids, 0, this.guesses, j * 4, 4);
      });
      const k = guesses > 0 ? plans.length : 0;
      if (k > 0) encoder.copyBufferToBuffer(this.guesses, 0, this.readback, 0, k * 4);
      device.queue.submit([encoder.finish()]);
      if (k === 0) return [];
      await this.readback.mapAsync(GPUMapMode.READ, 0, k * 4);
      const out = Array.from(new Uint32Array(this.readback.getMappedRange(0, k * 4).slice(0)));
      this.readback.unmap();
      return out;
    } finally {
      // The chained rows are guesses: the head's KV keeps the fed rows only (the next feed overwrites the rest).
      this.kv.truncate(seq, length);
    }
  }

  /**
   * A test's look at the last run's logits (its last pass's row): reads them back through a buffer
   * made for the call, so never in the step loop.
   */
  async lastLogits(): Promise<Float32Array> {
    return new Float32Array(await readBuffer(this.gpu.device, this.forward.logits, this.opened.config.vocabSize * 4));
  }

  /**
   * Feeds rows of sequence `seq` at its next positions from the GPU: the trunk's final hidden
   * states are rows `at`.. of `source` (f32 [rows, hidden], written by a command buffer submitted
   * before this call: the queue runs in order), `next` the tokens after them. Nothing is read back
   * and no logits are computed: the rows only fill the head's KV (a prompt's rows, before its first
   * guess). One submission per `maxTokens` rows, each copying its rows into the head's input.
   */
  feed(seq: number, source: GPUBuffer, at: number, next: readonly number[]): void {
    const { device } = this.gpu;
    const H = this.opened.config.hiddenSize;
    const T = this.forward.limits.maxTokens;
    for (let i = 0; i < next.length; i += T) {
      const rows = next.slice(i, i + T);
      device.queue.writeBuffer(this.ids, 0, Uint32Array.from(rows));
      const { tokens, seqs } = this.step.write([{ seq, tokens: rows }], this.kv);
      const plan = this.forward.plan({ tokens, seqs, adapted: false, hidden: false, maxKeys: this.kv.length(seq), images: true, logits: false });
      const encoder = device.createCommandEncoder({ label: 'mtp head feed' });
      encoder.copyBufferToBuffer(source, (at + i) * H * 4, this.hidden, 0, rows.length * H * 4);
      const pass = encoder.beginComputePass();
      for (const op of this.pre) op.encode(pass, rows.length);
      this.forward.encode(pass, plan);
      pass.end();
      device.queue.submit([encoder.finish()]);
    }
  }

  /** GPU bytes of the head's KV pages (its one attention layer, as many pages as the model's pool) and of its layer's run state. */
  get cacheBytes(): { kv: number; state: number } {
    return { kv: this.forward.kvCacheBytes, state: this.forward.stateBytes };
  }

  /** GPU bytes of the head's own weights: its layer, fc's halves and input norms (the embedding and LM head are the trunk's). */
  get weightBytes(): number {
    return this.weights.bytes + this.ownWeightBytes;
  }

  /** Rows of sequence `seq` the head holds (its KV length): the next run feeds position this. */
  length(seq: number): number {
    return this.kv.length(seq);
  }

  /**
   * Forgets sequence `seq`'s rows from position `length` on (a proposer's rollback: rows whose next
   * token the target rejected); the next run feeds position `length`.
   */
  truncate(seq: number, length: number): void {
    this.kv.truncate(seq, length);
  }

  /** Forgets sequence `seq`'s rows (its KV pages go back to the pool). */
  release(seq: number): void {
    this.kv.release(seq);
  }

  destroy(): void {
    for (const op of [...this.pre, this.sample]) op.destroy();
    for (const c of this.chained) c.destroy();
    this.forward.destroy();
    this.step.destroy();
    this.weights.destroy();
    for (const b of [...this.own, this.readback]) b.destroy();
  }
}

/**
 * fc ([hidden, 2·hidden], its columns the embedding's then the hidden state's) as two
 * [hidden, hidden] matrices of the file's type: each row's bytes cut at column `hidden` (whole
 * quant blocks where hidden is a multiple of the type's block, which the file's rows are).
 */
async function fcHalves(device: GPUDevice, opened: OpenedModel, name: string, H: number, maxPart: number): Promise<[WeightPart[], WeightPart[]]> {
  const { dtype } = opened.tensors.get(name)!.info;
  const row = tensorByteLength(dtype, 2 * H);
  const half = tensorByteLength(dtype, H);
  if (2 * half !== row) throw new ModelError('unsupported_dtype', `${name}: a ${dtype} row of ${2 * H} cannot be cut at column ${H}`, name);
  const bytes = await opened.readTensor(name);
  const halves = [new Uint8Array(H * half), new Uint8Array(H * half)] as const;
  for (let r = 0; r < H; r++) {
    halves[0].set(bytes.subarray(r * row, r * row + half), r * half);
    halves[1].set(bytes.subarray(r * row + half, (r + 1) * row), r * half);
  }
  return [uploadWeightParts(device, dtype, halves[0], { rows: H, cols: H }, maxPart, `${name} [embedding]`), uploadWeightParts(device, dtype, halves[1], { rows: H, cols: H }, maxPart, `${name} [hidden]`)];
}
