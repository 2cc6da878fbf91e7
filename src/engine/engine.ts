/**
 * The WebGPU engine: a loaded model serving many sequences at once. A scheduler (./scheduler.ts)
 * batches every request in flight into ragged steps over one pool of KV pages with a prefix cache
 * shared by all requests; the step runner (./step-runner.ts) runs those steps on the GPU: one
 * command buffer per step (two when a row has a grammar: the forward pass runs while the CPU
 * computes the masks), sampling on the GPU, and only the sampled ids (and logprobs or hidden
 * states when asked) read back, while the next step already runs. This file is the facade: it
 * loads the model and every buffer and pipeline, and serves generate, LoRA and teacher forcing.
 * A request's lifecycle (what to feed, enders, min_tokens, CPU sampler, grammar, abort) is the
 * shared `Sequence` (./sequence.ts, as the reference backend's).
 */
import { acquireGPU, type GPUContext } from '../gpu/device';
import { WebGPUError } from '../gpu/errors';
import type { MemoryUse } from '../gpu/memory';
import type { Precision } from '../gpu/pipelines';
import { engineOpContext, type OpContext } from '../kernels/op';
import { defaultPrefillChunk } from '../kernels/matmul';
import type { GenerationDefaults } from '../model/generation-config';
import { defaultContextLength, hasRecurrentLayers, mamba2ConvDim, type ModelConfig } from '../model/config';
import { openModel, type ModelLocation, type OpenedModel } from '../model/open';
import { loadTextModel } from '../text/from-model';
import type { ChatTemplateConfig, TextTokenizer } from '../text/index';
import { ProgressEmitter, type ProgressCallback } from '../loader/progress';
import { logprobsOf } from './logit-processors';
import { GpuVisionTower } from './forward/vision';
import { ModelError } from '../model/errors';
import { openVisionTower, type OpenedVisionTower } from '../model/vision-open';
import { tokensPerTile, towerTensors } from '../vision/tower';
import type { UploadProgress } from './gpu-weights';
import { checkPromptIds } from './backend-util';
import { BackendDisposedError, ContextLengthError, LoraExistsError } from './errors';
import { SeqImages } from './seq-images';
import { BreakerTable, Sequence, type SequenceEnv } from './sequence';
import { KvPages } from './kv-pages';
import { layerCacheKinds, pageBytes, rollsBack, rowBytes } from './layer-cache';
import { adapterFingerprint, KvPersister, modelFingerprint, type KvPersistOptions, type PersistTarget } from './kv-persist';
import { hashKey } from './kv-page-file';
import { Scheduler, type BatchRunner } from './scheduler';
import { DeviceRecovery, type RecoveryOptions } from './recovery';
import { StepRunner, type StepProfiler } from './step-runner';
import { SnapshotPool, snapshotCount, StateSnapshots } from './state-snapshots';

export type { StepProfiler } from './step-runner';
import { LoraPool } from './lora-pool';
import { LoraRegistry, type LoraInfo } from './lora-registry';
import { openLoraWithCache } from '../lora/load';
import type { LoadOptions } from '../loader/open';
import type { ModelInput } from '../loader/resolve';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult, TokenLogprob, VisionInputs } from './types';
import { BackendError } from './errors';
import { scaledSource, type Scaled } from './lora-source';
import type { SpeculationRequest } from './proposers';
import { GpuMtpHead } from './mtp-head';
import { MTP_DEFAULT_GUESSES, MTP_MAX_GUESSES, MtpDrafter, mtpGuessesOutOfRange, noMtpHead } from './mtp-proposer';
import { loadsMtpHead, mtpHeadNotLoaded } from './mtp-option';
import { checkDraftVocab, draftTokens, DraftModel } from './draft';
import { DraftEngine } from './draft-engine';
import { buildParts, destroyParts, kvPoolPages, weightBytesOf, type GpuParts, type PartsSpec } from './gpu-parts';

export { kvPoolPages } from './gpu-parts';

/** Tiles the GPU tower encodes in one batch (its buffers hold this many). */
const VISION_BATCH_TILES = 4;

const isOpenedTower = (x: unknown): x is OpenedVisionTower => typeof x === 'object' && x !== null && 'readTensorF32' in x && 'processor' in x;

