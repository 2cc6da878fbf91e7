/**
 * A BERT sentence encoder as an API backend: /v1/embeddings calls `embed`, which batches the
 * inputs of every request waiting at that moment into the encoder's steps (GpuBertEncoder: up to
 * `maxBatch` inputs a step), so concurrent requests share steps as the decoder engine's sequences
 * do. An encoder generates nothing: the API refuses the generating routes on an embedding model
 * before they reach `generate`.
 */
import type { GPUContext } from '../gpu/device';
import { engineOpContext } from '../kernels/op';
import { openEncoder, type OpenedEncoder } from '../model/encoder-open';
import type { ModelLocation } from '../model/open';
import { tokenizerOf } from '../text/from-model';
import type { TextTokenizer } from '../text/tokenizer';
import { BackendDisposedError } from './errors';
import { GpuBertEncoder } from './forward/bert';
import type { Backend, BackendConfig, GeneratedToken, GenerationResult } from './types';

export interface EncoderBackendOptions {
  gpu: GPUContext;
  /** The stream is f32 either way; 'f16' keeps q/k/v and the FFN rows in f16. Default f32. */
  precision?: 'f32' | 'f16';
  /** Inputs per step (default 8). */
  maxBatch?: number;
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
  private readonly queue: Pending[] = [];
  private running = false;
  private disposed = false;

  private constructor(
    readonly model: OpenedEncoder,
    private readonly encoder: GpuBertEncoder,
    id: string,
  ) {
    this.id = id;
    this.config = { vocabSize: model.config.vocabSize, hiddenSize: model.config.hiddenSize, embedding: model.embedding };
    this.tokenizer = tokenizerOf(model.tokenizer);
    this.contextLength = encoder.maxTokens / encoder.maxSeqs;
  }

  static async load(model: ModelLocation | OpenedEncoder, opts: EncoderBackendOptions): Promise<EncoderBackend> {
    const opened = isOpened(model) ? model : await openEncoder(model);
    const limit = Math.min(opened.embedding.maxSeqLength ?? Infinity, opened.config.maxPositionEmbeddings);
    const maxSeqs = Math.max(1, Math.floor(opts.maxBatch ?? 8));
    const encoder = await GpuBertEncoder.create(engineOpContext(opts.gpu, opts.precision ?? 'f32'), opened, limit * maxSeqs, maxSeqs);
    return new EncoderBackend(opened, encoder, opts.id ?? 'bert');
  }

  /** Each input's embedding; inputs of requests waiting together run in the same steps. */
  embed(inputs: readonly (readonly number[])[], signal?: AbortSignal): Promise<Float32Array[]> {
    if (this.disposed) return Promise.reject(new BackendDisposedError(this.id));
    signal?.throwIfAborted();
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
        try {
          const vectors = await this.encoder.embed(batch.map((p) => p.ids));
          batch.forEach((p, i) => p.resolve(vectors[i]!));
        } catch (e) {
          batch.forEach((p) => p.reject(e));
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

function isOpened(m: ModelLocation | OpenedEncoder): m is OpenedEncoder {
  return typeof m === 'object' && (m as OpenedEncoder).kind === 'bert' && (m as OpenedEncoder).tensors instanceof Map;
}
