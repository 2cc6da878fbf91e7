/**
 * The WebGPU engine: a loaded model serving many sequences at once. A scheduler (./scheduler.ts)
 * batches every request in flight into ragged steps over one pool of KV pages with a prefix cache
 * shared by all requests; this file runs those steps on the GPU (`submit`, then the step's
 * completion): one command buffer per step (two when a row has a grammar: the forward pass runs
 * while the CPU computes the masks), sampling on the GPU, and only the sampled ids (and logprobs or
 * hidden states when asked) read back, while the next step already runs.
 * A request's lifecycle (what to feed, enders, min_tokens, CPU sampler, grammar, abort) is the
 * shared `Sequence` (./sequence.ts, as the reference backend's).
 */
import { acquireGPU, type GPUContext } from '../gpu/device';
import type { MemoryUse } from '../gpu/memory';
import { createBuffer, READBACK, STORAGE } from '../gpu/buffers';
import { pipelineCache, type Precision } from '../gpu/pipelines';
import { createSampleOp, LOGPROB_WORDS, packSamplingParams, SAMPLE_PARAM_WORDS, unpackSampled, type SeqSampling } from '../kernels/sample';
import { engineOpContext, type Op, type OpContext, type StepShape } from '../kernels/op';
import { createPenaltiesOp, needsPenalties, type PenaltiesOp } from '../kernels/penalties';
import { createApplyMaskOp, type ApplyMaskOp } from '../kernels/apply-mask';
import { defaultPrefillChunk } from '../kernels/matmul';
import type { GenerationDefaults } from '../model/generation-config';
import { defaultContextLength, type ModelConfig } from '../model/config';
import { openModel, type ModelLocation, type OpenedModel } from '../model/open';
import { loadTextModel } from '../text/from-model';
import type { ChatTemplateConfig, TextTokenizer } from '../text/index';
import { ProgressEmitter, type ProgressCallback } from '../loader/progress';
import { logprobsOf } from './logit-processors';
import { GpuForward } from './forward/forward';
import { maxWeightPartBytes, uploadWeights, type GpuWeights, type UploadProgress } from './gpu-weights';
import { checkPromptIds, nextTask } from './backend-util';
import { BackendDisposedError, ContextLengthError, LoraExistsError, PrecisionUnsupportedError } from './errors';
import { BreakerTable, Sequence, type SequenceEnv } from './sequence';
import { KvPages } from './kv-pages';
import { layerCacheKinds, pageBytes, pagesPerBinding } from './layer-cache';
import { Scheduler, type BatchItem, type BatchRunner, type StepCompletion } from './scheduler';
import { StepBuffers } from './step';
import { LoraPool } from './lora-pool';
import { LoraRegistry, type LoraInfo } from './lora-registry';
import { openLoraWithCache } from '../lora/load';
import type { LoadOptions } from '../loader/open';
import type { ModelInput } from '../loader/resolve';
import { maskWords } from '../kernels/mask-ref';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult, SamplingParams, TokenLogprob } from './types';
import { scaledSource, type Scaled } from './lora-source';

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

/**
 * Bench hook (src/bench/profiler.ts): stands in for a step's compute pass, e.g. to give each
 * dispatch its own timed pass. Set `GpuEngine.profiler` only while profiling. A step under a
 * grammar records into two command buffers: `begin` is called once per buffer (`resume` on the
 * second), `end` once, in the last buffer.
 */
export interface StepProfiler {
  /**
   * The pass the step records into (called instead of `encoder.beginComputePass()`); `resume`: the
   * same step, in a later command buffer; `shape`: the step's tokens, sequences and their keys, for
   * the dispatches' byte counts (src/kernels/op.ts).
   */
  begin(encoder: GPUCommandEncoder, resume: boolean, shape: StepShape): GPUComputePassEncoder;
  /** After the step's last pass ended, before `encoder.finish()`: e.g. resolve the step's queries. */
  end(encoder: GPUCommandEncoder): void;
}

