/**
 * A real `Backend` on the CPU: the reference forward pass, the model's tokenizer and chat
 * template, CPU sampling (src/engine/logit-processors.ts) and reuse of the KV cache for a prompt
 * prefix shared with the previous request. The API layer is built and tested against it until the
 * WebGPU engine lands, and it stays the oracle the engine's API answers are compared with.
 *
 * One sequence at a time: the reference model has one KV cache, so requests queue.
 */
import { checkPromptIds, RequestQueue, resultFor, reusablePrefix } from '../engine/backend-util';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult, TokenLogprob } from '../engine/types';
import { logprobsOf, TokenSampler } from '../engine/logit-processors';
import { applyMaskRef } from '../structured/mask';
import type { GenerationDefaults } from '../api/sampling';
import type { ModelConfig } from '../model/config';
import type { OpenedModel } from '../model/open';
import { chatTemplateOf, loadTextModel } from '../text/from-model';
import type { ChatTemplateConfig, TextTokenizer } from '../text/index';
import { ReferenceModel } from './forward';


export interface ReferenceBackendOptions {
  /** The model id the API answers to (default: the config's arch, e.g. `qwen3`). */
  id?: string;
  /** Tokens per sequence (default: the model's max_position_embeddings). */
  contextLength?: number;
  /** The model's generation_config.json, for sampling defaults. */
  generationConfig?: GenerationDefaults;
}

/** `GenerateRequest` plus the API's `cache_prompt` (false: recompute the whole prompt). */
export type ReferenceGenerateRequest = GenerateRequest & { cachePrompt?: boolean };

/** Yields to the event loop so aborts and other requests are seen between steps. */
const tick = () => new Promise<void>((ok) => setTimeout(ok, 0));

export class ReferenceBackend implements Backend {
  readonly id: string;
  readonly config: ModelConfig;
  readonly tokenizer: TextTokenizer;
  readonly chatTemplate: ChatTemplateConfig;
  readonly contextLength: number;
  readonly generationConfig: GenerationDefaults;
  /** The ids whose K/V the model holds, in order (a prefix the next prompt may reuse). */
  private cached: number[] = [];
  private readonly queue = new RequestQueue();
  private readonly breakerSets = new Map<string, Set<number>>();
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
  }

  static async create(opened: OpenedModel, opts: ReferenceBackendOptions = {}): Promise<ReferenceBackend> {
    const { tokenizer } = loadTextModel(opened);
    return new ReferenceBackend(await ReferenceModel.load(opened), opened, tokenizer, opts);
  }

  /** Feeds `ids` from the longest cached prefix (keeping at least the last id to compute); returns its logits and the reuse. */
  private prefill(ids: readonly number[], reuse: boolean, after?: (pos: number, logits: Float32Array) => void): { logits: Float32Array; cachedTokens: number } {
    const common = reuse ? reusablePrefix(this.cached, ids) : 0;
    this.cached.length = common;
    let logits: Float32Array = new Float32Array(0);
    for (let pos = common; pos < ids.length; pos++) {
      logits = this.model.forward(ids[pos], pos);
      this.cached.push(ids[pos]);
      after?.(pos, logits);
    }
    return { logits, cachedTokens: common };
  }

  async *generate(request: ReferenceGenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    if (this.disposed) throw new Error('ReferenceBackend: generate() after dispose()');
    const { promptIds, sampling, signal } = request;
    checkPromptIds(promptIds, this.config.vocabSize);
    const release = await this.queue.acquire();
    try {
      const promptTokens = promptIds.length;
      const result = resultFor(promptTokens);
      if (signal?.aborted) return result('abort', 0, 0);
      let { logits, cachedTokens } = this.prefill(promptIds, request.cachePrompt ?? true);
      const maxTokens = Math.max(0, Math.min(request.maxTokens, this.contextLength - promptTokens));
      const eos = request.ignoreEos ? [] : this.tokenizer.eosIds;
      const enders = new Set([...eos, ...request.stopTokenIds]);
      const sampler = new TokenSampler(sampling, { promptIds, isBreaker: this.breakers(sampling.dry.sequenceBreakers) });
      const topN = sampling.logprobs ? sampling.topLogprobs : 0;
      const { constraint } = request;
      const bits = constraint ? new Uint32Array(constraint.words) : null;
      for (let n = 0; n < maxTokens; n++) {
        if (constraint) {
          // Forbidden tokens get -inf before anything else sees the logits (logprobs included).
          await constraint.mask(bits!);
          logits = applyMaskRef(logits.slice(), bits!, this.config.vocabSize);
        }
        // Under a grammar the grammar decides where the output may end, so min_tokens bans nothing.
        const id = sampler.sample(logits, n < request.minTokens && !constraint ? [...enders] : []);
        const token: GeneratedToken = { id };
        if (sampling.logprobs) Object.assign(token, logprobsOf(logits, id, topN));
        if (constraint && !constraint.accept(id)) throw new Error(`structured output: the grammar refused token ${id}, which its mask allowed`);
        yield token;
        if (enders.has(id)) return result('stop', n + 1, cachedTokens, id);
        if (constraint?.isTerminated()) return result('stop', n + 1, cachedTokens);
        if (n + 1 === maxTokens) break;
        // The step boundary: an abort stops here, before the next forward.
        await tick();
        if (signal?.aborted) return result('abort', n + 1, cachedTokens);
        logits = this.model.forward(id, promptTokens + n);
        this.cached.push(id);
      }
      return result('length', maxTokens, cachedTokens);
    } finally {
      release();
    }
  }

  async scorePrompt(ids: number[], topLogprobs: number): Promise<Array<{ logprob: number | null; top: TokenLogprob[] }>> {
    checkPromptIds(ids, this.config.vocabSize);
    const release = await this.queue.acquire();
    try {
      // Scoring needs the logits after every position, so recompute from the start.
      this.cached.length = 0;
      const out: Array<{ logprob: number | null; top: TokenLogprob[] }> = [{ logprob: null, top: [] }];
      this.prefill(ids, false, (pos, logits) => {
        if (pos + 1 < ids.length) out.push(logprobsOf(logits, ids[pos + 1], topLogprobs));
      });
      return out;
    } finally {
      release();
    }
  }

  /** Ids whose text contains a DRY sequence breaker (computed once per breaker list). */
  private breakers(list: readonly string[]): (id: number) => boolean {
    const key = JSON.stringify(list);
    let set = this.breakerSets.get(key);
    if (!set) {
      set = new Set();
      if (list.length) {
        for (let id = 0; id < this.tokenizer.vocabSize; id++) {
          const text = this.tokenizer.decode([id]);
          if (list.some((b) => b.length > 0 && text.includes(b))) set.add(id);
        }
      }
      this.breakerSets.set(key, set);
    }
    const s = set;
    return (id) => s.has(id);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.cached = [];
  }
}
