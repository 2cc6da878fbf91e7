/**
 * What a block of the GPU forward pass is, the per-step plan every block encodes from, and the
 * builder the blocks make their ops with. A block is one paragraph of the CPU reference
 * (src/reference/forward.ts) as GPU ops: it owns its ops, the roles of its buffers, its fusion
 * choices and its LoRA hook points, and creates and records them in one file (./blocks.ts has the
 * table of block kinds).
 */
import { createBuffer, STORAGE, type BufferRef } from '../../gpu/buffers';
import { createAddOp } from '../../kernels/add';
import type { AttentionMode } from '../../kernels/attention';
import { createLinearOp, engineLinearSpecs, type LinearSegment } from '../../kernels/matmul';
import { actBytes, type Op, type OpContext, type OpLabel } from '../../kernels/op';
import { createRmsNormOp } from '../../kernels/rms-norm';
import type { GluActivation } from '../../kernels/swiglu';
import type { ModelConfig } from '../../model/config';
import type { LoraMat } from '../lora-pool';
import type { GpuMatrix, GpuWeights } from '../gpu-weights';
import type { LayerCaches } from '../layer-cache';
import type { StepBuffers } from '../step';

export interface ForwardLimits {
  maxTokens: number; // tokens per step (prefill chunk)
  maxSeqs: number; // rows per step: sequences, and a verify row per proposal (EngineOptions.maxBatch + VERIFY_ROWS)
  /** Sequence slots (per-slot state: a recurrent layer's); default maxSeqs. Verify rows reuse their sequence's slot. */
  slots?: number;
  numPages: number; // KV pages in the cache
  pageSize: number; // tokens per page
  maxPagesPerSeq: number;
  /** Tokens per sequence (picks LongRoPE's factor set, model/rope.ts). */
  contextLength: number;
}

/**
 * One step as every block sees it, decided once before the step is recorded (GpuForward.plan).
 */
export interface StepPlan {
  tokens: number; // rows of the step
  seqs: number; // sequences of the step
  /** Prefill when some sequence brings several tokens, else decode (one token each). */
  mode: AttentionMode;
  /** The linear layers take the matvec paths (T ≤ MATVEC_MAX_TOKENS), which can fold a pre-norm and fuse the GLU. */
  matvec: boolean;
  /** The pre-norms fold into the projections after them: a matvec step whose LoRA updates (none) need no normed input. */
  foldNorms: boolean;
  /** The LoRA updates of a step where some row runs an adapter; null otherwise. */
  lora: LoraHooks | null;
  /** The final hidden states are read back (return_hidden_states): the head writes them even where its norm folds. */
  hidden: boolean;
  /** The longest context in the step (keys after it): attention runs a single split where that is enough. */
  maxKeys?: number;
  /** Some rows of the step are image tokens: the image splice runs after the embedding. */
  images?: boolean;
  /** Every row's final hidden state (after the output norm) is written to the buffer GpuForward.enableRows made: an MTP head's input rows. */
  rows?: boolean;
  /** false: no head (last-row gather, norm, LM head): a step that only fills the KV (an MTP head fed rows it guesses nothing after). */
  logits?: boolean;
}

/** Where an adapted matrix reads its input and writes its output: LoRA's update lands on the same y. */
export interface LoraIo {
  x: GPUBuffer;
  y: BufferRef;
  k: number;
  n: number;
  /** x (y) is f32 at every precision (the residual stream, a branch output). */
  xF32?: boolean;
  yF32?: boolean;
}

/** A block's LoRA hook points: each adaptable matrix's input and output. */
export type LoraPoints = Partial<Record<LoraMat, LoraIo>>;

/** The step's LoRA updates (./lora.ts), recorded by the blocks right after the matrix they adapt. */
export interface LoraHooks {
  /** A loaded adapter adapts layer `layer`'s `target`. */
  adapts(layer: number, target: LoraMat): boolean;
  /** Records that update where a loaded adapter adapts it. */
  after(pass: GPUComputePassEncoder, tokens: number, layer: number, target: LoraMat): void;
}