/**
 * Whether a step reads the logits back and samples on the CPU. logit_bias, the min_tokens ban and
 * the repetition/frequency/presence penalties run on the GPU (`penalized`: the penalties op,
 * src/kernels/penalties.ts), so only these stay here: DRY, which matches the history's suffix
 * against every earlier position (a scan over the whole history, not an elementwise op);
 * mirostat, whose cut depends on a running mu updated by each draw (v2 could become a GPU
 * threshold later); and penalties with logprobs, since OpenAI's logprobs are the log-softmax of
 * the raw logits, which the penalties op overwrites in place.
 */
function needsCpuSampling(p: SamplingParams, penalized: boolean): boolean {
  return p.dry.multiplier !== 0 || p.mirostat.mode !== 0 || (penalized && p.logprobs);
}

/** Whether this step of `seq` samples on the CPU: its settings need it, or it is teacher-forced. */
function sampledOnCpu(seq: Sequence): boolean {
  return seq.wantsLogits || needsCpuSampling(seq.sampling, needsPenalties(seq.sampling, seq.banned().length > 0));
}

/** Penalty settings that make a slot's penalties a no-op (a sequence that does not use them). */
const NO_PENALTIES = { logitBias: {}, repetitionPenalty: 1, frequencyPenalty: 0, presencePenalty: 0 } as const;

export class GpuEngine implements Backend, BatchRunner {
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
  private readonly stepBuffers: StepBuffers;
  private readonly samplingParams: ArrayBuffer;
  /** u32 words of one row's routed experts: layers × k (0 without experts). */
  private get routedWords(): number {
    const moe = this.config.moe;
    return moe ? this.config.numLayers * moe.numExpertsUsed : 0;
  }
  /** Readback buffers of the steps in flight: step n's while step n+1 runs. */
  private readonly ring: Readback[];
  private submitted = 0;
  /** An all-allowed grammar mask: the rows of unconstrained sequences in a step where another row has a grammar. */
  private readonly allowAll: Uint32Array;
  /** Whether each slot's sequence uses the GPU penalties op (its settings were written at placement). */
  private readonly slotPenalized: boolean[];
  private disposed = false;
  private cpuSteps = 0;
  private prefillSteps = 0;
  private readonly env: SequenceEnv;
  /** Bench hook: while set, steps record through it (more passes; same results). */
  profiler: StepProfiler | null = null;
  /** Test hook: called as each step is submitted and as a sampling step's results reach the CPU. */
  trace: ((event: 'submit' | 'readback') => void) | null = null;
  private readonly adapters: LoraRegistry;
  private loraPool: Promise<LoraPool> | null = null;

