/**
 * A sentence encoder (BERT: ./forward/bert.ts; EmbeddingGemma, a bidirectional decoder-family
 * model: ./forward/gemma-encoder.ts) as an API backend: /v1/embeddings calls `embed`, which batches the
 * inputs of every request waiting at that moment into the encoder's steps (GpuBertEncoder: up to
 * `maxBatch` inputs a step), so concurrent requests share steps as the decoder engine's sequences
 * do. An encoder generates nothing: the API refuses the generating routes on an embedding model
 * before they reach `generate`.
 *
 * It also has the face the host (src/transport/host.ts) reads of GpuEngine (gpu, precision, limits,
 * kvStats, memoryUse, failure, recoveries, the LoRA calls), so createEngine, `serve`, the Worker,
 * the service worker and the fetch shim serve either through one host.
 */
import type { GPUContext } from '../gpu/device';
import { engineOpContext } from '../kernels/op';
import { embeddingSize } from '../model/embedding';
import { openEncoder, type OpenedEncoder } from '../model/encoder-open';
import type { EmbeddingConfig } from '../model/embedding';
import type { ModelLocation, OpenedModel } from '../model/open';
import { tokenizerOf } from '../text/from-model';
import type { TextTokenizer } from '../text/tokenizer';
import type { MemoryUse } from '../gpu/memory';
import type { EngineStats } from './engine';
import { BackendDisposedError, LoraUnsupportedError } from './errors';
import { GpuBertEncoder } from './forward/bert';
import { GpuGemmaEncoder } from './forward/gemma-encoder';
import type { Backend, BackendConfig, GeneratedToken, GenerationResult, LoraInfo } from './types';

export interface EncoderBackendOptions {
  gpu: GPUContext;
  /** The stream is f32 either way; 'f16' keeps q/k/v and the FFN rows in f16; 'auto': f16 where the GPU has it. Default f32. */
  precision?: 'f32' | 'f16' | 'auto';
  /** Inputs per step (default 8). */
  maxBatch?: number;
  /** Tokens an input may have, below the model's own limit. */
  contextLength?: number;
  /** The model id the API answers to (default `bert`). */
  id?: string;
}

interface Pending {
  ids: readonly number[];
  resolve(v: Float32Array): void;
  reject(e: unknown): void;
}

export class EncoderBackend implements Backend {
  readonly id: string;
  readonly config: BackendConfig;
  readonly tokenizer: TextTokenizer;
  readonly chatTemplate = null;
  /** Tokens an input may have: `max_seq_length`, within the learned positions. */
  readonly contextLength: number;
  /** Inputs per step; an encoder keeps no KV cache (no pages). */
  readonly limits: { maxSeqs: number; numPages: number; pageSize: number };
  /** An encoder does not rebuild on a lost device: its requests fail with the loss. */
  readonly recoveries = 0;
  readonly failure = null;
  private readonly queue: Pending[] = [];
  private running = false;
  private disposed = false;
  private readonly counts = { running: 0, requests: 0, promptTokens: 0 };

  private constructor(
    readonly model: OpenedEncoder | OpenedModel,
    private readonly encoder: GpuBertEncoder | GpuGemmaEncoder,
    id: string,
    readonly gpu: GPUContext,
    readonly precision: 'f32' | 'f16',
  ) {
    this.id = id;
    // hiddenSize is the vector's size the API serves: after the Dense modules, where there are some.
    const embedding = embeddingOf(model);
    this.config = { vocabSize: model.config.vocabSize, hiddenSize: embeddingSize(embedding, model.config.hiddenSize), embedding };
    this.tokenizer = tokenizerOf(model.tokenizer);
    this.contextLength = encoder.maxTokens / encoder.maxSeqs;
    this.limits = { maxSeqs: encoder.maxSeqs, numPages: 0, pageSize: 0 };
  }

