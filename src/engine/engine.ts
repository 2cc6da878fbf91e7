/**
 * The WebGPU engine: a loaded model that generates tokens. One command buffer per step (two under
 * a grammar: the forward pass runs while the CPU computes the token mask); the only readback is
 * the sampled token ids (and logprobs when asked). Requests run one at a time; the KV of the
 * previous request's tokens stays cached so a prompt sharing its prefix skips that prefill.
 * A request's lifecycle (what to feed, enders, min_tokens, CPU sampler, grammar, abort) is the
 * shared `Sequence` (./sequence.ts, as the reference backend's); the engine runs its steps.
 */
import { acquireGPU, type GPUContext } from '../gpu/device';
import { createBuffer, READBACK, STORAGE } from '../gpu/buffers';
import { pipelineCache, type Precision } from '../gpu/pipelines';
import { createSampleOp, LOGPROB_WORDS, packSamplingParams, SAMPLE_PARAM_WORDS, unpackSampled, type SeqSampling } from '../kernels/sample';
import type { Op } from '../kernels/op';
import { createPenaltiesOp, needsPenalties, type PenaltiesOp } from '../kernels/penalties';
import { createApplyMaskOp, type ApplyMaskOp } from '../kernels/apply-mask';
import type { GenerationDefaults } from '../model/generation-config';
import type { ModelConfig } from '../model/config';
import { openModel, type ModelLocation, type OpenedModel } from '../model/open';
import { loadTextModel } from '../text/from-model';
import type { ChatTemplateConfig, TextTokenizer } from '../text/index';
import { ProgressEmitter, type ProgressCallback } from '../loader/progress';
import { logprobsOf } from './logit-processors';
import { GpuForward } from './forward';
import { uploadWeights, type GpuWeights, type UploadProgress } from './gpu-weights';
import { checkPromptIds, nextTask, RequestQueue, reusablePrefix } from './backend-util';
import { BackendDisposedError, ContextLengthError, PrecisionUnsupportedError } from './errors';
import { BreakerTable, runSequence, Sequence, type SequenceEnv, type StepRunner } from './sequence';
import { KvPages } from './kv-pages';
import { StepBuffers, type SeqWork } from './step';
import type { Constraint } from '../structured/grammar';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult, SamplingParams, TokenLogprob } from './types';

export interface EngineOptions {
  /** A GPU to use; by default `navigator.gpu` (pages, workers) is acquired. Node passes `nodeGPU()`'s. */
  gpu?: GPUContext | GPU;
  /** `auto` (default): f16 activations where `shader-f16` is granted, else f32. */
  precision?: Precision | 'auto';
  /** Tokens per sequence (prompt + completion); default min(model's max positions, 4096). */
  contextLength?: number;
  /** Prompt tokens per prefill step (default 128). */
  prefillChunk?: number;
  /** KV page size in tokens (default 16). */
  pageSize?: number;
  /** Model id in the API (default: the arch). */
  id?: string;
  onUpload?: UploadProgress;
  /** Typed progress of the `upload` and `compile` phases (the loader reports `download`/`cache`). */
  onProgress?: ProgressCallback | ProgressEmitter;
}

/**
 * Bench hook (src/bench/profiler.ts): stands in for a step's compute pass, e.g. to give each
 * dispatch its own timed pass. Set `GpuEngine.profiler` only while profiling. A step under a
 * grammar records into two command buffers: `begin` is called once per buffer (`resume` on the
 * second), `end` once, in the last buffer.
 */
export interface StepProfiler {
  /** The pass the step records into (called instead of `encoder.beginComputePass()`); `resume`: the same step, in a later command buffer. */
  begin(encoder: GPUCommandEncoder, resume?: boolean): GPUComputePassEncoder;
  /** After the step's last pass ended, before `encoder.finish()`: e.g. resolve the step's queries. */
  end(encoder: GPUCommandEncoder): void;
}

/** A grammar's mask for `runStep`: the matcher and the request's bitmask words (allocated once per request). */
interface StepMask {
  constraint: Constraint;
  bits: Uint32Array;
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

/** The KV slot of the one sequence a step runs (until the scheduler runs many). */
const SLOT = 0;

export class GpuEngine implements Backend, StepRunner {
  readonly id: string;
  readonly config: ModelConfig;
  readonly tokenizer: TextTokenizer;
  readonly chatTemplate: ChatTemplateConfig;
  readonly contextLength: number;
  readonly precision: Precision;
  readonly generationConfig?: GenerationDefaults;