export interface EngineOptions {
  /** A GPU to use; by default `navigator.gpu` (pages, workers) is acquired. Node passes `nodeGPU()`'s. */
  gpu?: GPUContext | GPU;
  /** `auto` (default): f16 activations where `shader-f16` is granted, else f32. */
  precision?: Precision | 'auto';
  /** Tokens per sequence (prompt + completion); default min(model's max positions, 4096). */
  contextLength?: number;
  /** Prompt tokens per step for prefill chunks (default 128, 512 on discrete GPUs: defaultPrefillChunk); a step also holds one decode token per running sequence. */
  prefillChunk?: number;
  /**
   * Decode steps of one token take the integer dot-product matvec (the activation quantised to
   * int8 per block of 32, dotted with the weights' quants by `dot4I8Packed`) where the device
   * reports WGSL's `packed_4x8_integer_dot_product` and the layer's weight type has an integer
   * form; elsewhere, and by default, the float matvec. Off by default until a GPU measurement
   * shows it faster (the bench's `--integer-dot`); it rounds the activation to 8 bits per value.
   */
  integerDot?: boolean;
  /** KV page size in tokens (default 16). */
  pageSize?: number;
  /**
   * Speculative decoding for requests that do not ask for their own (`speculation`): n-gram
   * lookup over the prompt and output (src/engine/proposers.ts), or the model's MTP head (`mtp`,
   * ./mtp-proposer.ts: `k` chained guesses per step, 1..8, default 1; refused on a model without one). Off by default until measured on GPUs.
   */
  speculative?: { type: 'ngram'; n: number; k: number } | { type: 'mtp'; k?: number };
  /**
   * Load the model's MTP head (Qwen3.5's `mtp` layer), so that requests may ask for
   * `speculative: {type: "mtp"}` (./mtp-option.ts). Default: only when `speculative` is
   * `{type: "mtp"}`; otherwise the head stays on disk and takes no GPU memory (its layer, fc and
   * norms, and KV pages). true on a model without a head, or false beside `speculative` mtp, fails the load.
   */
  mtp?: boolean;
  /**
   * A draft model for speculative decoding (./draft.ts): a smaller model with the same tokenizer
   * (refused otherwise), loaded on the same GPU with its own KV pages, guesses up to `tokens`
   * (default 8) tokens per step greedily for every request that asks for no speculation of its
   * own; the model verifies them. Wins over `speculative`.
   */
  draft?: { model: ModelLocation | OpenedModel; tokens?: number };
  /** Sequences decoded together: requests, `n` choices and batched prompts in flight at once (default 16). */
  maxBatch?: number;
  /** Tokens the KV page pool holds for all sequences and the prefix cache (default: see kvPoolPages). */
  kvCacheTokens?: number;
  /** Model id in the API (default: the arch). */
  id?: string;
  /**
   * Bytes one weight buffer may hold; default, and never more than, the device's binding and
   * buffer limits (the smaller). Larger matrices go up as row parts. Tests set it far lower so the
   * tiny fixtures split; it leaves the KV pool and activations alone (sized by the device's limits).
   */
  maxWeightPartBytes?: number;
  onUpload?: UploadProgress;
  /** Typed progress of the `upload` and `compile` phases (the loader reports `download`/`cache`). */
  onProgress?: ProgressCallback | ProgressEmitter;
  /** LoRA adapters to load with the model, by the name requests choose them with (`model: "id:name"`). */
  lora?: Record<string, LoraSource>;
  /** The LoRA adapter pool, made on the first adapter load (defaults: see LORA_POOL_DEFAULTS). */
  loraPool?: Partial<Pick<LoraPoolOptions, 'maxAdapters' | 'maxRank' | 'bytes'>>;
  /**
   * A vision tower for the model (llama.cpp's `--mmproj`: an mmproj GGUF; or an HF Idefics3 /
   * SmolVLM folder): requests may then carry images. Idefics3 projectors (SmolVLM) only. A model
   * opened from such a folder carries its own tower (OpenedModel.vision), used when this is absent.
   */
  mmproj?: ModelLocation | OpenedVisionTower;
  /**
   * Recovery from a lost device (./recovery.ts): how to get a new one, and how many losses to
   * recover from in a window. Absent: a loss ends every sequence with `device_lost`, for good.
   */
  recovery?: RecoveryOptions;
  /**
   * A hybrid model's prefix cache (./state-snapshots.ts): recurrent states kept at page
   * boundaries, each every recurrent layer's slot state (f32). Snapshots in the pool; default as
   * many as 128 MiB hold, within [2, 64] (Qwen3.5 0.8B: 19.3 MiB each, 6 = 116 MiB; LFM2 350M:
   * 80 KiB each, 64 = 5 MiB). 0: a hybrid's prompts are always computed whole (cached_tokens 0).
   */
  stateSnapshots?: number;
  /**
   * Keeps full pages of the prefix cache in a store (./kv-persist.ts: a directory in Node), so a
   * restarted engine uploads a known prompt prefix instead of computing it. Not on hybrid models
   * (their recurrent states are not stored with the pages) nor for adapters' sequences.
   */
  persistKv?: KvPersistOptions;
}

/** An adapter to load: where it is (anything a model load takes), or that with a multiplier on its own scale. */
export type LoraSource = Scaled<ModelInput>;

export interface LoraPoolOptions {
  /** Adapters loaded at once (default 8). */
  maxAdapters: number;
  /** The largest rank an adapter may have (default 64, or the first adapter's rank if larger). */
  maxRank: number;
  /** Bytes of the pool of A/B matrices in f32 (default: 64 MiB, or twice the first adapter's size if larger, within the binding limit). */
  bytes: number;
}

export const LORA_POOL_DEFAULTS = { maxAdapters: 8, maxRank: 64, bytes: 64 * 2 ** 20 } as const;

/** Options of `engine.loadLora`: a multiplier on the adapter's own alpha / rank, and the loader's (cache, progress, signal, …). */
export type LoraLoadOptions = LoadOptions & { scale?: number };