  /** A location opens as BERT; a bidirectional OpenedModel (EmbeddingGemma) comes opened (transport/host.ts routes it). */
  static async load(model: ModelLocation | OpenedEncoder | OpenedModel, opts: EncoderBackendOptions): Promise<EncoderBackend> {
    const opened = isOpened(model) ? model : await openEncoder(model);
    const limit = Math.min(embeddingOf(opened).maxSeqLength ?? Infinity, opened.config.maxPositionEmbeddings, opts.contextLength ?? Infinity);
    const maxSeqs = Math.max(1, Math.floor(opts.maxBatch ?? 8));
    const precision = opts.precision === 'auto' ? (opts.gpu.info.f16 ? 'f16' : 'f32') : (opts.precision ?? 'f32');
    const ctx = engineOpContext(opts.gpu, precision);
    const encoder = 'kind' in opened ? await GpuBertEncoder.create(ctx, opened, limit * maxSeqs, maxSeqs) : await GpuGemmaEncoder.create(ctx, opened, limit * maxSeqs, maxSeqs);
    return new EncoderBackend(opened, encoder, opts.id ?? 'bert', opts.gpu, precision);
  }

  /** As GpuEngine's: a step is one encoder call, a request one embed() call; no pages, nothing generated. */
  get kvStats(): EngineStats {
    const { running, requests, promptTokens } = this.counts;
    return {
      pageSize: 0,
      pages: { total: 0, used: 0, cached: 0, free: 0 },
      running,
      waiting: this.queue.length,
      steps: this.encoder.steps,
      preemptions: 0,
      requests,
      promptTokens,
      cachedPromptTokens: 0,
      generationTokens: 0,
      speculative: { proposed: 0, accepted: 0 },
      recovering: false,
      recoveries: 0,
    };
  }

  /** GPU memory held: the weights as uploaded, and the step's buffers as `other`. */
  get memoryUse(): MemoryUse {
    const weights = [...this.model.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0);
    return { weights, kvCache: 0, other: Math.max(0, this.encoder.bytes - weights) };
  }

  loadLora(): Promise<LoraInfo> {
    return Promise.reject(new LoraUnsupportedError(this.id));
  }

  unloadLora(): Promise<void> {
    return Promise.reject(new LoraUnsupportedError(this.id));
  }

  loras(): LoraInfo[] {
    return [];
  }

  /** Each input's embedding; inputs of requests waiting together run in the same steps. */
  embed(inputs: readonly (readonly number[])[], signal?: AbortSignal): Promise<Float32Array[]> {
    if (this.disposed) return Promise.reject(new BackendDisposedError(this.id));
    signal?.throwIfAborted();
    this.counts.requests++;
    this.counts.promptTokens += inputs.reduce((n, ids) => n + ids.length, 0);
    const all = inputs.map((ids) => new Promise<Float32Array>((resolve, reject) => this.queue.push({ ids, resolve, reject })));
    void this.pump();
    return Promise.all(all);
  }

  /** Runs everything queued, then what queued meanwhile, one encoder call at a time. */
  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, this.queue.length);
        this.counts.running = batch.length;
        try {
          const vectors = await this.encoder.embed(batch.map((p) => p.ids));
          batch.forEach((p, i) => p.resolve(vectors[i]!));
        } catch (e) {
          batch.forEach((p) => p.reject(e));
        } finally {
          this.counts.running = 0;
        }
      }
    } finally {
      this.running = false;
    }
  }

  // eslint-disable-next-line require-yield
  async *generate(): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    throw new RangeError(`the model \`${this.id}\` is an encoder: it serves /v1/embeddings only`);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.encoder.destroy();
  }
}

function isOpened(m: ModelLocation | OpenedEncoder | OpenedModel): m is OpenedEncoder | OpenedModel {
  return typeof m === 'object' && (m as OpenedEncoder).tensors instanceof Map;
}

/** The pooling chain: BERT's own, or a bidirectional model's config (mean when it names none). */
function embeddingOf(m: OpenedEncoder | OpenedModel): EmbeddingConfig {
  return 'kind' in m ? m.embedding : (m.config.embedding ?? { pooling: 'mean', maxSeqLength: null });
}
