/**
 * The engine where it runs (a Worker, the page, or Node): loads the model, owns the GPU device,
 * answers `handle(Request)` through the API app, and reports GPU faults. Every transport wraps
 * one of these. The model is the decoder engine (GpuEngine), or for a BERT encoder's files the
 * encoder (EncoderBackend), which has the same face where the host reads it.
 */
import { createApp } from '../api/app';
import type { RequestLimits } from '../api/limits';
import { acquireGPU, lostSoon, type GPUContext } from '../gpu/device';
import { RECOVERY_DEFAULTS, type RecoveryOptions } from '../engine/recovery';
import { memoryKind, memoryWarning, systemMemory } from '../gpu/memory';
import { GpuEngine, type EngineStats } from '../engine/engine';
import { EncoderBackend } from '../engine/encoder-backend';
import { LoraUnsupportedError } from '../engine/errors';
import { isEncoder, type OpenedEncoder } from '../model/encoder-open';
import type { OpenedModel } from '../model/open';
import { ModelError } from '../model/errors';
import type { Backend, GenerateRequest, LoraInfo } from '../engine/types';
import type { EngineOptions, LoraPoolOptions, LoraSource } from '../engine/engine';
import { abortedError } from '../loader/errors';
import { openAnyModelWithCache, openModelWithCache } from '../loader/open';
import { ProgressEmitter, type LoadProgress } from '../loader/progress';
import type { ModelInput } from '../loader/resolve';
import { faultError, toStructured, unloadedError, type StructuredError } from './errors';
import type { DeviceRecoverySpec, EngineInfo, FaultSpec, KvPersistSpec } from './types';
import type { KvPersistOptions } from '../engine/kv-persist';

export interface HostOptions {
  model: ModelInput;
  onProgress?: (p: LoadProgress) => void;
  precision?: 'auto' | 'f32' | 'f16';
  contextLength?: number;
  maxBatch?: number;
  kvCacheTokens?: number;
  /** CreateEngineOptions.integerDot. */
  integerDot?: boolean;
  /** CreateEngineOptions.speculative. */
  speculative?: EngineOptions['speculative'];
  /** CreateEngineOptions.mtp. */
  mtp?: boolean;
  /** CreateEngineOptions.draft. */
  draft?: { model: ModelInput; tokens?: number };
  /** What the GPU may use, when known better than the estimate (CreateEngineOptions.memoryBytes). */
  memoryBytes?: number;
  cache?: boolean;
  id?: string;
  signal?: AbortSignal;
  /** The `GPU` object (Node: nodeGPU()); default navigator.gpu. */
  gpu?: GPU;
  lora?: Record<string, LoraSource>;
  loraPool?: Partial<LoraPoolOptions>;
  /** CreateEngineOptions.faultInjection: `injectFault` works. */
  faultInjection?: boolean;
  /** CreateEngineOptions.mmproj: the vision tower's file. */
  mmproj?: string | URL;
  /** CreateEngineOptions.deviceRecovery. */
  deviceRecovery?: DeviceRecoverySpec | false;
  /** CreateEngineOptions.persistKv. */
  persistKv?: KvPersistSpec;
}

/** What a host serves: the decoder engine, or a BERT encoder (embeddings only). */
export type HostedEngine = GpuEngine | EncoderBackend;

export interface EngineHost {
  readonly info: EngineInfo;
  /** The engine itself (tests watch its steps). */
  readonly engine: HostedEngine;
  /** The engine now (throws `engine_unloaded` once unloaded). */
  stats(): EngineStats;
  loadLora(name: string, source: LoraSource, options?: { scale?: number }): Promise<LoraInfo>;
  unloadLora(name: string): Promise<void>;
  loras(): LoraInfo[];
  /** The API app over this engine (no API key). */
  handle(request: Request): Promise<Response>;
  /** Another app over the same engine, e.g. with an API key (Node's server). */
  handler(apiKey?: string, limits?: Partial<RequestLimits>): (request: Request) => Promise<Response>;
  onError(listener: (e: StructuredError) => void): () => void;
  /** Destroys the GPU device as a driver reset would (for tests of loss handling). */
  loseDevice(): void;
  /** EngineHandle.injectFault: throws unless fault injection is on and the fault is known. */
  injectFault(fault: FaultSpec): void;
  unload(): Promise<void>;
}