  private constructor(
    readonly gpu: GPUContext,
    private readonly weights: GpuWeights,
    private readonly forward: GpuForward,
    private readonly sampler: { op: Op; params: GPUBufferBinding; tokens: GPUBuffer; logprobs: GPUBuffer; penalties: PenaltiesOp; mask: ApplyMaskOp },
    text: { tokenizer: TextTokenizer; chatTemplate: ChatTemplateConfig },
    opened: OpenedModel,
    opts: { id?: string; contextLength: number; precision: Precision; step: StepBuffers; ctx: OpContext; loraPool?: Partial<LoraPoolOptions> },
  ) {
    const { device } = gpu;
    const { maxSeqs, maxTokens, numPages, pageSize } = forward.limits;
    this.id = opts.id ?? opened.config.arch;
    this.config = opened.config;
    this.tokenizer = text.tokenizer;
    this.chatTemplate = text.chatTemplate;
    this.contextLength = opts.contextLength;
    this.generationConfig = opened.generationConfig as GenerationDefaults | undefined;
    this.precision = opts.precision;
    this.stepBuffers = opts.step;
    this.limits = { maxSeqs, maxTokens, numPages, pageSize };
    this.kv = new KvPages(numPages, pageSize);
    this.scheduler = new Scheduler(this.kv, this, { maxSeqs, prefillTokens: maxTokens - maxSeqs });
    this.samplingParams = new ArrayBuffer(maxSeqs * SAMPLE_PARAM_WORDS * 4);
    this.ring = [0, 1].map((i) => ({
      tokens: createBuffer(device, maxSeqs * (1 + LOGPROB_WORDS) * 4, READBACK, `readback ${i}`),
      logits: createBuffer(device, maxSeqs * this.config.vocabSize * 4, READBACK, `logits readback ${i}`),
      hidden: createBuffer(device, maxSeqs * this.config.hiddenSize * 4, READBACK, `hidden readback ${i}`),
      routed: routedReadback(device, maxSeqs * this.routedWords, `routed experts readback ${i}`),
    }));
    this.allowAll = new Uint32Array(maskWords(this.config.vocabSize)).fill(0xffffffff);
    this.slotPenalized = new Array<boolean>(maxSeqs).fill(false);
    const breakers = new BreakerTable(this.tokenizer);
    this.env = { eosIds: this.tokenizer.eosIds, contextLength: this.contextLength, breakers: (list) => breakers.of(list), moe: this.config.moe !== null };
    this.adapters = new LoraRegistry(
      (floats, rank) => (this.loraPool ??= this.makeLoraPool(opts.ctx, floats, rank, opts.loraPool ?? {})),
      (key) => this.scheduler.prefix.drop(key),
    );
  }

  /** The adapter pool and the forward pass's LoRA ops, made once, on the first adapter load. */
  private async makeLoraPool(ctx: OpContext, floats: number, rank: number, o: Partial<LoraPoolOptions>): Promise<LoraPool> {
    const { limits } = this.gpu.device;
    const cap = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
    const bytes = Math.min(cap, o.bytes ?? Math.max(LORA_POOL_DEFAULTS.bytes, 2 * floats * 4));
    const pool = LoraPool.create(this.gpu.device, {
      maxAdapters: o.maxAdapters ?? LORA_POOL_DEFAULTS.maxAdapters,
      // Unset, the largest rank is the default or the first adapter's, whichever is larger.
      maxRank: o.maxRank ?? Math.max(LORA_POOL_DEFAULTS.maxRank, rank),
      bytes,
      numLayers: this.config.numLayers,
    });
    await this.forward.enableLora(ctx, pool, this.stepBuffers);
    return pool;
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
    return this.adapters.add(name, adapter, sourceName(input), scale);
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
    const gpu = await toContext(opts.gpu);
    const precision: Precision = opts.precision === 'f32' || opts.precision === 'f16' ? opts.precision : gpu.info.f16 ? 'f16' : 'f32';
    if (precision === 'f16' && !gpu.info.f16) throw new PrecisionUnsupportedError();
    const config = opened.config;
    const contextLength = defaultContextLength(config, opts.contextLength);
    const pageSize = opts.pageSize ?? 16;
    const maxPagesPerSeq = Math.ceil(contextLength / pageSize);
    const maxSeqs = Math.max(1, Math.floor(opts.maxBatch ?? DEFAULT_MAX_BATCH));
    const weightBytes = [...opened.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0);
    const numPages = kvPoolPages({ config, precision, pageSize, contextLength, maxSeqs, weightBytes, limits: gpu.device.limits, tokens: opts.kvCacheTokens });
    // A step holds a decode token for every sequence plus prefill chunks of `prefillChunk` tokens in all.
    const ctx = engineOpContext(gpu, precision, opts.integerDot === true);
    const prefillChunk = Math.max(1, Math.floor(opts.prefillChunk ?? defaultPrefillChunk(gpu.info, ctx.emulated)));
    const limits = { maxTokens: prefillChunk + maxSeqs, maxSeqs, numPages, pageSize, maxPagesPerSeq, contextLength };
    const text = loadTextModel(opened);
    const progress = opts.onProgress instanceof ProgressEmitter ? opts.onProgress : new ProgressEmitter(opts.onProgress);
    const upload = progress.phase('upload').file('weights', weightBytes);
    let uploaded = 0;
    const weights = await uploadWeights(gpu.device, opened, (name, done, total) => {
      upload.add(done - uploaded);
      uploaded = done;
      opts.onUpload?.(name, done, total);
    }, Math.min(maxWeightPartBytes(gpu.device.limits), opts.maxWeightPartBytes ?? Infinity));
    upload.done();
    const step = new StepBuffers(gpu.device, { ...limits, samplingWords: SAMPLE_PARAM_WORDS });
    // The sampler's token of each slot; the next step's FEED tokens read it (u32 [maxSeqs]).
    const tokens = createBuffer(gpu.device, maxSeqs * 4, STORAGE, 'sampled tokens');
    // Compile progress counts layers whose pipelines and bind groups are ready (+ embedding and head).
    const compile = progress.phase('compile').file('kernels', config.numLayers + 2);
    const forward = await GpuForward.create(ctx, config, weights, step, tokens, limits, opened.ropeFreqFactors, () => compile.add(1));
    const params = step.sampling;
    const logprobs = createBuffer(gpu.device, maxSeqs * LOGPROB_WORDS * 4, STORAGE, 'sampled logprobs'); // u32 [maxSeqs, LOGPROB_WORDS] by row
    const { logits } = forward;
    const op = await createSampleOp(ctx, { logits, params, tokens, logprobs, vocab: config.vocabSize, rowSlot: step.rowSlot });
    // Bias rows, counts and prompt bits per slot; they count the sampler's `tokens` (by slot too).
    const penalties = await createPenaltiesOp(ctx, { logits, lastToken: tokens, vocab: config.vocabSize, maxSeqs, rowSlot: step.rowSlot });
    // Structured output's token mask (by row), applied before the penalties and the sampler.
    const mask = await createApplyMaskOp(ctx, { logits, vocab: config.vocabSize, maxSeqs });
    compile.done();
    const engine = new GpuEngine(gpu, weights, forward, { op, params, tokens, logprobs, penalties, mask }, text, opened, { id: opts.id, contextLength, precision, step, ctx, loraPool: opts.loraPool });
    try {
      for (const [name, source] of Object.entries(opts.lora ?? {})) await engine.loadLora(name, source);
    } catch (e) {
      await engine.dispose();
      throw e;
    }
    return engine;
  }

