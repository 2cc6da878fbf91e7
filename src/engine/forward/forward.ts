/**
 * The GPU forward pass over a ragged batch, read as `ReferenceModel.forward` reads
 * (src/reference/forward.ts): feed, embed, for each layer its blocks (`layerBlocks`: its mixer,
 * then its FFN, each a kind of ./blocks.ts), the head. A family's differences are flags of its
 * ModelConfig (norm placement, q/k norm, NoPE layers, sliding windows, embedding, residual and
 * logit scales, GLU activation, attention scale and soft-caps), never its arch name. Norm weights
 * reach the GPU as applied (../gpu-weights.ts adds Gemma's 1).
 * Everything is built once at load: run-state buffers, the paged KV cache, pipelines and bind
 * groups. `encode` only records dispatches into the step's single compute pass.
 */
import { createEmbedOp } from '../../kernels/embed';
import { createBuffer, STORAGE } from '../../gpu/buffers';
import { createFeedOp } from '../../kernels/feed';
import { createRmsNormOp } from '../../kernels/rms-norm';
import { createSpliceRowsOp } from '../../kernels/splice-rows';
import { createStateRollbackOp } from '../../kernels/state-rollback';
import { MATVEC_MAX_TOKENS } from '../../kernels/matmul';
import { actBytes, type Op, type OpContext } from '../../kernels/op';
import { layerBlocks, type ModelConfig } from '../../model/config';
import type { GpuWeights } from '../gpu-weights';
import { LayerCaches, layerCacheKinds } from '../layer-cache';
import type { LoraPool } from '../lora-pool';
import type { StepBuffers } from '../step';
import { BlockBuilder, RunBuffers, type Block, type ForwardLimits, type RunState, type StepPlan } from './block';
import { BLOCK_KINDS } from './blocks';
import { createHead, type Head } from './head';
import { LoraUpdates } from './lora';

export type { ForwardLimits, StepPlan } from './block';

/** Every row's final hidden state and the norm that writes it (GpuForward.enableRows). */
interface HiddenRows {
  rows: GPUBuffer;
  op: Op;
}

/** The image splice's buffers and op (GpuForward.enableImages). */
export interface ImageSplice {
  rows: GPUBuffer;
  index: GPUBuffer;
  op: Op;
}

export class GpuForward {
  private lora: LoraUpdates | null = null;
  /** Image embeddings over the embedded rows (a model with a vision tower): see enableImages. */
  private images: ImageSplice | null = null;
  /** Every row's final hidden state (a model whose MTP head reads the prompt's rows): see enableRows. */
  private hiddenRows: HiddenRows | null = null;

  private constructor(
    readonly config: ModelConfig,
    readonly limits: ForwardLimits,
    readonly state: RunState,
    /** What each layer keeps per sequence between steps (paged K/V today; see ../layer-cache.ts). */
    readonly caches: LayerCaches,
    private readonly feed: Op,
    private readonly embed: Op,
    /** Each layer's blocks in order (its mixer, then its FFN). */
    private readonly layers: Block[][],
    private readonly head: Head,
    private readonly buffers: RunBuffers,
    /**
     * Mixture of experts: u32 [maxTokens, k] per layer, the experts each token of the last step was
     * routed to; null on the model's dense layers (MoeConfig.denseLayers), which route nothing.
     */
    readonly routedIds: readonly (GPUBuffer | null)[],
    /** Each rolling-back recurrent layer's state rollback after a verify step's draws (../layer-cache.ts). */
    private readonly rollbacks: readonly Op[],
  ) {}

  /** Bytes of the layers' caches (K and V of every layer). */
  get kvCacheBytes(): number {
    return this.caches.bytes;
  }

  /** Bytes of the run state (activations, logits, RoPE tables; the image splice's and every row's hidden states where enabled). */
  get stateBytes(): number {
    const optional = [this.images?.rows, this.images?.index, this.hiddenRows?.rows].filter((b) => b !== undefined);
    return [...this.buffers.all, ...optional].reduce((n, b) => n + b.size, 0);
  }

  /** f32 [maxSeqs, vocab] the logits of each sequence of the last step. */
  get logits(): GPUBuffer {
    return this.head.logits;
  }