export async function loadHost(options: HostOptions): Promise<EngineHost> {
  const progress = new ProgressEmitter(options.onProgress);
  const opened = await openAnyModelWithCache(options.model, {
    cache: options.cache === false ? false : undefined,
    progress,
    signal: options.signal,
  });
  const draft = options.draft && {
    model: await openModelWithCache(options.draft.model, { cache: options.cache === false ? false : undefined, progress, signal: options.signal }),
    ...(options.draft.tokens !== undefined ? { tokens: options.draft.tokens } : {}),
  };
  const listeners = new Set<(e: StructuredError) => void>();
  // Each device's uncaptured errors and its loss (reported once, also when the engine recovers).
  const listen = (gpu: GPUContext) => void gpu.onError((e) => listeners.forEach((l) => l(toStructured(e))));
  const acquire = async () => {
    const gpu = await acquireGPU({ gpu: options.gpu });
    listen(gpu);
    return gpu;
  };
  const policy = options.deviceRecovery;
  const recovery: RecoveryOptions | undefined = policy === false ? undefined : { acquire, maxLosses: policy?.maxLosses, windowMs: policy?.windowMs };
  const persistKv = options.persistKv ? await kvStoreOf(options.persistKv, 'modelKey' in opened.resolved ? opened.resolved.modelKey : undefined) : undefined;
  // No binding-size check here: tensors larger than a binding are split (src/engine/gpu-weights.ts).
  for (let losses = 0; ; losses++) {
    const gpu = await acquire();
    let engine: HostedEngine;
    try {
      engine = isEncoder(opened) || opened.config.bidirectional ? await loadEncoder(opened, gpu, options) : await GpuEngine.load(opened, {
        gpu,
        precision: options.precision ?? 'auto',
        contextLength: options.contextLength,
        maxBatch: options.maxBatch,
        kvCacheTokens: options.kvCacheTokens,
        integerDot: options.integerDot,
        speculative: options.speculative,
        ...(options.mtp !== undefined ? { mtp: options.mtp } : {}),
        ...(draft ? { draft } : {}),
        id: options.id,
        onProgress: progress,
        lora: options.lora,
        loraPool: options.loraPool,
        recovery,
        ...(persistKv ? { persistKv } : {}),
        ...(options.mmproj ? { mmproj: options.mmproj } : {}),
      });
      if (options.signal?.aborted) {
        await engine.dispose();
        throw abortedError(String(options.model));
      }
    } catch (e) {
      // The device was lost during the load: load again on a new one, as the engine would recover.
      const lost = await lostSoon(gpu);
      gpu.destroy();
      if (lost && recovery && losses < (recovery.maxLosses ?? RECOVERY_DEFAULTS.maxLosses) && !options.signal?.aborted) continue;
      throw lost ?? e;
    }
    return hostOf(engine, listeners, warningsFor(engine, gpu, options), options.cache, options.faultInjection === true);
  }
}

/** createEngine options a BERT encoder has no use for: refused naming the option, not ignored. */
const ENCODER_REFUSES = { draft: 'it generates nothing', mmproj: 'it reads no images', persistKv: 'it keeps no KV cache' } as const;

/** An encoder's host engine (BERT, or a bidirectional model: EmbeddingGemma): createEngine's batch, context and precision; it takes no adapters. */
async function loadEncoder(opened: OpenedEncoder | OpenedModel, gpu: GPUContext, options: HostOptions): Promise<EncoderBackend> {
  if (options.lora && Object.keys(options.lora).length) throw new LoraUnsupportedError(options.id ?? 'bert');
  for (const [option, why] of Object.entries(ENCODER_REFUSES))
    if (options[option as keyof typeof ENCODER_REFUSES]) throw new ModelError('invalid_field', `a BERT encoder takes no ${option}: ${why}`, option);
  return EncoderBackend.load(opened, { gpu, precision: options.precision ?? 'auto', maxBatch: options.maxBatch, contextLength: options.contextLength, id: options.id });
}

/** The store of CreateEngineOptions.persistKv: a directory in Node, an OPFS folder in browsers. */
async function kvStoreOf(spec: KvPersistSpec, source: string | undefined): Promise<KvPersistOptions | undefined> {
  const label = source !== undefined ? { source } : {};
  if (typeof process !== 'undefined' && process.versions?.node) {
    const { nodeKvStore, defaultKvDir } = await import('../loader/kv-store-node');
    return { store: nodeKvStore(spec.dir ?? (await defaultKvDir()), spec.budgetBytes), ...label };
  }
  if (typeof navigator === 'undefined' || typeof navigator.storage?.getDirectory !== 'function') return undefined;
  const { opfsKvStore } = await import('../loader/kv-store-opfs');
  return { store: opfsKvStore(spec.dir, spec.budgetBytes), ...label };
}

