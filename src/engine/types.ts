/**
 * The contract between the OpenAI API layer (src/api/) and whatever generates tokens: the WebGPU
 * engine (src/engine/) or the CPU reference backend used as an oracle in tests.
 */
import type { LoraTarget } from '../lora/types';
import type { ModelConfig } from '../model/config';
import type { TextTokenizer } from '../text/tokenizer';
import type { ChatTemplateConfig } from '../text/chat-template';
import type { GenerationDefaults } from '../model/generation-config';
import type { Constraint } from '../structured/spec';
import type { ImageProcessorSettings } from '../vision/settings';
import type { SpeculationRequest } from './proposers';

/** Everything that decides the next token, after the API layer resolved defaults. */
export interface SamplingParams {
  /** 0 = greedy. */
  temperature: number;
  topP: number; // 1 = off
  topK: number; // 0 = off
  minP: number; // 0 = off
  /** Same seed ⇒ same output. Absent: a random seed is drawn per request. */
  seed?: number;
  frequencyPenalty: number; // 0 = off
  presencePenalty: number; // 0 = off
  repetitionPenalty: number; // 1 = off
  /** token id → bias added to its logit (−100 bans, +100 forces). */
  logitBias: Record<number, number>;
  /** DRY (don't repeat yourself) penalty; multiplier 0 = off. */
  dry: { multiplier: number; base: number; allowedLength: number; sequenceBreakers: string[] };
  /** Mirostat (0 = off, 1 or 2). */
  mirostat: { mode: 0 | 1 | 2; tau: number; eta: number };
  /** Number of top alternatives to return per token (0 = none); the chosen token's logprob comes with any value ≥ 0 when `logprobs` is true. */
  topLogprobs: number;
  logprobs: boolean;
}

/** What a model with a vision tower takes: its processor's settings and the prompt token its image tokens take. */
export interface VisionInputs {
  processor: ImageProcessorSettings;
  /** The id of `<image>`, the token whose positions the tower's embeddings fill. */
  imageTokenId: number;
}

/** One image of a prompt: its tiles row by row, then its global image (3 × tile × tile values each, channel-first). */
export interface PromptImage {
  tiles: readonly Float32Array[];
}

export interface GenerateRequest {
  promptIds: number[];
  /** Tokens to generate at most (the API layer resolved -1/absent to the context's remaining room). */
  maxTokens: number;
  sampling: SamplingParams;
  /** Generation ends after one of these ids (the id itself is produced, then the stream ends). */
  stopTokenIds: number[];
  /** EOS ids end generation unless `ignoreEos`. */
  ignoreEos: boolean;
  /** EOS/stop ids are suppressed until this many tokens were generated. */
  minTokens: number;
  signal?: AbortSignal;
  /**
   * The images of the prompt, in order, for a backend with a vision tower: each one's tiles
   * (processed pixels, src/vision/idefics3.ts) fill the prompt's image-token positions in order,
   * `tokensPerTile` positions a tile.
   */
  images?: readonly PromptImage[];
  /** Reuse the KV of a prompt prefix shared with the previous request (the API's `cache_prompt`, default true). */
  cachePrompt?: boolean;
  /**
   * Structured output: each step only tokens the constraint allows can be sampled, the sampled
   * token is accepted into it, and generation ends with 'stop' once it terminates. The caller
   * owns it (one per request; dispose after).
   */
  constraint?: Constraint;
  /**
   * Jump-forward decoding (default true): tokens the constraint forces are taken without a draw
   * and fed together at the next step (Sequence.jumpForward); the output is the same either way.
   */
  jumpForward?: boolean;
  /**
   * Speculative decoding (issue #32): proposals from a predicted output or n-gram lookup, several
   * verified per step (src/engine/proposers.ts). The output is the same with or without it.
   */
  speculation?: SpeculationRequest;
  /** Return each generated token's final hidden state (`GeneratedToken.hidden`; SGLang's `return_hidden_states`). */
  returnHiddenStates?: boolean;
  /**
   * Return, with each generated token, the experts every layer routed the row it was drawn from to
   * (`GeneratedToken.routedExperts`; SGLang's `return_routed_experts`). A model without experts
   * refuses it (`routed_experts_unavailable`, 400).
   */
  returnRoutedExperts?: boolean;
  /** The loaded LoRA adapter to run with (its name); absent: the base model. */
  lora?: string;
  /** The request field that named `lora`, for the error when it is not loaded ('model' or 'lora_path'). */
  loraParam?: string;
}