export class GpuEngine implements Backend {
  readonly id: string;
  readonly config: ModelConfig;
  readonly tokenizer: TextTokenizer;
  readonly chatTemplate: ChatTemplateConfig;
  readonly contextLength: number;
  readonly precision: Precision;
  readonly generationConfig?: GenerationDefaults;
  /** Sequences in flight at once (slots), and tokens per step. */
  readonly limits: { maxSeqs: number; maxTokens: number; numPages: number; pageSize: number };

  private readonly kv: KvPages;
  private readonly scheduler: Scheduler;
  private parts: GpuParts;
  private stepRunner: StepRunner;
  private readonly recovery: DeviceRecovery;
  /** KV persistence (EngineOptions.persistKv), when on. */
  persist: KvPersister | null = null;
  private disposed = false;
  /** The processor and <image> id of a model loaded with a vision tower (EngineOptions.mmproj). */
  vision?: VisionInputs;
  private tower?: GpuVisionTower;
  /** The tower as opened, to make it again on a new device (`rebuild`). */
  private towerSource?: OpenedVisionTower;
  private readonly env: SequenceEnv;

  /** Bench hook: while set, steps record through it (more passes; same results). */
  get profiler(): StepProfiler | null {
    return this.runner.profiler;
  }
  set profiler(p: StepProfiler | null) {
    this.runner.profiler = p;
  }

  /** Test hook: called as each step is submitted and as a sampling step's results reach the CPU. */
  get trace(): ((event: 'submit' | 'readback') => void) | null {
    return this.runner.trace;
  }
  set trace(t: ((event: 'submit' | 'readback') => void) | null) {
    this.runner.trace = t;
  }
  private readonly adapters: LoraRegistry;
  private loraPool: Promise<LoraPool> | null = null;
  /** Requests ended since load (finished, stopped or aborted) and their tokens (EngineStats). */
  private readonly served = { requests: 0, promptTokens: 0, cachedPromptTokens: 0, generationTokens: 0 };
  /** What a request that names no speculation of its own gets (EngineOptions.speculative or draft). */
  private speculation: SpeculationRequest | undefined;
  /** The draft model (EngineOptions.draft), disposed with the engine. */
  private draft?: DraftModel;
  /** The model's MTP head (ModelConfig.mtpLayers), shared by the sequences that speculate with it; destroyed with the engine. */
  private mtp?: MtpDrafter;

  private constructor(
    parts: GpuParts,
    text: { tokenizer: TextTokenizer; chatTemplate: ChatTemplateConfig },
    private readonly opened: OpenedModel,
    private readonly spec: PartsSpec,
    opts: { id?: string; contextLength: number; loraPool?: Partial<LoraPoolOptions>; recovery?: RecoveryOptions; speculative?: EngineOptions['speculative'] },
  ) {
    const sp = opts.speculative;
    if (sp) this.speculation = sp.type === 'mtp' ? { mtp: { k: sp.k ?? MTP_DEFAULT_GUESSES } } : { ngram: { n: sp.n, k: sp.k } };
    const { maxSeqs: rows, maxTokens, numPages, pageSize } = parts.forward.limits;
    const maxSeqs = parts.forward.limits.slots ?? rows;
    this.id = opts.id ?? opened.config.arch;
    this.config = opened.config;
    this.tokenizer = text.tokenizer;
    this.chatTemplate = text.chatTemplate;
    this.contextLength = opts.contextLength;
    this.generationConfig = opened.generationConfig as GenerationDefaults | undefined;
    this.precision = spec.precision;
    this.parts = parts;
    this.limits = { maxSeqs, maxTokens, numPages, pageSize };
    this.kv = new KvPages(numPages, pageSize);
    this.stepRunner = this.runnerFor(parts);
    // The scheduler reaches the runner of the device now (a new one after a loss).
    const runner: BatchRunner = {
      place: (seq, slot) => this.stepRunner.place(seq, slot),
      submit: (items) => this.stepRunner.submit(items),
      isLoss: (e) => e instanceof WebGPUError && e.code === 'device_lost',
      recover: () => this.recovery.recover(),
    };
    this.scheduler = new Scheduler(this.kv, runner, { maxSeqs, rows, prefillTokens: maxTokens - rows }, spec.snapshots ? new SnapshotPool(spec.snapshots) : null);
    this.recovery = new DeviceRecovery(parts.gpu, opts.recovery, { lost: () => this.scheduler.deviceLost(), rebuild: (gpu) => this.rebuild(gpu), disposed: () => this.disposed });
    const breakers = new BreakerTable(this.tokenizer);
    // Verify rows only where every recurrent layer's state rolls back to the first rejected proposal.
    const verifies = rollsBack(layerCacheKinds(this.config));
    this.env = { eosIds: this.tokenizer.eosIds, contextLength: this.contextLength, breakers: (list) => breakers.of(list), moe: this.config.moe !== null, verifies };
    this.adapters = new LoraRegistry(
      (floats, rank) => (this.loraPool ??= this.makeLoraPool(floats, rank, opts.loraPool ?? {})),
      (key) => {
        this.scheduler.prefix.drop(key);
        this.persist?.forget(key);
      },
    );
  }