  /** Bench hook: GPU bytes of the weight matrices (what a decode step reads at least) and of the KV cache. */
  get footprint(): { matrixBytes: number; kvCacheBytes: number } {
    return { matrixBytes: this.weights.matrixBytes, kvCacheBytes: this.forward.kvCacheBytes };
  }

  /** GPU memory the engine allocated at load, by use (the memory warning's figures: src/gpu/memory.ts). */
  get memoryUse(): MemoryUse {
    const readback = this.ring.reduce((n, r) => n + r.tokens.size + r.logits.size + r.hidden.size, 0);
    return { weights: this.weights.bytes, kvCache: this.forward.kvCacheBytes, other: this.forward.stateBytes + this.stepBuffers.buffer.size + readback };
  }

  /** The page pool and the scheduler now: pages used by sequences, held by the prefix cache, free; sequences running and waiting. */
  get kvStats(): EngineStats {
    const { steps, preemptions } = this.scheduler.counters;
    return { pageSize: this.kv.pageSize, pages: this.kv.stats, running: this.scheduler.runningCount, waiting: this.scheduler.waitingCount, steps, preemptions };
  }

  /** Sampled rows of steps that read the logits back and sampled on the CPU (see needsCpuSampling). */
  get cpuSampledSteps(): number {
    return this.cpuSteps;
  }