export interface TokenLogprob {
  id: number;
  logprob: number;
}

export interface GeneratedToken {
  id: number;
  /** The chosen token's logprob (log-softmax of the raw logits), when asked. */
  logprob?: number;
  top?: TokenLogprob[];
  /** The final hidden state (after the output norm) this token was drawn from, when `returnHiddenStates`. */
  hidden?: Float32Array;
  /** Per layer, the k experts (most probable first) the row this token was drawn from was routed to, when `returnRoutedExperts`. */
  routedExperts?: number[][];
}

export type FinishReason = 'stop' | 'length' | 'abort';

export interface GenerationResult {
  finishReason: FinishReason;
  /** The stop token that ended generation, if any. */
  stopTokenId?: number;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens whose KV was reused from a previous request. */
  cachedTokens: number;
  /** With `speculation` asked for: tokens proposed and verified, and those the output took. */
  speculation?: { proposed: number; accepted: number };
}

/**
 * What the API reads of a backend's model: a decoder's whole ModelConfig, or an encoder's
 * (src/engine/encoder-backend.ts) width, vocabulary and pooling.
 */
export type BackendConfig = Pick<ModelConfig, 'vocabSize' | 'hiddenSize' | 'embedding'>;

/** A loaded model ready to generate. */
export interface Backend {
  readonly id: string;
  readonly config: BackendConfig;
  readonly tokenizer: TextTokenizer;
  readonly chatTemplate: ChatTemplateConfig;
  /** The model's generation_config.json sampling defaults (HF names), if it has any. */
  readonly generationConfig?: GenerationDefaults;
  /** Max tokens per sequence (prompt + completion). */
  readonly contextLength: number;
  /** The vision tower's image processing, for a model that takes images; absent: text only (image parts are a 400). */
  readonly vision?: VisionInputs;
  /**
   * Streams generated tokens. The iterator's return value is the result; breaking out of the loop
   * or aborting `signal` stops generation at the next step (between prefill chunks too, and at
   * once while the request still waits its turn) and frees the sequence's KV pages.
   */
  generate(request: GenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void>;
  /** Teacher-forced logprobs of given tokens (for `echo` with `logprobs`), with the loaded adapter `lora` if given. */
  scorePrompt?(ids: number[], topLogprobs: number, lora?: string): Promise<Array<{ logprob: number | null; top: TokenLogprob[] }>>;
  /**
   * LoRA adapters (the GPU engine): load one under a name from a path, URL or Hugging Face repo id,
   * unload it, list those loaded. A backend without them takes no adapter.
   */
  loadLora?(name: string, source: string, opts?: { scale?: number }): Promise<LoraInfo>;
  unloadLora?(name: string): Promise<void>;
  loras?(): LoraInfo[];
  /**
   * An encoder's embeddings (BERT): each input's pooled, L2-normalised vector, inputs batched by
   * the encoder. Absent: /v1/embeddings reads the last token's hidden state through `generate`.
   */
  embed?(inputs: readonly (readonly number[])[], signal?: AbortSignal): Promise<Float32Array[]>;
  dispose(): Promise<void>;
}

/** A loaded LoRA adapter, as `engine.loras()` and `GET /v1/models` tell it. */
export interface LoraInfo {
  name: string;
  /** Where it was loaded from (a path, URL or repo id; 'picked files'). */
  source: string;
  format: 'peft' | 'gguf';
  /** Its largest rank, and the matrices it adapts (in any layer). */
  rank: number;
  targets: LoraTarget[];
  /** The multiplier on the adapter's own alpha / rank. */
  scale: number;
}