  /** The adapter pool and the forward pass's LoRA ops, made once, on the first adapter load. */
  private async makeLoraPool(floats: number, rank: number, o: Partial<LoraPoolOptions>): Promise<LoraPool> {
    const { limits } = this.gpu.device;
    const cap = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
    const bytes = Math.min(cap, o.bytes ?? Math.max(LORA_POOL_DEFAULTS.bytes, 2 * floats * 4));
    const pool = LoraPool.create(this.gpu.device, {
      maxAdapters: o.maxAdapters ?? LORA_POOL_DEFAULTS.maxAdapters,
      // Unset, the largest rank is the default or the first adapter's, whichever is larger.
      maxRank: o.maxRank ?? Math.max(LORA_POOL_DEFAULTS.maxRank, rank),
      bytes,
      numLayers: this.config.numLayers,
      ...(this.config.attnOutputGate ? { gatedQ: { heads: this.config.numHeads, headDim: this.config.headDim } } : {}),
      ...(this.config.mamba2 ? { mamba2In: { z: this.config.mamba2.numHeads * this.config.mamba2.headDim, xbc: mamba2ConvDim(this.config.mamba2) } } : {}),
    });
    await this.parts.forward.enableLora(this.parts.ctx, pool, this.parts.step);
    return pool;
  }

  /** The GPU the engine runs on now (another one after a recovered loss). */
  get gpu(): GPUContext {
    return this.recovery.gpu;
  }

  /** Runs the scheduler's steps (./step-runner.ts; the bench's hooks wrap its `submit`); a new one after a recovered loss. */
  get runner(): StepRunner {
    return this.stepRunner;
  }

  /** Test hook: the draft model (EngineOptions.draft), its counters and page pool. */
  get draftModel(): DraftModel | undefined {
    return this.draft;
  }

  /** Recoveries from a lost device since load. */
  get recoveries(): number {
    return this.recovery.recoveries;
  }

  /** Set once the engine stopped recovering (or had no recovery): every request ends with it. */
  get failure(): WebGPUError | null {
    return this.recovery.failure;
  }

  private runnerFor(parts: GpuParts): StepRunner {
    const snapshots = StateSnapshots.create(parts.gpu.device, layerCacheKinds(this.config), parts.forward.caches, this.spec.snapshots);
    return new StepRunner(parts.gpu, this.config, { maxSeqs: this.spec.limits.maxSeqs, slots: this.limits.maxSeqs }, parts.forward, parts.sampler, parts.step, this.kv, snapshots);
  }

  /** The MTP head on the parts' device, reading their embedding and LM head, and the step's hidden-state rows it is fed from. */
  private async mtpHeadOn(parts: GpuParts): Promise<GpuMtpHead> {
    const limits = { ...this.spec.limits, maxTokens: MTP_ROWS, maxGuesses: MTP_MAX_GUESSES };
    const head = await GpuMtpHead.create(parts.gpu, this.opened, parts.weights, { precision: this.spec.precision, limits });
    this.stepRunner.hiddenRows = await parts.forward.enableRows(parts.ctx, parts.weights.outputNorm);
    return head;
  }

  /**
   * After a loss, the speculation parts the model serves without (an MTP head, a draft model)
   * made again on the new device: one that fails leaves the model serving without its guesses,
   * logged and in stats (`draftFailed`), never failing the recovery.
   */
  private async rebuildGuessers(gpu: GPUContext, parts: GpuParts): Promise<void> {
    const warn = (what: string, e: unknown) => console.warn(`webgpu-llm: ${what} could not be rebuilt after a lost device (${e instanceof Error ? e.message : String(e)}); the model serves without its guesses`);
    if (this.mtp) {
      const head = await this.mtpHeadOn(parts).catch((e: unknown) => void warn('the MTP head', e));
      this.mtp.rebuilt(head ?? null);
    }
    if (this.draft) await this.draft.rebuild(gpu).catch((e: unknown) => warn('the draft model', e));
  }

  /**
   * After a loss (./recovery.ts): frees what lived on the lost device, builds it all on `gpu`
   * (the weights read again from the model's source: the loader's cache), and loads the LoRA
   * adapters again into a pool of the same size. The scheduler already set every sequence aside.
   */
  private async rebuild(gpu: GPUContext): Promise<void> {
    const pool = this.loraPool && (await this.loraPool.catch(() => null));
    const { profiler, trace, cpuSteps, prefillSteps, speculated, tilesEncoded } = this.stepRunner;
    destroyParts(this.parts);
    this.tower?.destroy();
    this.tower = undefined;
    this.stepRunner.destroy();
    this.mtp?.head.destroy();
    const parts = await buildParts(gpu, this.opened, this.spec, new ProgressEmitter(undefined));
    if (this.disposed) {
      destroyParts(parts);
      throw new BackendDisposedError('GpuEngine');
    }
    this.parts = parts;
    // Requests' image embeddings stay with their sequences (Sequence.images): a sequence fed again splices them again.
    this.stepRunner = Object.assign(this.runnerFor(parts), { profiler, trace, cpuSteps, prefillSteps, tilesEncoded });
    Object.assign(this.stepRunner.speculated, speculated);
    this.loraPool = null;
    if (pool) {
      const again = LoraPool.create(gpu.device, pool.limits);
      this.loraPool = Promise.resolve(again);
      await parts.forward.enableLora(parts.ctx, again, parts.step);
      this.adapters.reload(again);
    }
    if (this.towerSource) await this.loadVision(parts.ctx, this.towerSource);
    await this.rebuildGuessers(gpu, parts);
    // Disposed meanwhile: dispose() freed the draft before it was rebuilt.
    if (this.disposed) await this.draft?.dispose();
  }