/** One block of one layer (or the head), as prepared ops: `encode` only records. */
export interface Block {
  encode(pass: GPUComputePassEncoder, plan: StepPlan): void;
  /** Frees the ops' own buffers (the run state's are the forward pass's). */
  destroy(): void;
  /** Its LoRA hook points; none where it has no adaptable matrix. */
  readonly lora: LoraPoints;
  /** Mixture of experts: u32 [maxTokens, k], the experts each token of the last step was routed to. */
  readonly routedIds?: GPUBuffer;
}

/** Records `ops` in order, skipping absent ones (a norm the config places nowhere). */
export function encodeAll(pass: GPUComputePassEncoder, tokens: number, ops: readonly (Op | undefined)[]): void {
  for (const op of ops) op?.encode(pass, tokens);
}

/** Destroys `ops`, skipping absent ones. */
export function destroyAll(ops: readonly ({ destroy(): void } | undefined)[]): void {
  for (const op of ops) op?.destroy();
}

/**
 * The buffers of the run state, made once at load. Some are f32 at every precision (the residual
 * stream, the branch outputs, the GLU products: real models' streams and MLPs have outliers past
 * f16's 65504); the builder tells every op that reads or writes one of them.
 */
export class RunBuffers {
  readonly all: GPUBuffer[] = [];
  private readonly f32 = new Set<BufferRef>();

  constructor(
    private readonly device: GPUDevice,
    private readonly act: number,
  ) {}

  /** `elements` of act, or f32 at every precision, or u32. */
  make(elements: number, label: string, type: 'act' | 'f32' | 'u32' = 'act'): GPUBuffer {
    const b = createBuffer(this.device, elements * (type === 'act' ? this.act : 4), STORAGE, label);
    this.all.push(b);
    if (type === 'f32') this.f32.add(b);
    return b;
  }

  /** Owns a buffer made elsewhere (RoPE's tables). */
  own(b: GPUBuffer): GPUBuffer {
    this.all.push(b);
    return b;
  }

  isF32(b: BufferRef | undefined): boolean {
    return b !== undefined && this.f32.has(b);
  }
}

/** The run state every block reads and writes (shapes in elements of act unless said). */
export interface RunState {
  ids: GPUBuffer; // u32 [maxTokens] the step's token ids, resolved by the feed op
  x: GPUBuffer; // f32 [maxTokens, hidden] the residual stream (f32 in the f16 path too: real models' streams exceed 65504)
  xb: GPUBuffer; // [maxTokens, hidden] normed block input
  xb2: GPUBuffer; // f32 [maxTokens, hidden] block output before its post-norm or scaled add (f32 at every precision: Gemma's branches pass 65504)
}

/** A linear layer's arguments by name (y = W·x + bias). */
export interface LinearCall {
  label: OpLabel;
  weight: GpuMatrix;
  x: GPUBuffer;
  y: GPUBuffer;
  bias?: GPUBuffer;
  /** A pre-norm's weight, folded into the matvec steps: they read the stream `x` and norm it themselves. */
  foldNorm?: GPUBuffer;
  /** y is the residual stream: the output is added into it as it is stored. */
  addInto?: boolean;
  /** Where the rows go in y. */
  segments?: readonly LinearSegment[];
  /** Interleaved (gate, up) rows stored apart (`pairs`) or as act(gate)·up (`glu`; matvec steps only). */
  pairs?: boolean;
  glu?: GluActivation;
  /** false: never the integer dot-product path, whatever the engine asks (a recurrent block's linears: issue #29). */
  integerDot?: false;
}

/** What the blocks build with: the model, the step's buffers, the run state and the op builders. */
export class BlockBuilder {
  readonly act: number;
  /** The linear layers' work splits: SwiftShader's own where the adapter is emulated. */
  readonly specs: Parameters<typeof createLinearOp>[2];
  private readonly shared = new Map<string, unknown>();

  constructor(
    readonly ctx: OpContext,
    readonly config: ModelConfig,
    readonly weights: GpuWeights,
    readonly step: StepBuffers,
    readonly limits: ForwardLimits,
    readonly caches: LayerCaches,
    readonly buffers: RunBuffers,
    readonly state: RunState,
    readonly ropeFreqFactors?: Float32Array,
  ) {
    this.act = actBytes(ctx.precision);
    this.specs = engineLinearSpecs(ctx);
  }