  private readonly kv: KvPages;
  private readonly stepBuffers: StepBuffers;
  private readonly samplingParams: ArrayBuffer;
  private readonly readback: GPUBuffer; // MAP_READ: token id, then logprob words
  private readonly logitsReadback: GPUBuffer; // MAP_READ f32 [vocab] for the CPU sampling path
  /** Token ids whose K/V sequence 0 holds, in order. */
  private cached: number[] = [];
  private readonly queue = new RequestQueue();
  private disposed = false;
  private cpuSteps = 0;
  private prefillSteps = 0;
  /** The previous prefill chunk's completion, while one is queued on the GPU. */
  private prefillInFlight: Promise<undefined> | null = null;
  private readonly env: SequenceEnv;
  /** Bench hook: while set, steps record through it (more passes; same results). */
  profiler: StepProfiler | null = null;

  private constructor(
    readonly gpu: GPUContext,
    private readonly weights: GpuWeights,
    private readonly forward: GpuForward,
    private readonly sampler: { op: Op; params: GPUBuffer; tokens: GPUBuffer; logprobs: GPUBuffer; penalties: PenaltiesOp; mask: ApplyMaskOp },
    text: { tokenizer: TextTokenizer; chatTemplate: ChatTemplateConfig },
    opened: OpenedModel,
    opts: { id?: string; contextLength: number; precision: Precision; pageSize: number; step: StepBuffers },
  ) {
    const { device } = gpu;
    this.id = opts.id ?? opened.config.arch;
    this.config = opened.config;
    this.tokenizer = text.tokenizer;
    this.chatTemplate = text.chatTemplate;
    this.contextLength = opts.contextLength;
    this.generationConfig = opened.generationConfig as GenerationDefaults | undefined;
    this.precision = opts.precision;
    this.stepBuffers = opts.step;
    this.kv = new KvPages(forward.limits.numPages, opts.pageSize);
    this.samplingParams = new ArrayBuffer(SAMPLE_PARAM_WORDS * 4);
    this.readback = createBuffer(device, (1 + LOGPROB_WORDS) * 4, READBACK, 'readback');
    this.logitsReadback = createBuffer(device, this.config.vocabSize * 4, READBACK, 'logits readback');
    const breakers = new BreakerTable(this.tokenizer);
    this.env = { eosIds: this.tokenizer.eosIds, contextLength: this.contextLength, breakers: (list) => breakers.of(list) };
  }

  /** Opens (if needed), uploads and prepares a model: every buffer and pipeline is made here. */
  static async load(model: ModelLocation | OpenedModel, opts: EngineOptions = {}): Promise<GpuEngine> {
    const opened = isOpened(model) ? model : await openModel(model);
    const gpu = await toContext(opts.gpu);
    const precision: Precision = opts.precision === 'f32' || opts.precision === 'f16' ? opts.precision : gpu.info.f16 ? 'f16' : 'f32';
    if (precision === 'f16' && !gpu.info.f16) throw new PrecisionUnsupportedError();
    const config = opened.config;
    const contextLength = Math.min(opts.contextLength ?? 4096, config.maxPositionEmbeddings);
    const pageSize = opts.pageSize ?? 16;
    const maxPagesPerSeq = Math.ceil(contextLength / pageSize);
    const limits = { maxTokens: opts.prefillChunk ?? 128, maxSeqs: 1, numPages: maxPagesPerSeq, pageSize, maxPagesPerSeq };
    const text = loadTextModel(opened);
    const emulated = gpu.info.isFallbackAdapter || gpu.info.architecture === 'swiftshader';
    const ctx = { device: gpu.device, cache: pipelineCache(gpu.device), precision, emulated };
    const progress = opts.onProgress instanceof ProgressEmitter ? opts.onProgress : new ProgressEmitter(opts.onProgress);
    const upload = progress.phase('upload').file('weights', [...opened.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0));
    let uploaded = 0;
    const weights = await uploadWeights(gpu.device, opened, (name, done, total) => {
      upload.add(done - uploaded);
      uploaded = done;
      opts.onUpload?.(name, done, total);
    });
    upload.done();
    const step = new StepBuffers(gpu.device, limits);
    // Compile progress counts layers whose pipelines and bind groups are ready (+ embedding and head).
    const compile = progress.phase('compile').file('kernels', config.numLayers + 2);
    const forward = await GpuForward.create(ctx, config, weights, step, limits, opened.ropeFreqFactors, () => compile.add(1));
    const params = createBuffer(gpu.device, SAMPLE_PARAM_WORDS * 4, STORAGE, 'sampling params');
    const tokens = createBuffer(gpu.device, 4, STORAGE, 'sampled tokens'); // u32 [1]
    const logprobs = createBuffer(gpu.device, LOGPROB_WORDS * 4, STORAGE, 'sampled logprobs'); // u32 [LOGPROB_WORDS]
    const op = await createSampleOp(ctx, { logits: forward.state.logits, params, tokens, logprobs, vocab: config.vocabSize });
    // Bias row, counts and prompt bits for the one sequence slot; it counts the sampler's `tokens`.
    const penalties = await createPenaltiesOp(ctx, { logits: forward.state.logits, lastToken: tokens, vocab: config.vocabSize, maxSeqs: 1 });
    // Structured output's token mask, applied before the penalties and the sampler.
    const mask = await createApplyMaskOp(ctx, { logits: forward.state.logits, vocab: config.vocabSize, maxSeqs: 1 });
    compile.done();
    return new GpuEngine(gpu, weights, forward, { op, params, tokens, logprobs, penalties, mask }, text, opened, { id: opts.id, contextLength, precision, pageSize, step });
  }