  /**
   * Loads a LoRA adapter (a PEFT folder or a llama.cpp GGUF LoRA, from anything a model load takes)
   * under `name`; requests then choose it with `model: "<id>:<name>"` or `lora_path: "<name>"`.
   * Checked against this base (LoraError names the file and the problem); the base weights are
   * never modified: the adapter's low-rank product is added on the GPU, per sequence.
   */
  async loadLora(name: string, source: LoraSource, opts: LoraLoadOptions = {}): Promise<LoraInfo> {
    if (this.disposed) throw new BackendDisposedError('GpuEngine');
    if (typeof name !== 'string' || name === '') throw new TypeError('a LoRA adapter needs a non-empty name');
    const { source: input, scale: given } = scaledSource(source);
    const scale = given ?? opts.scale ?? 1;
    if (!Number.isFinite(scale)) throw new TypeError(`LoRA scale must be a finite number, got ${scale}`);
    if (this.adapters.names.includes(name)) throw new LoraExistsError(name);
    const adapter = await openLoraWithCache(input, this.config, opts);
    // Not into a pool being rebuilt on a new device (a lost device's recovery reloads the adapters it knows).
    await this.recovery.recover();
    // Its pages are stored under its content's hash (KV persistence on): a restart loading it reads them back.
    const stored = this.persist ? await adapterFingerprint(adapter, scale) : undefined;
    return this.adapters.add(name, adapter, sourceName(input), scale, stored);
  }

  /** Unloads an adapter: new requests naming it get a 404 at once; those in flight finish first. */
  unloadLora(name: string): Promise<void> {
    return this.adapters.remove(name, () => this.loraPool!);
  }

  /** The loaded adapters. */
  loras(): LoraInfo[] {
    return this.adapters.list();
  }

  /** Opens (if needed), uploads and prepares a model: every buffer and pipeline is made here. */
  static async load(model: ModelLocation | OpenedModel, opts: EngineOptions = {}): Promise<GpuEngine> {
    const opened = isOpened(model) ? model : await openModel(model);
    // EmbeddingGemma's bidirectional attention: this causal decoder would serve it wrong (the CPU reference runs it).
    if (opened.config.bidirectional)
      throw new ModelError('unsupported_arch', `${opened.config.arch}: bidirectional attention (EmbeddingGemma) is not run by this causal engine: createEngine serves it through the encoder backend (engine/forward/gemma-encoder.ts)`, 'use_bidirectional_attention');
    const gpu = await toContext(opts.gpu);
    const precision: Precision = opts.precision === 'f32' || opts.precision === 'f16' ? opts.precision : gpu.info.f16 ? 'f16' : 'f32';
    const config = opened.config;
    const contextLength = defaultContextLength(config, opts.contextLength);
    const pageSize = opts.pageSize ?? 16;
    const maxPagesPerSeq = Math.ceil(contextLength / pageSize);
    const maxSeqs = Math.max(1, Math.floor(opts.maxBatch ?? DEFAULT_MAX_BATCH));
    const numPages = kvPoolPages({ config, precision, pageSize, contextLength, maxSeqs, weightBytes: weightBytesOf(opened), limits: gpu.device.limits, tokens: opts.kvCacheTokens });
    // A step holds a decode token for every sequence and every verify row plus prefill chunks of `prefillChunk` tokens in all.
    const integerDot = opts.integerDot === true;
    const prefillChunk = Math.max(1, Math.floor(opts.prefillChunk ?? defaultPrefillChunk(gpu.info, engineOpContext(gpu, precision, integerDot).emulated)));
    const rows = maxSeqs + VERIFY_ROWS;
    const limits = { maxTokens: prefillChunk + rows, maxSeqs: rows, slots: maxSeqs, numPages, pageSize, maxPagesPerSeq, contextLength };
    const snapshots = snapshotCount(layerCacheKinds(config), gpu.device.limits.maxBufferSize, opts.stateSnapshots);
    const spec: PartsSpec = { precision, integerDot, limits, maxWeightPartBytes: opts.maxWeightPartBytes, snapshots };
    const text = loadTextModel(opened);
    const mtpHead = loadsMtpHead(config, opts);
    if (opts.speculative?.type === 'mtp') {
      const refused = mtpGuessesOutOfRange(opts.speculative.k ?? MTP_DEFAULT_GUESSES);
      if (refused) throw new ModelError('invalid_field', refused.message, 'speculative');
    }
    // The draft's vocabulary is checked before anything goes to the GPU.
    const draftOpened = opts.draft && (isOpened(opts.draft.model) ? opts.draft.model : await openModel(opts.draft.model));
    if (draftOpened) checkDraftVocab(text.tokenizer, loadTextModel(draftOpened).tokenizer);
    const drafted = opts.draft && draftTokens(opts.draft.tokens);
    const progress = opts.onProgress instanceof ProgressEmitter ? opts.onProgress : new ProgressEmitter(opts.onProgress);
    const parts = await buildParts(gpu, opened, spec, progress, opts.onUpload);
    const engine = new GpuEngine(parts, text, opened, spec, { id: opts.id, contextLength, loraPool: opts.loraPool, recovery: opts.recovery, speculative: opts.speculative });
    try {
      if (opts.persistKv && !hasRecurrentLayers(config)) await engine.persistTo(opts.persistKv);
      if (mtpHead) engine.mtp = new MtpDrafter(await engine.mtpHeadOn(parts), maxSeqs, config.hiddenSize, MTP_ROWS);
      if (draftOpened) {
        // On the same device, as large a batch, context and step: every sequence may draft at once.
        const backend = await DraftEngine.load(gpu, draftOpened, { precision, integerDot, contextLength, maxSeqs, pageSize, prefillChunk });
        engine.draft = new DraftModel(backend, drafted!);
        engine.speculation = { draft: engine.draft };
      }
      // An HF SmolVLM folder carries its tower (OpenedModel.vision); an mmproj given wins.
      const tower = opts.mmproj ?? opened.vision;
      if (tower) await engine.loadVision(parts.ctx, tower);
      for (const [name, source] of Object.entries(opts.lora ?? {})) await engine.loadLora(name, source);
    } catch (e) {
      await engine.dispose();
      throw e;
    }
    return engine;
  }

