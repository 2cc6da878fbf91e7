/**
 * A real `Backend` on the CPU: the reference forward pass, the model's tokenizer and chat
 * template, CPU sampling (src/engine/logit-processors.ts) and reuse of the KV cache for a prompt
 * prefix shared with the previous request. The API layer is built and tested against it until the
 * WebGPU engine lands, and it stays the oracle the engine's API answers are compared with.
 *
 * One sequence at a time: the reference model has one KV cache, so requests queue. The request's
 * lifecycle (enders, min_tokens, sampler, grammar, abort) is the engine's own `Sequence`
 * (src/engine/sequence.ts): this backend only runs its steps.
 */
import { checkPromptIds, RequestQueue, reusablePrefix } from '../engine/backend-util';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult, TokenLogprob, VisionInputs } from '../engine/types';
import { logprobsOf } from '../engine/logit-processors';
import { BreakerTable, runSequence, Sequence, type SequenceEnv, type StepRunner } from '../engine/sequence';
import { BackendDisposedError, BackendError } from '../engine/errors';
import { noMtpHead } from '../engine/mtp-proposer';
import { applyMaskRef } from '../kernels/mask-ref';
import type { GenerationDefaults } from '../model/generation-config';
import { hasRecurrentLayers, type ModelConfig } from '../model/config';
import type { OpenedModel } from '../model/open';
import { chatTemplateOf, loadTextModel } from '../text/from-model';
import type { ChatTemplateConfig, TextTokenizer } from '../text/index';
import type { ImageProcessorSettings } from '../vision/settings';
import { tokensPerTile } from '../vision/tower';
import { ReferenceModel } from './forward';
import { ReferenceVisionTower } from './vision';

export interface ReferenceBackendOptions {
  /** The model id the API answers to (default: the config's arch, e.g. `qwen3`). */
  id?: string;
  /** Tokens per sequence (default: the model's max_position_embeddings). */
  contextLength?: number;
  /** The model's generation_config.json, for sampling defaults. */
  generationConfig?: GenerationDefaults;
  /** A vision tower (SmolVLM's mmproj) and its processor: the backend then takes prompt images. */
  vision?: { processor: ImageProcessorSettings; tower: ReferenceVisionTower };
}

/** `GenerateRequest` plus the API's `cache_prompt` (false: recompute the whole prompt). */
export type ReferenceGenerateRequest = GenerateRequest & { cachePrompt?: boolean };

export class ReferenceBackend implements Backend, StepRunner {
  readonly id: string;
  readonly config: ModelConfig;
  readonly tokenizer: TextTokenizer;
  readonly chatTemplate: ChatTemplateConfig;
  readonly contextLength: number;
  readonly generationConfig: GenerationDefaults;
  readonly vision?: VisionInputs;
  private readonly tower?: ReferenceVisionTower;
  /** Each running sequence's image-token embeddings by prompt position. */
  private readonly imageRows = new WeakMap<Sequence, Map<number, Float32Array>>();
  /** The ids whose K/V the model holds, in order (a prefix the next prompt may reuse). */
  private cached: number[] = [];
  private readonly queue = new RequestQueue();
  private readonly env: SequenceEnv;
  private disposed = false;

  private constructor(
    private readonly model: ReferenceModel,
    opened: OpenedModel,
    tokenizer: TextTokenizer,
    opts: ReferenceBackendOptions,
  ) {
    this.config = opened.config;
    this.id = opts.id ?? opened.config.arch;
    this.tokenizer = tokenizer;
    this.chatTemplate = chatTemplateOf(opened, tokenizer);
    this.contextLength = Math.min(opts.contextLength ?? opened.config.maxPositionEmbeddings, opened.config.maxPositionEmbeddings);
    this.generationConfig = opts.generationConfig ?? (opened.generationConfig as GenerationDefaults | undefined) ?? {};
    if (opts.vision) {
      const imageTokenId = tokenizer.tokenToId('<image>');
      if (imageTokenId === undefined) throw new Error('a vision tower needs the tokenizer to have <image>');
      this.vision = { processor: opts.vision.processor, imageTokenId };
      this.tower = opts.vision.tower;
    }
    const breakers = new BreakerTable(tokenizer);
    this.env = { eosIds: tokenizer.eosIds, contextLength: this.contextLength, breakers: (list) => breakers.of(list), moe: this.model.config.moe !== null };
  }

  static async create(opened: OpenedModel, opts: ReferenceBackendOptions = {}): Promise<ReferenceBackend> {
    const { tokenizer } = loadTextModel(opened);
    // An HF SmolVLM folder carries its tower (OpenedModel.vision): loaded unless one is given.
    const carried = opened.vision && { processor: opened.vision.processor, tower: await ReferenceVisionTower.load(opened.vision) };
    const vision = opts.vision ?? carried;
    return new ReferenceBackend(await ReferenceModel.load(opened), opened, tokenizer, { ...opts, ...(vision ? { vision } : {}) });
  }

  /**
   * Keeps the longest cached prefix of `ids` (leaving at least its last id to compute); returns its
   * length. A hybrid model's recurrent state cannot rewind to a shorter prefix: it starts over.
   */
  private reuse(ids: readonly number[], allowed: boolean, limit = Infinity): number {
    const common = allowed && !hasRecurrentLayers(this.config) ? Math.min(reusablePrefix(this.cached, ids), limit) : 0;
    this.cached.length = common;
    return common;
  }