  /** Bytes of `elements` act elements, rounded up to where a binding may start (regions of one buffer). */
  region(elements: number): number {
    const align = this.ctx.device.limits.minStorageBufferOffsetAlignment;
    return Math.ceil((elements * this.act) / align) * align;
  }

  /** What `make` made on the first call under `key` (scratch shared by the layers of one block kind: they run one after another). */
  once<T>(key: string, make: () => T): T {
    if (!this.shared.has(key)) this.shared.set(key, make());
    return this.shared.get(key) as T;
  }

  /** Every op is labelled with its role and layer (OpLabel) for the bench's per-op report. */
  linear(a: LinearCall): Promise<Op> {
    const { weight: m, x, y } = a;
    const isF32 = (b: BufferRef) => this.buffers.isF32(b);
    const norm = a.foldNorm && { x: this.state.x, weight: a.foldNorm, eps: this.config.rmsNormEps, xF32: isF32(this.state.x) };
    const epilogue = { ...(a.pairs ? { pairs: a.pairs } : {}), ...(a.glu ? { glu: a.glu } : {}) };
    return createLinearOp(
      a.integerDot === false ? { ...this.ctx, integerDot: false } : this.ctx,
      { weight: m.parts, dtype: m.dtype, n: m.rows, k: m.cols, bias: a.bias, x, y, xF32: isF32(x), yF32: isF32(y), step: this.step.counts, maxTokens: this.limits.maxTokens, label: a.label, norm, residual: a.addInto ?? false, segments: a.segments, ...epilogue },
      this.specs,
    );
  }

  /** RMSNorm of x into y: rows of `n` (default the hidden size), `rowsPerToken` of them per token (per-head norms; `weightPerRow`: per-group weights). */
  norm(a: { label: OpLabel; x: BufferRef; weight: GPUBuffer; y: BufferRef; n?: number; rowsPerToken?: number; weightPerRow?: boolean }): Promise<Op> {
    const { x, weight, y, label } = a;
    return createRmsNormOp(this.ctx, { x, weight, y, n: a.n ?? this.config.hiddenSize, rowsPerToken: a.rowsPerToken ?? 1, weightPerRow: a.weightPerRow, maxTokens: this.limits.maxTokens, eps: this.config.rmsNormEps, label, xF32: this.buffers.isF32(x) });
  }

  /**
   * Where a block's last linear layer writes: straight into the residual stream (added as it is
   * stored) where neither a post-norm nor Granite's scale comes between, else the f32 branch xb2,
   * which `branchEnd` then adds in.
   */
  branchOut(postNorm: GPUBuffer | undefined): { y: GPUBuffer; addInto: boolean } {
    const adds = !postNorm && this.config.residualScale === 1;
    return adds ? { y: this.state.x, addInto: true } : { y: this.state.xb2, addInto: false };
  }

  /**
   * The branch xb2 into the stream: its post-norm (Gemma 2/3, OLMo 2), which adds as it stores,
   * or Granite's scaled add x += scale · xb2, both in f32; absent where the branch added itself.
   */
  async branchEnd(layer: number, which: 'attn' | 'ffn', postNorm: GPUBuffer | undefined): Promise<Op | undefined> {
    const { x, xb2 } = this.state;
    const { hiddenSize: n, residualScale: scale } = this.config;
    if (postNorm) {
      const label = { role: `post_${which}_norm`, layer };
      return createRmsNormOp(this.ctx, { x: xb2, xF32: true, weight: postNorm, y: x, yF32: true, add: { scale }, n, maxTokens: this.limits.maxTokens, eps: this.config.rmsNormEps, label });
    }
    if (scale === 1) return undefined;
    return createAddOp(this.ctx, { x, xF32: true, y: xb2, yF32: true, n, scale, label: { role: `${which}_residual`, layer } });
  }

  /** A LoRA hook point: the matrix's shape, its input and output (f32 where they are). */
  loraIo(m: { rows: number; cols: number }, x: GPUBuffer, y: BufferRef): LoraIo {
    return { x, y, k: m.cols, n: m.rows, xF32: this.buffers.isF32(x), yF32: this.buffers.isF32(y) };
  }
}