  /** Prefill chunks run that only filled the KV (no sampling): tests count them to see an abort stop a prefill. */
  get prefillChunks(): number {
    return this.prefillSteps;
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
      return yield* this.run(new Sequence(request, this.env, lease ?? undefined), request.cachePrompt ?? true, request.signal);
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
   * A sequence takes a slot (BatchRunner): the penalties op's per-slot state. That state then
   * follows the sampled tokens on the GPU; a sequence placed again after preemption brings its
   * output's counts. The min_tokens ban can only end during a request, so if any step of the
   * sequence uses the op, its first one does.
   */
  place(seq: Sequence, slot: number): void {
    const banned = seq.banned();
    const penalized = needsPenalties(seq.sampling, banned.length > 0);
    const gpu = penalized && !sampledOnCpu(seq);
    this.slotPenalized[slot] = gpu;
    if (gpu) this.sampler.penalties.reset(slot, seq.sampling, seq.promptIds, banned, seq.tokens.slice(seq.promptIds.length));
    else this.sampler.penalties.reset(slot, NO_PENALTIES, [], []);
    this.forward.caches.resetSlot(slot);
  }

  /**
   * Records and submits one step (BatchRunner). Rows are ordered: sequences sampled on the GPU,
   * then those sampled on the CPU (their logits are read back), then prefill chunks that sample
   * nothing; the sampler, penalties and mask run over the sampling rows only. Unmasked, the step
   * is one command buffer; with a grammar in any row it is two: the forward pass is submitted
   * first, the CPU computes the grammars' bitmasks while the GPU runs it, and a second small
   * buffer applies the masks, the penalties and the sampler and copies the results out, into
   * this step's readback buffers of the ring (two: the scheduler completes step n after it
   * submitted step n+1, never later). A token drawn on the GPU without a grammar stays there for
   * the next step to feed (FEED).
   */
  async submit(items: BatchItem[]): Promise<StepCompletion> {
    const { device } = this.gpu;
    const gpuRows: BatchItem[] = [];
    const cpuRows: BatchItem[] = [];
    const rest: BatchItem[] = [];
    for (const item of items) {
      const { seq, slot, work } = item;
      if (!work.samples) {
        rest.push(item);
        continue;
      }
      if (sampledOnCpu(seq)) cpuRows.push(item);
      else gpuRows.push(item);
      // min_tokens reached: the bias row goes back to logit_bias alone (one write per request).
      if (this.slotPenalized[slot] && seq.minTokens > 0 && seq.drawCount === seq.minTokens) this.sampler.penalties.setBias(slot, seq.sampling, []);
    }
    const rows = [...gpuRows, ...cpuRows, ...rest];
    const sampling = gpuRows.length + cpuRows.length;
    const params = gpuRows.map((r) => r.seq.gpuSampling());
    if (params.length) packSamplingParams(params, this.samplingParams);
    const { tokens, seqs, adapted } = this.stepBuffers.write(
      rows.map((r) => ({ seq: r.slot, tokens: r.work.tokens, adapter: r.seq.adapter?.id })),
      this.kv,
      params.length ? new Uint32Array(this.samplingParams, 0, params.length * SAMPLE_PARAM_WORDS) : undefined,
    );
    const ring = this.ring[this.submitted++ % this.ring.length]!;
    let encoder = device.createCommandEncoder();
    // Each sequence's keys after this step: the longest decides attention's splits; a profiled
    // step reports them all.
    const keys = rows.map((r) => this.kv.length(r.slot));
    const shape = this.profiler ? { tokens, seqs, keys } : undefined;
    let pass = this.profiler ? this.profiler.begin(encoder, false, shape!) : encoder.beginComputePass();
    // return_hidden_states: the sampling rows' final hidden states are copied out after the pass.
    const wantHidden = rows.slice(0, sampling).some((r) => r.seq.wantsHidden);
    this.forward.encode(pass, this.forward.plan({ tokens, seqs, adapted, hidden: wantHidden, maxKeys: Math.max(...keys) }));
    const masked = rows.slice(0, sampling).some((r) => r.seq.constraint);
    if (masked) {
      pass.end();
      device.queue.submit([encoder.finish()]);
      // A browser may hand submitted work to its GPU process only once the microtask queue drains
      // (Blink flushes at the end of a microtask checkpoint), and xgrammar's mask is synchronous
      // wasm behind a promise: yield a task so the forward pass runs while the masks are computed.
      // Queue writes land in order between submits, so the second buffer reads this step's masks.
      await nextTask();
      for (let row = 0; row < sampling; row++) {
        const seq = rows[row]!.seq;
        if (seq.constraint) await seq.nextMask();
        this.sampler.mask.write(row, seq.constraint ? seq.maskBits! : this.allowAll);
      }
      encoder = device.createCommandEncoder();
      pass = this.profiler ? this.profiler.begin(encoder, true, shape!) : encoder.beginComputePass();
      this.sampler.mask.encode(pass, sampling);
    }
    if (gpuRows.length) {
      // The op runs over every sampling row; rows whose slot does not use it are left as they are.
      if (gpuRows.some((r) => this.slotPenalized[r.slot])) this.sampler.penalties.encode(pass, gpuRows.length);
      this.sampler.op.encode(pass, gpuRows.length);
    }
    pass.end();
    this.profiler?.end(encoder);
    const { maxSeqs } = this.limits;
    const V = this.config.vocabSize;
    const wantLogprobs = params.some((p) => p.logprobs);
    if (gpuRows.length) {
      encoder.copyBufferToBuffer(this.sampler.tokens, 0, ring.tokens, 0, maxSeqs * 4);
      if (wantLogprobs) encoder.copyBufferToBuffer(this.sampler.logprobs, 0, ring.tokens, maxSeqs * 4, gpuRows.length * LOGPROB_WORDS * 4);
    }
    if (cpuRows.length) encoder.copyBufferToBuffer(this.forward.logits, gpuRows.length * V * 4, ring.logits, 0, cpuRows.length * V * 4);
    // return_hidden_states: the sampling rows' final hidden states (the LM head's input rows).
    const H = this.config.hiddenSize;
    if (wantHidden) encoder.copyBufferToBuffer(this.forward.hidden, 0, ring.hidden, 0, sampling * H * 4);
    // return_routed_experts: each layer's k expert ids of each sampling row's last token, row-major
    // [row][layer][k] (copies only when a row asks: a step of S rows makes S · layers of them).
    const wantRouted = rows.slice(0, sampling).some((r) => r.seq.wantsRouted);
    if (wantRouted) {
      const k = this.config.moe!.numExpertsUsed;
      let last = -1;
      rows.slice(0, sampling).forEach((r, row) => {
        last += r.work.tokens.length;
        // A dense layer's k words keep the -1s written at creation (no expert routed).
        this.forward.routedIds.forEach((ids, l) => ids && encoder.copyBufferToBuffer(ids, last * k * 4, ring.routed, (row * this.routedWords + l * k) * 4, k * 4));
      });
    }
    device.queue.submit([encoder.finish()]);
    this.trace?.('submit');
    rows.forEach((r, i) => r.seq.advance(r.work, i < gpuRows.length && !r.seq.constraint));
    this.prefillSteps += rest.length;

    if (!sampling) {
      const done = this.untilLost(device.queue.onSubmittedWorkDone());
      return () => done;
    }
    return () => this.collect(ring, { gpuRows, cpuRows, params, wantLogprobs, wantHidden, wantRouted });
  }

  /**
   * A step's completion: maps its readback buffers once the GPU finished it and records each
   * row's token. A sequence that ended at the step before (known only now) drew one token too
   * many here: it is dropped, so the output is what an unpipelined loop gives.
   */
  private async collect(
    ring: Readback,
    step: { gpuRows: BatchItem[]; cpuRows: BatchItem[]; params: SeqSampling[]; wantLogprobs: boolean; wantHidden: boolean; wantRouted: boolean },
  ): Promise<void> {
    const { gpuRows, cpuRows, params, wantLogprobs, wantHidden, wantRouted } = step;
    const { maxSeqs } = this.limits;
    const V = this.config.vocabSize;
    const H = this.config.hiddenSize;
    try {
      await this.untilLost(
        Promise.all([
          gpuRows.length ? ring.tokens.mapAsync(GPUMapMode.READ) : null,
          cpuRows.length ? ring.logits.mapAsync(GPUMapMode.READ) : null,
          wantHidden ? ring.hidden.mapAsync(GPUMapMode.READ, 0, (gpuRows.length + cpuRows.length) * H * 4) : null,
          wantRouted ? ring.routed.mapAsync(GPUMapMode.READ, 0, (gpuRows.length + cpuRows.length) * this.routedWords * 4) : null,
        ]),
      );
      this.trace?.('readback');
      const hiddens = wantHidden ? new Float32Array(ring.hidden.getMappedRange(0, (gpuRows.length + cpuRows.length) * H * 4)) : null;
      // Row r's hidden state, for a sequence that asked for it.
      const hiddenOf = (item: BatchItem, row: number) => (hiddens && item.seq.wantsHidden ? { hidden: hiddens.slice(row * H, (row + 1) * H) } : {});
      // Row r's routed experts per layer, for a sequence that asked for them.
      // int32: a dense layer's entries are -1.
      const routedWords = wantRouted ? new Int32Array(ring.routed.getMappedRange(0, (gpuRows.length + cpuRows.length) * this.routedWords * 4)) : null;
      const routedOf = (item: BatchItem, row: number): number[][] | undefined => {
        if (!routedWords || !item.seq.wantsRouted) return undefined;
        const k = this.config.moe!.numExpertsUsed;
        return this.forward.routedIds.map((_, l) => Array.from(routedWords.subarray(row * this.routedWords + l * k, row * this.routedWords + (l + 1) * k)));
      };
      if (gpuRows.length) {
        const words = new Uint32Array(ring.tokens.getMappedRange());
        gpuRows.forEach((item, row) => {
          if (item.seq.finish) return;
          const at = maxSeqs + row * LOGPROB_WORDS;
          const [s] = unpackSampled(words.subarray(item.slot, item.slot + 1), wantLogprobs ? words.subarray(at, at + LOGPROB_WORDS) : undefined, [params[row]!]);
          const routed = routedOf(item, row);
          guard(item, () => item.seq.record({ id: s!.token, ...(s!.logprob !== undefined ? { logprob: s!.logprob, top: s!.top ?? [] } : {}), ...hiddenOf(item, row), ...(routed ? { routedExperts: routed } : {}) }));
        });
      }
      if (cpuRows.length) {
        const all = new Float32Array(ring.logits.getMappedRange(0, cpuRows.length * V * 4));
        cpuRows.forEach((item, i) => {
          if (item.seq.finish) return;
          this.cpuSteps++;
          guard(item, () => item.seq.sampleLogits(all.slice(i * V, (i + 1) * V), hiddenOf(item, gpuRows.length + i).hidden, routedOf(item, gpuRows.length + i)));
        });
      }
    } finally {
      for (const b of [ring.tokens, ring.logits, ring.hidden, ring.routed]) if (b.mapState === 'mapped') b.unmap();
    }
    // Tokens the grammars force now are fed with this draw at the next step (Sequence.jumpForward).
    for (const item of [...gpuRows, ...cpuRows]) if (item.seq.jumpsForward && item.error === undefined) await item.seq.jumpForward().catch((e: unknown) => (item.error = e));
  }

  /** `p`, or a rejection once the device is lost (a lost device may never report work done). */
  private untilLost<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.gpu.lost.then((e) => Promise.reject(e))]);
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
    this.forward.destroy();
    this.weights.destroy();
    this.stepBuffers.destroy();
    const { op, tokens, logprobs, penalties, mask } = this.sampler;
    op.destroy();
    penalties.destroy();
    mask.destroy();
    for (const b of [tokens, logprobs, ...this.ring.flatMap((r) => [r.tokens, r.logits, r.hidden, r.routed])]) b.destroy();
  }
}