  /** f32 [maxSeqs, hidden] the final hidden states of a step planned with `hidden`. */
  get hidden(): GPUBuffer {
    return this.head.hidden;
  }

  static async create(
    ctx: OpContext,
    config: ModelConfig,
    weights: GpuWeights,
    step: StepBuffers,
    /** u32 [maxSeqs] the sampler's last token of each slot: a step's FEED tokens read it. */
    sampled: GPUBuffer,
    limits: ForwardLimits,
    ropeFreqFactors?: Float32Array,
    /** Called as each part (embedding, every layer, the head) has its pipelines ready. */
    onPart?: () => void,
  ): Promise<GpuForward> {
    const { maxTokens: T, maxSeqs: S } = limits;
    const H = config.hiddenSize;
    const act = actBytes(ctx.precision);
    const buffers = new RunBuffers(ctx.device, act);
    const state: RunState = {
      ids: buffers.make(T, 'ids', 'u32'),
      // f32 whatever the precision: the stream of real models exceeds f16's range in a few
      // channels (the ops that read or write it hold their x_t / y_t at f32).
      x: buffers.make(T * H, 'x', 'f32'),
      xb: buffers.make(T * H, 'xb'),
      // f32 too: a branch output before its post-norm (Gemma 2/3, OLMo 2) or Granite's scale
      // is of the stream's size (Gemma's pass f16's range), and is normed or added in f32.
      xb2: buffers.make(T * H, 'xb2', 'f32'),
    };
    const caches = LayerCaches.create(ctx.device, layerCacheKinds(config), { numPages: limits.numPages, pageSize: limits.pageSize, maxSeqs: limits.slots ?? S, rows: S, actBytes: act });
    const b = new BlockBuilder(ctx, config, weights, step, limits, caches, buffers, state, ropeFreqFactors);

    // Tokens drawn at the step before are read on the GPU: the CPU never waits for them.
    const feed = await createFeedOp(ctx, { stepTokens: step.tokens, tokenSeq: step.tokenSeq, rowSlot: step.rowSlot, sampled, ids: state.ids, counts: step.counts, label: { role: 'feed' } });
    // token embedding, scaled (Gemma: by sqrt(dim); Granite: embedding_multiplier)
    const table = weights.tokenEmbd;
    const embed = await createEmbedOp(ctx, { tokens: state.ids, table: table.parts, x: state.x, xF32: true, dtype: table.dtype, n: H, vocab: config.vocabSize, scale: config.embeddingScale, label: { role: 'embed' } });
    onPart?.();

    const layers: Block[][] = [];
    for (let l = 0; l < config.numLayers; l++) {
      const { mixer, ffn } = layerBlocks(config, l);
      layers.push([await BLOCK_KINDS[mixer](b, l), await BLOCK_KINDS[ffn](b, l)]);
      onPart?.();
    }

    const head = await createHead(b);
    const routedIds = config.moe ? layers.map((blocks) => blocks.find((k) => k.routedIds)?.routedIds ?? null) : [];
    const rollbacks: Op[] = [];
    for (const { layer, state: s, floats } of caches.rollingBack()) {
      const rows = { tokens: step.tokens, lastToken: step.lastToken, rowSlot: step.rowSlot, drawSlot: step.drawSlot, counts: step.counts };
      rollbacks.push(await createStateRollbackOp(ctx, { ...rows, state: s, floats, ckpt: caches.checkpointRow, sampled, label: { role: 'state_rollback', layer } }));
    }
    return new GpuForward(config, limits, state, caches, feed, embed, layers, head, buffers, routedIds, rollbacks);
  }

  /**
   * The plan of a step of `tokens` tokens from `seqs` sequences. `adapted`: some row runs a LoRA
   * adapter (its id is in the step's seqAdapter). `hidden`: the step's final hidden states are
   * read back (return_hidden_states). `maxKeys`: the longest context in the step (keys after it).
   */
  plan(a: { tokens: number; seqs: number; adapted: boolean; hidden: boolean; maxKeys?: number; images?: boolean; rows?: boolean; logits?: boolean }): StepPlan {
    const matvec = a.tokens <= MATVEC_MAX_TOKENS;
    return {
      tokens: a.tokens,
      seqs: a.seqs,
      mode: a.tokens > a.seqs ? 'prefill' : 'decode',
      matvec,
      // A LoRA update reads the normed input: adapted steps still write it.
      foldNorms: matvec && !a.adapted,
      lora: a.adapted ? this.lora : null,
      hidden: a.hidden,
      maxKeys: a.maxKeys,
      images: a.images ?? false,
      rows: a.rows ?? false,
      logits: a.logits ?? true,
    };
  }