  /** Starts KV persistence (EngineOptions.persistKv): pages are keyed by the weights' fingerprint, the precision and the page layout. */
  private async persistTo(opts: KvPersistOptions): Promise<void> {
    const kinds = layerCacheKinds(this.config);
    const act = this.precision === 'f16' ? 2 : 4;
    const modelKey = await hashKey([await modelFingerprint(this.opened), this.precision, this.kv.pageSize, JSON.stringify(kinds)]);
    const target = (): PersistTarget => {
      const { caches } = this.parts.forward;
      const layers = kinds.flatMap((k, l) => (k.kind === 'paged-kv' ? [{ ...caches.paged(l), rowBytes: rowBytes(k, act) }] : []));
      return { device: this.parts.gpu.device, layers };
    };
    this.persist = new KvPersister(opts, modelKey, this.kv, this.scheduler.prefix, target, pageBytes(kinds, this.kv.pageSize, act));
    await opts.store.open().catch(() => {});
    if (opts.source !== undefined) await opts.store.label(modelKey, opts.source).catch(() => {});
  }

  /** The vision tower on the GPU and the image splice of the forward pass (EngineOptions.mmproj). */
  private async loadVision(ctx: OpContext, source: ModelLocation | OpenedVisionTower): Promise<void> {
    const opened = isOpenedTower(source) ? source : await openVisionTower(source);
    const imageTokenId = this.tokenizer.tokenToId('<image>');
    if (imageTokenId === undefined) throw new ModelError('missing_field', 'the model has a vision tower (mmproj) but its tokenizer has no <image> token', 'mmproj');
    if (opened.config.projectionDim !== this.config.hiddenSize)
      throw new ModelError('tensor_shape', `the vision tower projects to ${opened.config.projectionDim} values, the text model's hidden size is ${this.config.hiddenSize}: not this model's mmproj`, 'mmproj');
    const weights = new Map<string, Float32Array>();
    for (const t of towerTensors(opened.config)) weights.set(t.name, await opened.readTensorF32(t.name));
    this.tower = await GpuVisionTower.create(ctx, opened.config, weights, VISION_BATCH_TILES);
    this.towerSource = opened;
    this.runner.images = await this.parts.forward.enableImages(ctx);
    const tower = this.tower;
    this.runner.encodeTiles = (tiles) => tower.embedTiles(tiles);
    this.vision = { processor: opened.processor, imageTokenId };
  }

  /**
   * A request's images as its sequence carries them (positions, content-hash keys for the prefix
   * cache); the tower encodes them in the step that first feeds their positions (StepRunner).
   */
  private async promptImages(request: GenerateRequest): Promise<SeqImages | undefined> {
    const images = request.images ?? [];
    if (images.length === 0) return undefined;
    if (!this.tower || !this.vision) throw new BackendError('invalid_prompt', 400, `the model ${this.id} takes no images`);
    const per = tokensPerTile(this.tower.config);
    const out = await SeqImages.of(request.promptIds, this.vision.imageTokenId, images, per, this.tower.config.projectionDim);
    if (!out) {
      const tiles = images.reduce((n, im) => n + im.tiles.length, 0);
      const found = request.promptIds.filter((id) => id === this.vision!.imageTokenId).length;
      throw new BackendError('invalid_prompt', 400, `the prompt has ${found} image tokens for ${images.length} images of ${tiles} tiles (${tiles * per} tokens)`);
    }
    return out;
  }

  /** Tiles the vision tower encoded since load (tests: a cached image is not encoded again). */
  get tilesEncoded(): number {
    return this.runner.tilesEncoded;
  }

  /** Bench hook: GPU bytes of the weight matrices (what a decode step reads at least) and of the KV cache. */
  get footprint(): { matrixBytes: number; kvCacheBytes: number } {
    return { matrixBytes: this.parts.weights.matrixBytes, kvCacheBytes: this.parts.forward.kvCacheBytes };
  }