/** One step's readback buffers (MAP_READ): `tokens` [maxSeqs] ids by slot then [maxSeqs, LOGPROB_WORDS] by row; `logits` f32 [maxSeqs, vocab] of CPU-sampled rows. */
interface Readback {
  tokens: GPUBuffer;
  logits: GPUBuffer;
  /** f32 [maxSeqs, hidden] the sampling rows' final hidden states (`return_hidden_states`). */
  hidden: GPUBuffer;
  /** u32 [maxSeqs, layers, k] the sampling rows' routed experts (`return_routed_experts`). */
  routed: GPUBuffer;
}

/** Runs one sequence's part of a step's results; its failure (e.g. a grammar refusing the token) is its own. */
function guard(item: BatchItem, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    item.error = e;
  }
}

/** The serving state of an engine at one moment (`EngineHandle.stats()`). */
export interface EngineStats {
  /** Tokens per KV page. */
  pageSize: number;
  /** The KV page pool: pages held by running sequences, held only by the prefix cache (reclaimable), free. */
  pages: { total: number; used: number; cached: number; free: number };
  /** Sequences in the batch, and queued for a slot or pages. */
  running: number;
  waiting: number;
  /** Steps run and preemptions since load. */
  steps: number;
  preemptions: number;
}

/** Sequences decoded together by default. */
export const DEFAULT_MAX_BATCH = 16;