  async *generate(request: ReferenceGenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    if (this.disposed) throw new BackendDisposedError('ReferenceBackend');
    checkPromptIds(request.promptIds, this.config.vocabSize);
    // The CPU reference does not speculate, but refuses what the GPU engine refuses.
    if (request.speculation?.mtp && !this.config.mtpLayers) throw noMtpHead(this.config.arch);
    const seq = new Sequence(request, this.env);
    const images = this.imageEmbeddings(request);
    if (images.size) this.imageRows.set(seq, images);
    // Aborted while waiting for its turn: it ends without waiting for the request ahead.
    const release = await this.queue.acquire(request.signal);
    if (!release) return (seq.end('abort'), seq.finish!);
    try {
      // A cached prefix is reused up to the first image token: the same ids may stand for another image.
      if (!seq.aborted) seq.reuse(this.reuse(request.promptIds, request.cachePrompt ?? true, images.size ? Math.min(...images.keys()) : Infinity));
      return yield* runSequence(seq, this);
    } finally {
      release();
    }
  }

  /**
   * One step (StepRunner): feeds the sequence's whole remaining prompt, or its last token, one
   * position at a time, then masks the logits with its grammar and samples on the CPU.
   */
  async step(batch: readonly Sequence[]): Promise<void> {
    for (const seq of batch) {
      // Proposals (speculation) are bounded by their proposer; one position at a time, they verify as the GPU's rows do.
      const work = seq.work(Infinity, Infinity);
      const images = this.imageRows.get(seq);
      let logits: Float32Array = new Float32Array(0);
      for (const id of work.tokens) logits = this.feed(id, images);
      seq.advance(work);
      if (!work.samples) continue;
      if (work.proposed) {
        await this.verify(seq, work.proposed, logits);
        await seq.jumpForward();
        continue;
      }
      if (seq.constraint) {
        // Forbidden tokens get -inf before anything else sees the logits (logprobs included).
        logits = applyMaskRef(logits.slice(), await seq.nextMask(), this.config.vocabSize);
      }
      seq.sampleLogits(logits, seq.wantsHidden ? this.model.hidden : undefined, seq.wantsRouted ? this.model.routedExperts : undefined);
      await seq.jumpForward();
    }
  }

  /**
   * The tower's embeddings of the request's images by prompt position: each image's tiles in
   * order fill the next image-token positions, tokensPerTile each. The counts must agree.
   */
  private imageEmbeddings(request: GenerateRequest): Map<number, Float32Array> {
    const out = new Map<number, Float32Array>();
    const images = request.images ?? [];
    if (images.length === 0) return out;
    if (!this.tower || !this.vision) throw new BackendError('invalid_prompt', 400, `the model ${this.id} takes no images`);
    const positions: number[] = [];
    request.promptIds.forEach((id, pos) => id === this.vision!.imageTokenId && positions.push(pos));
    const per = tokensPerTile(this.tower.config);
    const tiles = images.flatMap((im) => im.tiles);
    if (positions.length !== tiles.length * per)
      throw new BackendError('invalid_prompt', 400, `the prompt has ${positions.length} image tokens for ${images.length} images of ${tiles.length} tiles (${tiles.length * per} tokens)`);
    const dim = this.tower.config.projectionDim;
    tiles.forEach((tile, t) => {
      const rows = this.tower!.embedTile(tile as Float32Array);
      for (let i = 0; i < per; i++) out.set(positions[t * per + i]!, rows.subarray(i * dim, (i + 1) * dim));
    });
    return out;
  }

  /** One id through the model at the next position of the cache: its logits. */
  private feed(id: number, images?: Map<number, Float32Array>): Float32Array {
    const logits = this.model.forward(id, this.cached.length, images?.get(this.cached.length));
    this.cached.push(id);
    return logits;
  }

  /**
   * A verify step (Sequence.verify), one proposal at a time: a draw from the logits so far, and
   * while it equals the next proposal, that proposal is fed for the next draw. The cache then
   * holds what the sequence says it does (the GPU engine rolls back the rows it fed past a miss).
   */
  private async verify(seq: Sequence, proposed: readonly number[], logits: Float32Array): Promise<void> {
    // Under a grammar each position's logits are masked as the GPU masks its rows.
    const masks = seq.constraint ? await seq.rowMasks(proposed) : null;
    const masked = (l: Float32Array, i: number) => (masks ? applyMaskRef(l.slice(), masks[i]!, this.config.vocabSize) : l);
    const draws = [seq.draw(masked(logits, 0))];
    for (let i = 0; i < proposed.length && draws[i]!.id === proposed[i]; i++) draws.push(seq.draw(masked(this.feed(proposed[i]!), i + 1)));
    seq.verify(draws, proposed);
    this.cached.length = Math.min(this.cached.length, seq.kvLength);
  }

  async scorePrompt(ids: number[], topLogprobs: number): Promise<Array<{ logprob: number | null; top: TokenLogprob[] }>> {
    checkPromptIds(ids, this.config.vocabSize);
    const release = await this.queue.acquire();
    try {
      // Scoring needs the logits after every position, so recompute from the start.
      this.cached.length = 0;
      const out: Array<{ logprob: number | null; top: TokenLogprob[] }> = [{ logprob: null, top: [] }];
      for (let pos = 0; pos < ids.length; pos++) {
        const logits = this.model.forward(ids[pos], pos);
        this.cached.push(ids[pos]);
        if (pos + 1 < ids.length) out.push(logprobsOf(logits, ids[pos + 1], topLogprobs));
      }
      return out;
    } finally {
      release();
    }
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.cached = [];
  }
}