  /**
   * Bench hook: the MTP head when loaded (EngineOptions.mtp), and the weight bytes one guess reads:
   * the head's own weights, the trunk's LM head it shares, and an embedding row.
   */
  get mtpHead(): { drafter: MtpDrafter; bytesPerGuess: number } | undefined {
    if (!this.mtp) return undefined;
    const { output, tokenEmbd } = this.parts.weights;
    const size = (m: typeof output) => m.parts.reduce((n, p) => n + p.buffer.size, 0);
    return { drafter: this.mtp, bytesPerGuess: this.mtp.head.weightBytes + size(output) + size(tokenEmbd) / this.config.vocabSize };
  }

  /** GPU memory the engine allocated at load, by use (the memory warning's figures: src/gpu/memory.ts). */
  get memoryUse(): MemoryUse {
    const { weights, forward, step } = this.parts;
    // The MTP head's own weights (its layer, fc, norms; it reads the trunk's embedding and LM head), KV pages and run state. A draft model's, all of its own.
    const draft = this.draft?.memoryUse ?? { weights: 0, kvCache: 0, other: 0 };
    const head = this.mtp?.head.cacheBytes ?? { kv: 0, state: 0 };
    return {
      weights: weights.bytes + (this.mtp?.head.weightBytes ?? 0) + draft.weights,
      kvCache: forward.kvCacheBytes + this.stepRunner.snapshotBytes + head.kv + draft.kvCache,
      other: forward.stateBytes + step.buffer.size + this.stepRunner.readbackBytes + head.state + draft.other,
    };
  }

  /** The page pool and the scheduler now: pages used by sequences, held by the prefix cache, free; sequences running and waiting. */
  get kvStats(): EngineStats {
    const { steps, preemptions } = this.scheduler.counters;
    return {
      pageSize: this.kv.pageSize,
      pages: this.kv.stats,
      running: this.scheduler.runningCount,
      waiting: this.scheduler.waitingCount,
      steps,
      preemptions,
      ...this.served,
      speculative: { ...this.stepRunner.speculated },
      ...(this.draft ? { draftSteps: this.draft.steps, draftFailed: this.draft.failed } : {}),
      recovering: this.recovery.active,
      recoveries: this.recovery.recoveries,
    };
  }

  /** Sampled rows of steps that read the logits back and sampled on the CPU (see needsCpuSampling). */
  get cpuSampledSteps(): number {
    return this.runner.cpuSteps;
  }

  /** Prefill chunks run that only filled the KV (no sampling): tests count them to see an abort stop a prefill. */
  get prefillChunks(): number {
    return this.runner.prefillSteps;
  }

  async *generate(request: GenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    if (this.disposed) throw new BackendDisposedError('GpuEngine');
    const { promptIds } = request;
    checkPromptIds(promptIds, this.config.vocabSize);
    if (promptIds.length >= this.contextLength) {
      throw new ContextLengthError(`the prompt has ${promptIds.length} tokens; this engine's context holds ${this.contextLength}`);
    }
    const lease = request.lora !== undefined ? this.adapters.acquire(request.lora, request.loraParam ?? 'model') : null;
    try {
      // A hybrid model's cached prefix needs the recurrent states at its end (./state-snapshots.ts):
      // without a snapshot pool its prompts are always computed whole (cached_tokens 0).
      const uncached = hasRecurrentLayers(this.config) && !this.scheduler.snapshots;
      const speculation = this.withMtpHead(request.speculation ?? this.speculation);
      const images = await this.promptImages(request);
      const seq = new Sequence({ ...request, ...(speculation ? { speculation } : {}) }, this.env, lease ?? undefined);
      if (images) seq.images = images;
      try {
        // Image positions are keyed by the image's content hash in the prefix cache (SeqImages.keys).
        const useCache = uncached ? false : (request.cachePrompt ?? true);
        // Stored pages of the prompt's prefix go into the prefix cache first (base model or an adapter, no images: kv-persist.ts).
        if (lease?.storedKey) this.persist?.name(lease.key, lease.storedKey);
        if (useCache && !images && this.persist) await this.persist.restore(promptIds, promptIds.length - 1, lease?.key);
        return yield* this.run(seq, useCache, request.signal);
      } finally {
        // run() ended it whichever way it went.
        const r = seq.finish!;
        this.served.requests++;
        this.served.promptTokens += r.promptTokens;
        this.served.cachedPromptTokens += r.cachedTokens;
        this.served.generationTokens += r.completionTokens;
      }
    } finally {
      lease?.release();
    }
  }

  /**
   * Hands a sequence to the scheduler and yields its tokens as steps produce them. An abort, or a
   * consumer that stops iterating, ends it: it leaves the batch at the next step.
   */
  private async *run(seq: Sequence, useCache: boolean, signal?: AbortSignal): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    const onAbort = () => this.scheduler.wakeUp();
    signal?.addEventListener('abort', onAbort, { once: true });
    const tokens = this.scheduler.submit(seq, useCache);
    try {
      for (;;) {
        const t = await tokens.next();
        if (!t) return seq.finish!;
        yield t;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (!seq.finish) {
        seq.end('abort');
        this.scheduler.wakeUp();
      }
    }
  }