/**
 * Pages in the KV pool. By default the pool gets the weights' size in bytes, between 64 MiB and
 * 2 GiB (a model's KV needs grow with its size; a page has no way to ask how much memory the GPU
 * has), at least one full context and at most a full context for every slot; and every layer's K
 * (and V) buffer must fit one storage binding.
 */
export function kvPoolPages(a: {
  config: ModelConfig;
  precision: Precision;
  pageSize: number;
  contextLength: number;
  maxSeqs: number;
  weightBytes: number;
  limits: Pick<GPUSupportedLimits, 'maxStorageBufferBindingSize' | 'maxBufferSize'>;
  tokens?: number;
}): number {
  const kinds = layerCacheKinds(a.config);
  const act = a.precision === 'f16' ? 2 : 4;
  const bytesPerPage = pageBytes(kinds, a.pageSize, act);
  const perContext = Math.ceil(a.contextLength / a.pageSize);
  const bindingPages = pagesPerBinding(kinds, a.pageSize, act, Math.min(a.limits.maxStorageBufferBindingSize, a.limits.maxBufferSize));
  let pages: number;
  if (a.tokens !== undefined) pages = Math.ceil(a.tokens / a.pageSize);
  else {
    const budget = Math.min(2 * 2 ** 30, Math.max(64 * 2 ** 20, a.weightBytes));
    pages = Math.min(a.maxSeqs * perContext, Math.floor(budget / Math.max(1, bytesPerPage)));
  }
  pages = Math.max(pages, perContext);
  if (pages > bindingPages) {
    if (bindingPages < perContext) throw new RangeError(`one context of ${a.contextLength} tokens needs ${perContext} KV pages per layer buffer; this GPU's binding limit holds ${bindingPages}: lower contextLength`);
    pages = bindingPages;
  }
  return pages;
}

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

/**
 * The routed experts' readback, int32 [maxSeqs, layers, k], filled with -1 at creation: the steps
 * copy only the mixture-of-experts layers' ids in, so a dense layer (MoeConfig.denseLayers) reads
 * back as k times -1, no expert.
 */
function routedReadback(device: GPUDevice, words: number, label: string): GPUBuffer {
  const buffer = device.createBuffer({ size: Math.max(4, words * 4), usage: READBACK, label, mappedAtCreation: true });
  new Int32Array(buffer.getMappedRange()).fill(-1);
  buffer.unmap();
  return buffer;
}
