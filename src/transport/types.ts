/** The public shapes every transport shares: what createEngine takes and what it gives back. */
import type { GPUDescription } from '../gpu/device';
import type { LoadProgress } from '../loader/progress';
import type { EngineStats } from '../engine/engine';
import type { LoraInfo } from '../engine/types';
import type { Scaled } from '../engine/lora-source';
import type { StructuredError } from './errors';

export type { EngineStats, LoraInfo };

/** A LoRA adapter to load: where it is (a URL, a Hugging Face repo id, a `.gguf` Blob, picked folder files; in Node a path), or that with a multiplier on its own alpha / rank. */
export type LoraSpec = Scaled<ModelSpec>;

/** The LoRA adapter pool (made on the first adapter load). */
export interface LoraPoolSpec {
  /** Adapters loaded at once (default 8). */
  maxAdapters?: number;
  /** The largest adapter rank (default 64). */
  maxRank?: number;
  /** Bytes of the pool of adapter matrices (default 64 MiB, or twice the first adapter's size). */
  bytes?: number;
}

/** A model as the loader takes it: a URL, a Hugging Face repo id, a GGUF Blob, picked folder files (or, in Node, a path). */
export type ModelSpec = string | URL | Blob | File[] | FileList;

export interface CreateEngineOptions {
  model: ModelSpec;
  /**
   * The model's vision tower as llama.cpp ships it beside a text GGUF (`--mmproj`): a URL or, in
   * Node, a path to an mmproj GGUF (Idefics3 projectors: SmolVLM). Chat requests may then carry
   * `image_url` parts. Read without the model cache. An HF Idefics3 / SmolVLM folder as `model`
   * carries its own tower (`model.vision_model.*`): no mmproj needed.
   */
  mmproj?: string | URL;
  /** Download, cache, upload and compile progress (throttled to about 20 events per second). */
  onProgress?: (p: LoadProgress) => void;
  /**
   * Browser only. `true` (default): the engine runs in a dedicated Worker (`webgpu-llm/worker`)
   * reached over comlink; a Worker: use that one (created from `webgpu-llm/worker`); `false`: in
   * this thread.
   */
  worker?: boolean | Worker;
  /** `auto` (default): f16 activations when the GPU offers `shader-f16`, else f32. */
  precision?: 'auto' | 'f32' | 'f16';
  /** Tokens per sequence, prompt and completion (default min(model's maximum, 4096)). */
  contextLength?: number;
  /** Sequences generated together: concurrent requests, `n` choices, batched prompts (default 16). */
  maxBatch?: number;
  /** Tokens of KV cache shared by all sequences and the prefix cache (default: from the model's size; see docs/ARCHITECTURE.md). */
  kvCacheTokens?: number;
  /**
   * One-token decode steps use integer dot products (`dot4I8Packed`, the activation rounded to
   * int8 per 32 values) where the GPU reports WGSL's `packed_4x8_integer_dot_product` (default
   * false: kept off until measured faster on a GPU; see docs/ARCHITECTURE.md).
   */
  integerDot?: boolean;
  /**
   * Speculative decoding by n-gram lookup (`{ type: 'ngram', n, k }`) or the model's MTP head
   * (`{ type: 'mtp', k }`: k chained guesses per step, 1..8, default 1; refused on a model without one) for requests that ask for none themselves
   * (their `speculative` and `prediction` fields). Off by default.
   */
  speculative?: { type: 'ngram'; n: number; k: number } | { type: 'mtp'; k?: number };
  /**
   * Load the model's multi-token-prediction head (Qwen3.5 files that ship one), so that requests
   * may ask for `speculative: {type: "mtp"}`. Default: only when `speculative` is `{ type: 'mtp' }`;
   * otherwise it takes no GPU memory, and a request asking for it gets a 400 saying how to load it.
   */
  mtp?: boolean;
  /**
   * A draft model for speculative decoding (as llama.cpp's `--model-draft`): a smaller model with
   * the same tokenizer (refused otherwise), on the same GPU, guesses up to `tokens` (default 8)
   * tokens per step for requests that ask for no speculation of their own; the model verifies
   * them (the output is the same). Wins over `speculative`.
   */
  draft?: { model: ModelSpec; tokens?: number };
  /**
   * Bytes of memory the GPU may use, when you know it better than the engine's estimate (WebGPU
   * reports none; see src/gpu/memory.ts): `info.warnings` says when the model takes more.
   */
  memoryBytes?: number;
  /** Keep downloads in the model cache (default true: OPFS / Cache API in browsers, a directory in Node). */
  cache?: boolean;
  /** The model's id in the API (`model` field, `/v1/models`); default: the architecture. */
  id?: string;
  /** Stops the load; createEngine then rejects with a LoadError whose code is `aborted`. */
  signal?: AbortSignal;
  /** LoRA adapters to load with the model, by name: requests pick one with `model: "<id>:<name>"` or `lora_path: "<name>"`. */
  lora?: Record<string, LoraSpec>;
  loraPool?: LoraPoolSpec;
  /**
   * Enables `injectFault` on the handle (default false): tests and operators make the GPU device
   * lost as a driver reset would, to see the engine recover (see docs/api.md).
   */
  faultInjection?: boolean;
  /**
   * Recovery from a lost GPU device: a new device, the model rebuilt from its cache, running
   * requests resumed (default `{ maxLosses: 3, windowMs: 60000 }`: a fourth loss within 60 s ends
   * the engine); `false`: a loss ends the engine at once.
   */
  deviceRecovery?: DeviceRecoverySpec | false;
  /**
   * Keeps full KV pages of the prefix cache in storage, so after a restart or a reload a known
   * prompt prefix is uploaded instead of computed (it counts as `cached_tokens`). Node: `dir`
   * (default `<model cache dir>/kv`), `budgetBytes` (default 4 GiB); browsers: OPFS, `dir` the
   * folder's name (default `webgpu-llm-kv`), `budgetBytes` (default 1 GiB). Least recently used
   * pages go first. Default off. See docs/api.md.
   */
  persistKv?: KvPersistSpec;
}

