/**
 * The WebGPU engine: a loaded model that generates tokens. One command buffer per step (two under
 * a grammar: the forward pass runs while the CPU computes the token mask); the only readback is
 * the sampled token ids (and logprobs when asked). Requests run one at a time; the KV of the
 * previous request's tokens stays cached so a prompt sharing its prefix skips that prefill.
 */
import { acquireGPU, type GPUContext } from '../gpu/device';
import { createBuffer, READBACK, STORAGE } from '../gpu/buffers';
import { pipelineCache } from '../gpu/run-kernel';
import type { Precision } from '../gpu/pipelines';
import { createSampleOp, LOGPROB_WORDS, packSamplingParams, SAMPLE_PARAM_WORDS, unpackSampled, type SeqSampling } from '../kernels/sample';
import type { Op } from '../kernels/op';
import { createPenaltiesOp, needsPenalties, type PenaltiesOp } from '../kernels/penalties';
import { createApplyMaskOp, type ApplyMaskOp } from '../kernels/apply-mask';
import type { GenerationDefaults } from '../api/sampling';
import type { ModelConfig } from '../model/config';
import { openModel, type ModelLocation, type OpenedModel } from '../model/open';
import { loadTextModel } from '../text/from-model';
import type { ChatTemplateConfig, TextTokenizer } from '../text/index';
import { ProgressEmitter, type ProgressCallback } from '../loader/progress';
import { logprobsOf, TokenSampler } from './logit-processors';
import { GpuForward } from './forward';
import { uploadWeights, type GpuWeights, type UploadProgress } from './gpu-weights';
import { checkPromptIds, RequestQueue, resultFor, reusablePrefix } from './backend-util';
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

export class GpuEngine implements Backend {
  readonly id: string;
  readonly config: ModelConfig;
  readonly tokenizer: TextTokenizer;
  readonly chatTemplate: ChatTemplateConfig;
  readonly contextLength: number;
  readonly precision: Precision;
  readonly generationConfig?: GenerationDefaults;

