/**
 * A draft model on the GPU (EngineOptions.draft): only what a draft round (./draft.ts) drives, on
 * the target's device. Its weights, forward pass and sampler (./gpu-parts.ts), a KV page pool and
 * a step runner, and nothing a served model has besides: no scheduler or prefix cache (the
 * target's step loop runs it, a slot per target sequence), no state snapshots (a hybrid's prefix
 * cache: up to 128 MiB, state-snapshots.ts), no device recovery of its own (the target's rebuilds
 * it on the new device: `rebuild`), no LoRA adapters, MTP head, vision
 * tower or KV persistence. Its sequences draw greedily on the GPU, so its sampler has no
 * penalties op and its runner reads back the drawn ids only (no logits, hidden-state or
 * routed-expert readback buffers): 4 · maxSeqs · vocab · 4 bytes fewer than a served model's.
 */
import type { GPUContext } from '../gpu/device';
import type { MemoryUse } from '../gpu/memory';
import { hasRecurrentLayers } from '../model/config';
import { ModelError } from '../model/errors';
import type { OpenedModel } from '../model/open';
import { ProgressEmitter } from '../loader/progress';
import type { DraftBackend, DraftStepper } from './draft';
import type { Precision } from '../gpu/pipelines';
import { buildParts, destroyParts, kvPoolPages, weightBytesOf, type GpuParts, type PartsSpec } from './gpu-parts';
import { KvPages } from './kv-pages';
import { StepRunner } from './step-runner';

/** The draft's sizes: the target's precision, slots, context, page size and prefill chunk. */
export interface DraftEngineOptions {
  precision: Precision;
  contextLength: number;
  maxSeqs: number;
  pageSize: number;
  prefillChunk: number;
  integerDot?: boolean;
}

/** What the draft keeps on one device. */
interface Built {
  parts: GpuParts;
  runner: StepRunner;
  kv: KvPages;
}

export class DraftEngine implements DraftBackend {
  stepper: DraftStepper;

  /** What lives on the device now (null: freed, and not built again: a failed rebuild). */
  private built: Built | null;

  private constructor(
    built: Built,
    private readonly opened: OpenedModel,
    /** What its parts are built from, fixed at load: a new device gets the same sizes. */
    private readonly spec: PartsSpec,
    readonly contextLength: number,
  ) {
    this.built = built;
    this.stepper = DraftEngine.stepperOf(built);
  }

  private static stepperOf({ parts, runner, kv }: Built): DraftStepper {
    const { config } = parts.forward;
    const { maxSeqs, maxTokens } = parts.forward.limits;
    // Its sequences are greedy, never speculate and stop only at their length: no DRY breakers, no verify rows.
    const env = { eosIds: [], contextLength: parts.forward.limits.contextLength, breakers: () => () => false, moe: config.moe !== null, verifies: false };
    return { kv, runner, env, limits: { maxSeqs, maxTokens }, cutsBack: !hasRecurrentLayers(config) };
  }

  /** Its parts and a step runner over a new (empty) page pool on `gpu`. */
  private static async build(gpu: GPUContext, opened: OpenedModel, spec: PartsSpec): Promise<Built> {
    const parts = await buildParts(gpu, opened, spec, new ProgressEmitter(undefined));
    const kv = new KvPages(spec.limits.numPages, spec.limits.pageSize);
    const runner = new StepRunner(gpu, opened.config, { maxSeqs: spec.limits.maxSeqs }, parts.forward, parts.sampler, parts.step, kv, null, true);
    return { parts, runner, kv };
  }

  /**
   * Uploads the draft's weights and makes its buffers and pipelines on `gpu`: `maxSeqs` slots of
   * `contextLength` tokens, steps of a `prefillChunk` and a token per slot (the target's), and a
   * KV pool sized as a model's own for its weights (kvPoolPages).
   */
  static async load(gpu: GPUContext, opened: OpenedModel, o: DraftEngineOptions): Promise<DraftEngine> {
    const { config } = opened;
    // As GpuEngine.load: this causal forward pass would run EmbeddingGemma's bidirectional attention wrong.
    if (config.bidirectional) throw new ModelError('unsupported_arch', `${config.arch}: a bidirectional encoder (EmbeddingGemma) cannot be a draft model`, 'draft');
    const { precision, contextLength, maxSeqs, pageSize } = o;
    const numPages = kvPoolPages({ config, precision, pageSize, contextLength, maxSeqs, weightBytes: weightBytesOf(opened), limits: gpu.device.limits });
    const limits = { maxTokens: o.prefillChunk + maxSeqs, maxSeqs, numPages, pageSize, maxPagesPerSeq: Math.ceil(contextLength / pageSize), contextLength };
    const spec: PartsSpec = { precision, integerDot: o.integerDot ?? false, limits, snapshots: 0, drawsOnly: true };
    return new DraftEngine(await DraftEngine.build(gpu, opened, spec), opened, spec, contextLength);
  }

  /**
   * After a lost device (the target's rebuild): frees what lived on the lost one and builds it all
   * again on `gpu` (the weights uploaded again, a new step runner and an empty page pool). What
   * its slots held is gone: the draft model forgets every session's slot (DraftModel.rebuild).
   */
  async rebuild(gpu: GPUContext): Promise<void> {
    this.free();
    const built = await DraftEngine.build(gpu, this.opened, this.spec);
    this.built = built;
    this.stepper = DraftEngine.stepperOf(built);
  }

  /** GPU memory it allocated at load, by use (counted into the target's EngineHandle memoryUse). */
  get memoryUse(): MemoryUse {
    if (!this.built) return { weights: 0, kvCache: 0, other: 0 };
    const { weights, forward, step } = this.built.parts;
    return { weights: weights.bytes, kvCache: forward.kvCacheBytes, other: forward.stateBytes + step.buffer.size + this.built.runner.readbackBytes };
  }

  async dispose(): Promise<void> {
    this.free();
  }

  /** Frees its buffers, once (a dispose after a failed rebuild frees nothing). */
  private free(): void {
    if (!this.built) return;
    destroyParts(this.built.parts);
    this.built.runner.destroy();
    this.built = null;
  }
}