/** The loader's cache option from createEngine's `cache` flag (false: none; else the default store). */
const cacheFor = (cache: boolean | undefined): false | undefined => (cache === false ? false : undefined);

function hostOf(engine: HostedEngine, listeners: Set<(e: StructuredError) => void>, warnings: string[], hostCache: boolean | undefined, faultInjection: boolean): EngineHost {
  let unloaded = false;
  const gpuInfo = engine.gpu.info;
  // The encoder does not recover from a lost device: it is its own backend.
  const backend = engine instanceof EncoderBackend ? engine : guardedBackend(engine, cacheFor(hostCache));
  const backends = () => (unloaded ? [] : [backend]);
  const handler = (apiKey?: string, limits?: Partial<RequestLimits>) => createApp({ backends, apiKey, limits }).handle;
  const handle = handler();

  return {
    engine,
    info: {
      model: engine.id,
      gpu: gpuInfo,
      precision: engine.precision,
      contextLength: engine.contextLength,
      maxBatch: engine.limits.maxSeqs,
      kvCacheTokens: engine.limits.numPages * engine.limits.pageSize,
      warnings,
      get recoveries() {
        return engine.recoveries;
      },
    },
    handle,
    handler,
    stats() {
      if (unloaded) throw unloadedError();
      return engine.kvStats;
    },
    loadLora(name, source, options) {
      if (unloaded) return Promise.reject(unloadedError());
      return engine.loadLora(name, source, { ...options, cache: cacheFor(hostCache) });
    },
    unloadLora(name) {
      if (unloaded) return Promise.reject(unloadedError());
      return engine.unloadLora(name);
    },
    loras() {
      if (unloaded) throw unloadedError();
      return engine.loras();
    },
    onError(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    loseDevice() {
      // Not gpu.destroy(): the context must see a loss that is not ours.
      engine.gpu.device.destroy();
    },
    injectFault(fault) {
      const refused = faultError(fault, faultInjection);
      if (refused) throw refused;
      if (unloaded) throw unloadedError();
      this.loseDevice();
    },
    async unload() {
      if (unloaded) return;
      unloaded = true;
      listeners.clear();
      try {
        if (!engine.failure) await engine.dispose();
      } finally {
        engine.gpu.destroy();
      }
    },
  };
}

/**
 * The engine as the API sees it, except that once the engine stopped recovering from a lost
 * device every request fails with the loss (a 500 naming `device_lost`) instead of whatever a
 * dead device's calls reject with. While it recovers, requests wait in its queue.
 */
function guardedBackend(engine: GpuEngine, cache: false | undefined): Backend {
  async function* generate(request: GenerateRequest) {
    if (engine.failure) throw engine.failure;
    try {
      return yield* engine.generate(request);
    } catch (e) {
      throw engine.failure ?? e;
    }
  }
  return {
    id: engine.id,
    config: engine.config,
    tokenizer: engine.tokenizer,
    chatTemplate: engine.chatTemplate,
    generationConfig: engine.generationConfig,
    contextLength: engine.contextLength,
    // A model with a vision tower takes images (the API checks this, /v1/models lists it); set again after a device loss.
    get vision() {
      return engine.vision;
    },
    generate,
    loadLora: (name, source, opts) => engine.loadLora(name, source, { ...opts, cache }),
    unloadLora: (name) => engine.unloadLora(name),
    loras: () => engine.loras(),
    async scorePrompt(ids, top, lora) {
      if (engine.failure) throw engine.failure;
      try {
        return await engine.scorePrompt(ids, top, lora);
      } catch (e) {
        throw engine.failure ?? e;
      }
    },
    dispose: () => engine.dispose(),
  };
}

function warningsFor(engine: HostedEngine, gpu: GPUContext, options: HostOptions): string[] {
  const w: string[] = [];
  if (gpu.info.isFallbackAdapter || gpu.info.architecture === 'swiftshader')
    w.push('The GPU adapter is a software fallback (e.g. SwiftShader): generation will be very slow.');
  if ((options.precision ?? 'auto') === 'auto' && engine.precision === 'f32' && !gpu.info.f16)
    w.push('This GPU offers no shader-f16: activations run in f32 (more memory traffic, slower).');
  if (options.contextLength !== undefined && engine.contextLength < options.contextLength)
    w.push(`contextLength ${options.contextLength} exceeds the model's maximum; using ${engine.contextLength}.`);
  const memory = memoryWarning({ use: engine.memoryUse, kind: memoryKind(gpu.info), system: systemMemory(), limits: gpu.info, memoryBytes: options.memoryBytes });
  if (memory) w.push(memory);
  return w;
}