  /** Bench hook: GPU bytes of the weight matrices (what a decode step reads at least) and of the KV cache. */
  get footprint(): { matrixBytes: number; kvCacheBytes: number } {
    return { matrixBytes: this.weights.matrixBytes, kvCacheBytes: this.forward.kvCacheBytes };
  }

  /** Sampled steps of `generate()` that read the logits back and sampled on the CPU (see needsCpuSampling). */
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
    const seq = new Sequence(request, this.env);
    // Aborted while waiting for its turn: it ends without waiting for the request ahead.
    const release = await this.queue.acquire(request.signal);
    if (!release) return (seq.end('abort'), seq.finish!);
    try {
      if (!seq.aborted) this.place(seq, request.cachePrompt ?? true);
      return yield* runSequence(seq, this);
    } finally {
      release();
    }
  }

  /**
   * Puts a sequence in the (one) KV slot: reuses the cached prefix it shares with the previous
   * request (always recomputing at least the last prompt token, for its logits) and writes the
   * penalties op's per-request state. That state then follows the sampled tokens on the GPU; the
   * min_tokens ban can only end during a request, so if any step uses the op, step 0 does.
   */
  private place(seq: Sequence, cachePrompt: boolean): void {
    const common = cachePrompt ? reusablePrefix(this.cached, seq.promptIds) : 0;
    this.kv.truncate(SLOT, common);
    this.cached.length = common;
    seq.reuse(common);
    const banned = seq.banned();
    const penalized = needsPenalties(seq.sampling, banned.length > 0);
    if (penalized && !needsCpuSampling(seq.sampling, penalized)) this.sampler.penalties.reset(SLOT, seq.sampling, seq.promptIds, banned);
  }

  /**
   * One step of `batch` (the StepRunner the shared lifecycle drives; one sequence per step until
   * the scheduler batches them): its next prompt chunk, or its last token. A chunk that does not
   * sample is submitted and the step returns once the chunk before it has run on the GPU, so at
   * most two chunks are queued and an abort between chunks leaves the GPU free at once. A step
   * that samples reads back the token (or the logits, for the CPU sampler) and records it.
   */
  async step(batch: readonly Sequence[]): Promise<void> {
    if (batch.length !== 1) throw new RangeError(`GpuEngine runs one sequence per step, got ${batch.length}`);
    const seq = batch[0]!;
    const work = seq.work(this.forward.limits.maxTokens);
    const kv: SeqWork = { seq: SLOT, tokens: work.tokens };
    if (!work.samples) {
      await this.runStep(kv, null);
      this.cached.push(...work.tokens);
      seq.advance(work);
      this.prefillSteps++;
      const previous = this.prefillInFlight;
      this.prefillInFlight = this.gpu.device.queue.onSubmittedWorkDone();
      await previous;
      return;
    }
    this.prefillInFlight = null; // this step's readback waits for all earlier work anyway
    const banned = seq.banned();
    const penalized = needsPenalties(seq.sampling, banned.length > 0);
    const slow = needsCpuSampling(seq.sampling, penalized);
    const gpuPenalties = penalized && !slow;
    // min_tokens reached: the bias row goes back to logit_bias alone (one write per request).
    if (gpuPenalties && seq.generated > 0 && seq.generated === seq.minTokens) this.sampler.penalties.setBias(SLOT, seq.sampling, []);
    const mask: StepMask | null = seq.constraint ? { constraint: seq.constraint, bits: seq.maskBits! } : null;
    const sampled = await this.runStep(kv, slow ? 'logits' : seq.gpuSampling(), gpuPenalties, mask);
    this.cached.push(...work.tokens);
    seq.advance(work);
    if (sampled instanceof Float32Array) {
      this.cpuSteps++;
      seq.sampleLogits(sampled);
    } else {
      const s = sampled!;
      seq.record({ id: s.token, ...(s.logprob !== undefined ? { logprob: s.logprob, top: s.top ?? [] } : {}) });
    }
  }