  private readonly kv: KvPages;
  private readonly step: StepBuffers;
  private readonly samplingParams: ArrayBuffer;
  private readonly readback: GPUBuffer; // MAP_READ: token id, then logprob words
  private readonly logitsReadback: GPUBuffer; // MAP_READ f32 [vocab] for the CPU sampling path
  /** Token ids whose K/V sequence 0 holds, in order. */
  private cached: number[] = [];
  private readonly queue = new RequestQueue();
  private disposed = false;
  private cpuSteps = 0;
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
    this.step = opts.step;
    this.kv = new KvPages(forward.limits.numPages, opts.pageSize);
    this.samplingParams = new ArrayBuffer(SAMPLE_PARAM_WORDS * 4);
    this.readback = createBuffer(device, (1 + LOGPROB_WORDS) * 4, READBACK, 'readback');
    this.logitsReadback = createBuffer(device, this.config.vocabSize * 4, READBACK, 'logits readback');
  }

  /** Opens (if needed), uploads and prepares a model: every buffer and pipeline is made here. */
  static async load(model: ModelLocation | OpenedModel, opts: EngineOptions = {}): Promise<GpuEngine> {
    const opened = isOpened(model) ? model : await openModel(model);
    const gpu = await toContext(opts.gpu);
    const precision: Precision = opts.precision === 'f32' || opts.precision === 'f16' ? opts.precision : gpu.info.f16 ? 'f16' : 'f32';
    if (precision === 'f16' && !gpu.info.f16) throw new Error('precision f16 needs the shader-f16 feature, which this GPU does not offer');
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

  async *generate(request: GenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    if (this.disposed) throw new Error('GpuEngine: generate() after dispose()');
    const { promptIds, sampling, signal } = request;
    checkPromptIds(promptIds, this.config.vocabSize);
    if (promptIds.length >= this.contextLength) {
      throw new RangeError(`the prompt has ${promptIds.length} tokens; this engine's context holds ${this.contextLength}`);
    }
    const release = await this.queue.acquire();
    const promptTokens = promptIds.length;
    const result = resultFor(promptTokens);
    try {
      if (signal?.aborted) return result('abort', 0, 0);
      // Reuse the cached prefix (always recomputing at least the last prompt token for its logits).
      const common = request.cachePrompt ?? true ? reusablePrefix(this.cached, promptIds) : 0;
      this.kv.truncate(0, common);
      this.cached.length = common;

      const seed = sampling.seed ?? Math.floor(Math.random() * 2 ** 32);
      const eos = request.ignoreEos ? [] : this.tokenizer.eosIds;
      const enders = new Set([...eos, ...request.stopTokenIds]);
      const cpu = new TokenSampler({ ...sampling, seed }, { promptIds });
      const maxTokens = Math.max(0, Math.min(request.maxTokens, this.contextLength - promptTokens));
      // The penalties op's state is written once here; its counts then follow the sampled tokens
      // on the GPU. The ban can only end during a request, so if any step uses the op, step 0 does.
      // Under a grammar the grammar decides where the output may end, so min_tokens bans nothing.
      const { constraint } = request;
      const mask: StepMask | null = constraint ? { constraint, bits: new Uint32Array(constraint.words) } : null;
      const banEnds = !constraint;
      const banned0 = request.minTokens > 0 && banEnds ? [...enders] : [];
      const penalized0 = needsPenalties(sampling, banned0.length > 0);
      if (penalized0 && !needsCpuSampling(sampling, penalized0)) this.sampler.penalties.reset(0, sampling, promptIds, banned0);

      // prefill: all but the last chunk only fill the KV cache
      const chunk = this.forward.limits.maxTokens;
      let pending = promptIds.slice(common);
      while (pending.length > chunk) {
        await this.runStep({ seq: 0, tokens: pending.slice(0, chunk) }, null);
        this.cached.push(...pending.slice(0, chunk));
        pending = pending.slice(chunk);
        if (signal?.aborted) return result('abort', 0, common);
      }
      let feed: number[] = pending;
      for (let n = 0; n < maxTokens; n++) {
        const banned = n < request.minTokens && banEnds ? [...enders] : [];
        const penalized = needsPenalties(sampling, banned.length > 0);
        const slow = needsCpuSampling(sampling, penalized);
        const gpuPenalties = penalized && !slow;
        // min_tokens reached: the bias row goes back to logit_bias alone (one write per request).
        if (gpuPenalties && n > 0 && n === request.minTokens) this.sampler.penalties.setBias(0, sampling, []);
        const seq: SeqSampling = {
          temperature: sampling.temperature,
          topK: sampling.topK,
          topP: sampling.topP,
          minP: sampling.minP,
          seed,
          step: n,
          logprobs: sampling.logprobs,
          topLogprobs: sampling.logprobs ? sampling.topLogprobs : 0,
        };
        const sampled = await this.runStep({ seq: 0, tokens: feed }, slow ? 'logits' : seq, gpuPenalties, mask);
        this.cached.push(...feed);
        let token: GeneratedToken;
        if (sampled instanceof Float32Array) {
          this.cpuSteps++;
          const id = cpu.sample(sampled, banned);
          token = { id, ...(sampling.logprobs ? logprobsOf(sampled, id, sampling.topLogprobs) : {}) };
        } else {
          const s = sampled!;
          token = { id: s.token, ...(s.logprob !== undefined ? { logprob: s.logprob, top: s.top ?? [] } : {}) };
        }
        if (constraint && !constraint.accept(token.id)) throw new Error(`structured output: the grammar refused token ${token.id}, which its mask allowed`);
        yield token;
        if (enders.has(token.id)) return result('stop', n + 1, common, token.id);
        if (constraint?.isTerminated()) return result('stop', n + 1, common);
        if (signal?.aborted && n + 1 < maxTokens) return result('abort', n + 1, common);
        feed = [token.id];
      }
      return result('length', maxTokens, common);
    } finally {
      release();
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
    const { tokens, seqs } = this.step.write([work], this.kv);
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
      this.kv.truncate(0, 0);
      this.cached = [];
      const out: Float32Array[] = [];
      for (const id of ids) {
        out.push((await this.runStep({ seq: 0, tokens: [id] }, 'logits')) as Float32Array);
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
      this.step.destroy();
      const { params, tokens, logprobs, penalties, mask } = this.sampler;
      penalties.destroy();
      mask.destroy();
      for (const b of [params, tokens, logprobs, this.readback, this.logitsReadback]) b.destroy();
    } finally {
      release();
    }
  }
}

/**
 * Resolves after the current task, once pending microtasks have run: `setImmediate` in Node, a
 * MessageChannel message elsewhere (unlike `setTimeout`, never clamped to 4 ms). One channel for
 * all callers, made on first use.
 */
function nextTask(): Promise<void> {
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  if (!taskChannel) {
    const channel = new MessageChannel();
    const waiting: Array<() => void> = [];
    channel.port1.onmessage = () => waiting.shift()?.();
    taskChannel = { post: (resolve) => (waiting.push(resolve), channel.port2.postMessage(null)) };
  }
  const { post } = taskChannel;
  return new Promise((resolve) => post(resolve));
}
let taskChannel: { post(resolve: () => void): void } | null = null;

function isOpened(m: ModelLocation | OpenedModel): m is OpenedModel {
  return typeof m === 'object' && m !== null && 'tensors' in m && 'config' in m;
}

async function toContext(gpu: GPUContext | GPU | undefined): Promise<GPUContext> {
  if (gpu && 'device' in gpu) return gpu;
  return acquireGPU({ gpu: gpu as GPU | undefined });
}
