/**
 * The engine's side of the dedicated Worker, exposed over comlink. Everything that crosses is
 * structured-cloneable: options without callbacks (progress and error listeners come as comlink
 * proxies), request bodies as ArrayBuffers, the response body as a transferred ReadableStream,
 * aborts as a MessagePort message, and failures as thrown `{name, code, message}` objects.
 */
import * as Comlink from 'comlink';
import type { LoadProgress } from '../loader/progress';
import type { ModelInput } from '../loader/resolve';
import { toStructured, unloadedError, type StructuredError } from './errors';
import { loadHost, type EngineHost } from './host';
import { fromWireRequest, toWireResponse, transferables, type WireRequest, type WireResponse } from './wire';
import type { EngineInfo, EngineStats, FaultSpec, LoraInfo } from './types';
import type { SelfCheckOptions, SelfCheckReport, SelfCheckResult } from '../selfcheck/run';

/** A model as it crosses to the worker: URLs as strings, picked files with their folder paths. */
export type WireModel = string | Blob | { files: Array<{ path: string; file: File }> };

export interface WorkerLoadOptions {
  model: WireModel;
  precision?: 'auto' | 'f32' | 'f16';
  contextLength?: number;
  maxBatch?: number;
  kvCacheTokens?: number;
  integerDot?: boolean;
  speculative?: { type: 'ngram'; n: number; k: number } | { type: 'mtp'; k?: number };
  mtp?: boolean;
  draft?: { model: WireModel; tokens?: number };
  cache?: boolean;
  id?: string;
  lora?: Record<string, { source: WireModel; scale?: number }>;
  loraPool?: { maxAdapters?: number; maxRank?: number; bytes?: number };
  memoryBytes?: number;
  faultInjection?: boolean;
  /** CreateEngineOptions.mmproj, as a string (a URL crosses as its text). */
  mmproj?: string;
  deviceRecovery?: { maxLosses?: number; windowMs?: number } | false;
  persistKv?: { dir?: string; budgetBytes?: number };
}

/** selfCheck()'s options as they cross (the result listener comes apart, as a comlink proxy). */
export type WorkerSelfCheckOptions = Pick<SelfCheckOptions, 'precision' | 'only'>;

export interface EngineWorkerApi {
  /** Loads the model; `abort` gets a message when the caller's signal fires. */
  load(options: WorkerLoadOptions, onProgress?: (p: LoadProgress) => void, abort?: MessagePort): Promise<EngineInfo>;
  /** One request; `request.abort` gets a message when the caller's signal fires. */
  fetch(request: WireRequest & { abort: MessagePort }): Promise<WireResponse>;
  stats(): Promise<EngineStats>;
  loadLora(name: string, source: WireModel, options?: { scale?: number }): Promise<LoraInfo>;
  unloadLora(name: string): Promise<void>;
  loras(): Promise<LoraInfo[]>;
  onError(listener: (e: StructuredError) => void): void;
  loseDevice(): void;
  injectFault(fault: FaultSpec): Promise<void>;
  unload(): Promise<void>;
  /** selfcheck on a GPU device of its own (not the engine's, if one is loaded); each result to `onResult` as it comes. */
  selfCheck(options: WorkerSelfCheckOptions, onResult?: (r: SelfCheckResult) => void): Promise<SelfCheckReport>;
}

/** Aborts when a message arrives on `port`. */
function signalFrom(port: MessagePort | undefined): AbortSignal | undefined {
  if (!port) return undefined;
  const controller = new AbortController();
  port.onmessage = () => controller.abort();
  return controller.signal;
}

/** Picked files get back the folder path a structured clone drops. */
function toModelInput(m: WireModel): ModelInput {
  if (typeof m === 'string' || m instanceof Blob) return m;
  return m.files.map(({ path, file }) => Object.defineProperty(file, 'webkitRelativePath', { value: path }));
}

/** Runs `f`, throwing failures as plain structured objects (comlink clones them as they are). */
async function structured<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw toStructured(e);
  }
}

export function createWorkerApi(): EngineWorkerApi {
  let host: EngineHost | null = null;
  const listeners: Array<(e: StructuredError) => void> = [];
  const loaded = (): EngineHost => {
    if (!host) throw unloadedError('the worker holds no engine');
    return host;
  };

  return {
    load(options, onProgress, abort) {
      return structured(async () => {
        if (host) throw { name: 'EngineError', code: 'already_loaded', message: 'this worker already holds an engine: use one worker per engine' };
        const signal = signalFrom(abort);
        host = await loadHost({
          model: toModelInput(options.model),
          precision: options.precision,
          contextLength: options.contextLength,
          maxBatch: options.maxBatch,
          kvCacheTokens: options.kvCacheTokens,
          integerDot: options.integerDot,
          speculative: options.speculative,
          mtp: options.mtp,
          ...(options.draft ? { draft: { ...options.draft, model: toModelInput(options.draft.model) } } : {}),
          memoryBytes: options.memoryBytes,
          faultInjection: options.faultInjection,
          ...(options.mmproj ? { mmproj: options.mmproj } : {}),
          deviceRecovery: options.deviceRecovery,
          ...(options.persistKv ? { persistKv: options.persistKv } : {}),
          cache: options.cache,
          id: options.id,
          lora: options.lora && Object.fromEntries(Object.entries(options.lora).map(([k, v]) => [k, { source: toModelInput(v.source), scale: v.scale }])),
          loraPool: options.loraPool,
          signal,
          onProgress: onProgress ? (p) => void onProgress(p) : undefined,
        });
        abort?.close();
        host.onError((e) => listeners.forEach((l) => void l(e)));
        return { ...host.info };
      });
    },

    fetch(wire) {
      return structured(async () => {
        const port = wire.abort;
        const signal = signalFrom(port)!;
        const response = toWireResponse(await loaded().handle(fromWireRequest(wire, signal)));
        if (!response.body) port.close();
        return Comlink.transfer(response, transferables(response));
      });
    },

    stats() {
      return structured(async () => loaded().stats());
    },

    loadLora(name, source, options) {
      return structured(() => loaded().loadLora(name, toModelInput(source), options));
    },

    unloadLora(name) {
      return structured(() => loaded().unloadLora(name));
    },

    loras() {
      return structured(async () => loaded().loras());
    },

    onError(listener) {
      listeners.push(listener);
    },

    loseDevice() {
      host?.loseDevice();
    },

    injectFault(fault) {
      return structured(async () => loaded().injectFault(fault));
    },

    unload() {
      return structured(async () => {
        const h = host;
        host = null;
        listeners.length = 0;
        await h?.unload();
      });
    },

    selfCheck(options, onResult) {
      return structured(async () => {
        // Its own chunk: the fixture generator, the CPU reference and the tokenizer trainer it brings
        // load only when asked, never with the engine.
        const { selfCheckOn } = await import('./selfcheck-run');
        // Each listener call is a message on the proxy's own port: waited for, so that every row
        // reaches the page before the report does.
        const delivered: Array<Promise<unknown>> = [];
        const report = await selfCheckOn(undefined, { ...options, onResult: onResult ? (r) => void delivered.push(Promise.resolve(onResult(r))) : undefined });
        await Promise.allSettled(delivered);
        return report;
      });
    },
  };
}