/** Where KV pages are kept across restarts, and how many bytes they may take (CreateEngineOptions.persistKv). */
export interface KvPersistSpec {
  dir?: string;
  budgetBytes?: number;
}

/** How many device losses the engine recovers from: more than `maxLosses` within `windowMs` ends it. */
export interface DeviceRecoverySpec {
  maxLosses?: number;
  windowMs?: number;
}

/** A fault `injectFault` makes: `device_lost` destroys the GPU device as a driver reset would. */
export interface FaultSpec {
  kind: 'device_lost';
}

export interface EngineInfo {
  model: string;
  gpu: GPUDescription;
  precision: 'f32' | 'f16';
  contextLength: number;
  /** Sequences generated together, and the KV pool's size in tokens (all sequences and the prefix cache). */
  maxBatch: number;
  kvCacheTokens: number;
  /** Recoveries from a lost GPU device since load (live in this thread; through a Worker, as at load: read `stats().recoveries`). */
  readonly recoveries: number;
  /** Things that work but not as well as they could (a software adapter, no shader-f16, a clamped context, a model close to the device's memory). */
  warnings: string[];
}

export interface EngineHandle {
  /** A `fetch` for the OpenAI API: `new OpenAI({ fetch: engine.fetch, baseURL: 'http://localhost/v1' })`. */
  fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response>;
  readonly info: EngineInfo;
  /** The engine now: KV pages used, cached and free, sequences running and waiting, steps and preemptions. Rejects (`engine_unloaded`) once unloaded. */
  stats(): Promise<EngineStats>;
  /** GPU faults (device lost, uncaptured errors) and worker failures, as structured errors. Returns the unsubscribe. */
  onError(listener: (e: StructuredError) => void): () => void;
  /**
   * Loads a LoRA adapter (a PEFT folder or a llama.cpp GGUF LoRA) under `name`: requests then pick it
   * with `model: "<id>:<name>"` or `lora_path: "<name>"`. Rejects with a LoraError naming the file
   * when the adapter does not fit this model.
   */
  loadLora(name: string, source: LoraSpec, options?: { scale?: number }): Promise<LoraInfo>;
  /** Unloads an adapter once its requests in flight finished (new requests naming it get a 404 at once). */
  unloadLora(name: string): Promise<void>;
  /** The loaded adapters. */
  loras(): Promise<LoraInfo[]>;
  /**
   * Makes a fault happen now, for tests and operators: `{ kind: 'device_lost' }` loses the GPU
   * device as a driver reset would (not as `unload()` does). Only with `faultInjection: true`;
   * otherwise it rejects (`fault_injection_disabled`).
   */
  injectFault(fault: FaultSpec): Promise<void>;
  /** Frees the GPU memory (and the worker); later requests answer 503 `engine_unloaded`. */
  unload(): Promise<void>;
}