  /**
   * One forward step. `sample`: null = no sampling (a prefill chunk); 'logits' = read back the
   * logits (CPU sampling path); otherwise sample on the GPU and read back the token (and
   * logprobs), after the penalties op when `penalize`. Unmasked, the step is one command buffer.
   * With `mask` (a grammar) it is two: the forward pass up to the logits is submitted first, the
   * CPU computes the grammar's bitmask while the GPU runs it, and a second small buffer applies
   * the mask (before the penalties and either sampling path), samples and copies the result out.
   */
  private async runStep(work: SeqWork, sample: SeqSampling | 'logits' | null, penalize = false, mask: StepMask | null = null): Promise<ReturnType<typeof unpackSampled>[number] | Float32Array | null> {
    const { device } = this.gpu;
    const { tokens, seqs } = this.stepBuffers.write([work], this.kv);
    this.forward.prepare(device, seqs);
    if (sample && sample !== 'logits') {
      packSamplingParams([sample], this.samplingParams);
      device.queue.writeBuffer(this.sampler.params, 0, this.samplingParams);
    }
    let encoder = device.createCommandEncoder();
    let pass = this.profiler ? this.profiler.begin(encoder) : encoder.beginComputePass();
    this.forward.encode(pass, tokens, seqs);
    if (sample && mask) {
      pass.end();
      device.queue.submit([encoder.finish()]);
      // A browser may hand submitted work to its GPU process only once the microtask queue drains
      // (Blink flushes at the end of a microtask checkpoint), and xgrammar's mask is synchronous
      // wasm behind a promise: yield a task so the forward pass runs while the mask is computed.
      // Queue writes land in order between submits, so the second buffer reads this step's mask.
      await nextTask();
      await mask.constraint.mask(mask.bits);
      this.sampler.mask.write(0, mask.bits);
      encoder = device.createCommandEncoder();
      pass = this.profiler ? this.profiler.begin(encoder, true) : encoder.beginComputePass();
      this.sampler.mask.encode(pass, seqs);
    }
    if (sample && sample !== 'logits') {
      if (penalize) this.sampler.penalties.encode(pass, seqs);
      this.sampler.op.encode(pass, seqs);
    }
    pass.end();
    this.profiler?.end(encoder);
    if (sample === 'logits') {
      encoder.copyBufferToBuffer(this.forward.state.logits, 0, this.logitsReadback, 0, this.config.vocabSize * 4);
    } else if (sample) {
      encoder.copyBufferToBuffer(this.sampler.tokens, 0, this.readback, 0, 4);
      if (sample.logprobs) encoder.copyBufferToBuffer(this.sampler.logprobs, 0, this.readback, 4, LOGPROB_WORDS * 4);
    }
    device.queue.submit([encoder.finish()]);
    if (!sample) return null;
    if (sample === 'logits') {
      await this.logitsReadback.mapAsync(GPUMapMode.READ);
      const logits = new Float32Array(this.logitsReadback.getMappedRange().slice(0));
      this.logitsReadback.unmap();
      return logits;
    }
    await this.readback.mapAsync(GPUMapMode.READ);
    const words = new Uint32Array(this.readback.getMappedRange());
    const [result] = unpackSampled(words.subarray(0, 1), sample.logprobs ? words.subarray(1) : undefined, [sample]);
    this.readback.unmap();
    return result!;
  }

  /** Logits after each of `ids`, fed one token per step from an empty cache (tests, echo + logprobs). */
  async teacherForcedLogits(ids: readonly number[]): Promise<Float32Array[]> {
    checkPromptIds(ids, this.config.vocabSize);
    const release = await this.queue.acquire();
    try {
      this.kv.truncate(SLOT, 0);
      this.cached = [];
      const out: Float32Array[] = [];
      for (const id of ids) {
        out.push((await this.runStep({ seq: SLOT, tokens: [id] }, 'logits')) as Float32Array);
        this.cached.push(id);
      }
      return out;
    } finally {
      release();
    }
  }

  async scorePrompt(ids: number[], topLogprobs: number): Promise<Array<{ logprob: number | null; top: TokenLogprob[] }>> {
    const logits = await this.teacherForcedLogits(ids);
    return [{ logprob: null, top: [] }, ...ids.slice(1).map((id, i) => logprobsOf(logits[i]!, id, topLogprobs))];
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    const release = await this.queue.acquire();
    try {
      this.forward.destroy();
      this.weights.destroy();
      this.stepBuffers.destroy();
      const { op, params, tokens, logprobs, penalties, mask } = this.sampler;
      op.destroy();
      penalties.destroy();
      mask.destroy();
      for (const b of [params, tokens, logprobs, this.readback, this.logitsReadback]) b.destroy();
    } finally {
      release();
    }
  }
}

function isOpened(m: ModelLocation | OpenedModel): m is OpenedModel {
  return typeof m === 'object' && m !== null && 'tensors' in m && 'config' in m;
}

async function toContext(gpu: GPUContext | GPU | undefined): Promise<GPUContext> {
  if (gpu && 'device' in gpu) return gpu;
  return acquireGPU({ gpu: gpu as GPU | undefined });
}