  /** Makes the LoRA update of every matrix a block offers over `pool` (once, on the first adapter load: ./lora.ts). */
  async enableLora(ctx: OpContext, pool: LoraPool, step: StepBuffers): Promise<void> {
    if (this.lora) return;
    const points = this.layers.map((blocks) => Object.assign({}, ...blocks.map((k) => k.lora)));
    this.lora = await LoraUpdates.create(ctx, pool, step, points, this.limits.maxTokens);
  }

  /**
   * Makes the image splice (once, at load, for a model with a vision tower): f32 [maxTokens,
   * hidden] image rows and u32 [maxTokens] each step row's index into them (SPLICE_NONE: its
   * token's embedding stays), written by the step runner on steps that feed image tokens.
   */
  async enableImages(ctx: OpContext): Promise<ImageSplice> {
    if (this.images) return this.images;
    const T = this.limits.maxTokens;
    const H = this.config.hiddenSize;
    const rows = createBuffer(ctx.device, T * H * 4, STORAGE, 'image rows');
    const index = createBuffer(ctx.device, T * 4, STORAGE, 'image row index');
    const op = await createSpliceRowsOp(ctx, { x: this.state.x, rows, index, n: H, label: { role: 'image splice' } });
    this.images = { rows, index, op };
    return this.images;
  }

  /**
   * Makes the norm of every row (once, at load, for a model whose MTP head is loaded): f32
   * [maxTokens, hidden] each row's final hidden state, the output norm over the residual stream as
   * the head applies it to the last rows, written on steps planned with `rows`. `outputNorm`: the
   * trunk's norm weight as applied (GpuWeights.outputNorm).
   */
  async enableRows(ctx: OpContext, outputNorm: GPUBuffer): Promise<GPUBuffer> {
    if (this.hiddenRows) return this.hiddenRows.rows;
    const T = this.limits.maxTokens;
    const H = this.config.hiddenSize;
    const f32 = { ...ctx, precision: 'f32' as const };
    const rows = createBuffer(ctx.device, T * H * 4, STORAGE, 'hidden rows');
    const op = await createRmsNormOp(f32, { x: this.state.x, weight: outputNorm, y: rows, n: H, maxTokens: T, eps: this.config.rmsNormEps, label: { role: 'output_norm_rows' } });
    this.hiddenRows = { rows, op };
    return rows;
  }

  /** Records one forward step as `plan` says; the logits land in `logits`. */
  encode(pass: GPUComputePassEncoder, plan: StepPlan): void {
    this.feed.encode(pass, plan.tokens);
    this.embed.encode(pass, plan.tokens);
    // image-token rows take the vision tower's embeddings (unscaled, as models merge them)
    if (plan.images && this.images) this.images.op.encode(pass, plan.tokens);
    for (const blocks of this.layers) for (const block of blocks) block.encode(pass, plan);
    if (plan.rows && this.hiddenRows) this.hiddenRows.op.encode(pass, plan.tokens);
    if (plan.logits !== false) this.head.encode(pass, plan);
  }

  /**
   * After a verify step's sampler (speculative decoding): each recurrent layer's slot of a verify
   * run takes the state at its first rejected proposal (../layer-cache.ts). `seqs`: the step's rows.
   */
  rollBack(pass: GPUComputePassEncoder, seqs: number): void {
    for (const op of this.rollbacks) op.encode(pass, seqs);
  }

  /** Frees every op's own buffers, then the run state's. */
  destroy(): void {
    for (const op of [this.feed, this.embed, ...this.layers.flat(), this.head, ...this.rollbacks]) op.destroy();
    if (this.images) {
      this.images.op.destroy();
      this.images.rows.destroy();
      this.images.index.destroy();
    }
    if (this.hiddenRows) {
      this.hiddenRows.op.destroy();
      this.hiddenRows.rows.destroy();
    }
    this.lora?.destroy();
    for (const b of this.buffers.all) b.destroy();
    this.caches.destroy();
  }
}