  /**
   * The logits after each of `ids` (teacher forcing: tests, echo + logprobs), with the loaded
   * adapter `lora` if given, one step per id; with `prompt` > 1, the
   * first `prompt` ids are one prefill and the logits start after the last of them (one array per
   * position from prompt − 1 on), as serving runs a prompt.
   */
  async teacherForcedLogits(ids: readonly number[], lora?: string, prompt = 1): Promise<Float32Array[]> {
    if (this.disposed) throw new BackendDisposedError('GpuEngine');
    checkPromptIds(ids, this.config.vocabSize);
    const out: Float32Array[] = [];
    const lease = lora !== undefined ? this.adapters.acquire(lora) : null;
    try {
      const seq = Sequence.teacherForced(ids, this.env, (logits) => out.push(logits), lease ?? undefined, prompt);
      for await (const _ of this.run(seq, false));
    } finally {
      lease?.release();
    }
    return out;
  }

  async scorePrompt(ids: number[], topLogprobs: number, lora?: string): Promise<Array<{ logprob: number | null; top: TokenLogprob[] }>> {
    const logits = await this.teacherForcedLogits(ids, lora);
    return [{ logprob: null, top: [] }, ...ids.slice(1).map((id, i) => logprobsOf(logits[i]!, id, topLogprobs))];
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    // Sequences in flight end with the error; the step under way finishes first.
    await this.scheduler.stop(new BackendDisposedError('GpuEngine'));
    // Pages being read back and written finish first (a restart finds them).
    await this.persist?.settle();
    this.persist?.destroy();
    destroyParts(this.parts);
    this.tower?.destroy();
    this.stepRunner.destroy();
    await this.draft?.dispose();
    this.mtp?.destroy();
  }

  /** A speculation that asks for the MTP head, handed the engine's; refused (400 invalid_field) on a model without one or an engine that did not load it, or for k out of 1..MTP_MAX_GUESSES. */
  private withMtpHead(s: SpeculationRequest | undefined): SpeculationRequest | undefined {
    if (!s?.mtp) return s;
    if (!this.mtp) throw this.config.mtpLayers ? mtpHeadNotLoaded() : noMtpHead(this.config.arch);
    const refused = mtpGuessesOutOfRange(s.mtp.k);
    if (refused) throw refused;
    return { ...s, mtp: { ...s.mtp, head: this.mtp } };
  }
}

/** Rows the MTP head takes per run (a sequence feeds the tokens it recorded since its last step: k + 1 after k accepted guesses; more go in chunks). */
const MTP_ROWS = 8;

/** The serving state of an engine at one moment (`EngineHandle.stats()`). */
export interface EngineStats {
  /** Tokens per KV page. */
  pageSize: number;
  /** The KV page pool: pages held by running sequences, held only by the prefix cache (reclaimable), free. */
  pages: { total: number; used: number; cached: number; free: number };
  /** Sequences in the batch, and queued for a slot or pages. */
  running: number;
  waiting: number;
  /** Steps run (the model's forward passes, a verify step one) and preemptions since load. */
  steps: number;
  preemptions: number;
  /** Requests (choices) ended since load, finished, stopped or aborted, and their prompt tokens, those of them reused from the prefix cache, and tokens generated. */
  requests: number;
  promptTokens: number;
  cachedPromptTokens: number;
  generationTokens: number;
  /** Speculative decoding since load: tokens proposed and verified, and those accepted into outputs. */
  speculative: { proposed: number; accepted: number };
  /** With a draft model (EngineOptions.draft): its steps since load, apart from the model's `steps`. */
  draftSteps?: number;
  /** With a draft model: its rebuild after a lost device failed, so the model serves without its guesses (the output is the same). */
  draftFailed?: boolean;
  /** The GPU device was lost and the engine is rebuilding on a new one (sequences wait meanwhile). */
  recovering: boolean;
  /** Recoveries from a lost device since load. */
  recoveries: number;
}

/** Sequences decoded together by default. */
export const DEFAULT_MAX_BATCH = 16;

/**
 * Rows of every step beyond maxBatch's, for speculative decoding's verify rows: a lone sequence
 * (maxBatch 1) verifies up to this many proposals a step, and at maxBatch N they add to the rows
 * running sequences leave. As many as an MTP head guesses at most (MTP_MAX_GUESSES). Each row is
 * sized in every per-row buffer (docs/api.md's Speculative decoding: at Qwen3.5-0.8B's
 * vocabulary about 1 MiB a row, the logits' f32 row and the grammar mask's bits; per-slot
 * buffers, the penalties' rows and a recurrent layer's states, are not).
 */
export const VERIFY_ROWS = MTP_MAX_GUESSES;

/** A source as listings show it: a path, URL or repo id; 'picked files' otherwise. */
function sourceName(input: ModelInput): string {
  return typeof input === 'string' || input instanceof URL ? input.toString() : 'picked files';
}

function isOpened(m: ModelLocation | OpenedModel): m is OpenedModel {
  return typeof m === 'object' && m !== null && 'tensors' in m && 'config' in m;
}

async function toContext(gpu: GPUContext | GPU | undefined): Promise<GPUContext> {
  if (gpu && 'device' in gpu) return gpu;
  return acquireGPU({ gpu: gpu as GPU | undefined });
}
