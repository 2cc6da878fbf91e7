/**
 * The page's side of the engine Worker: an EngineHandle whose fetch sends each request over
 * comlink and returns the worker's transferred ReadableStream as the body. A worker that fails
 * to start, or errors, rejects what is pending instead of leaving it hanging.
 */
import * as Comlink from 'comlink';
import { abortError, engineUnloaded, EngineError, fromStructured, toStructured, unloadedError, type StructuredError } from './errors';
import { toRequest, untilAborted, withAbortableBody } from './fetch';
import { setInternals } from './internals';
import type { LoadProgress } from '../loader/progress';
import type { EngineWorkerApi, WireModel } from './worker-api';
import { fromWireResponse, toWireRequest } from './wire';
import type { CreateEngineOptions, EngineHandle, EngineInfo, LoraSpec, ModelSpec } from './types';
import { scaledSource } from '../engine/lora-source';

/** Starts `src/worker.ts`; Vite bundles it (dev server, vitest and the library build alike). */
export function startEngineWorker(): Worker {
  return new Worker(new URL('../worker.ts', import.meta.url), { type: 'module', name: 'webgpu-llm' });
}

/** Adapters cross to the Worker in the `{ source, scale }` form. */
function toWireLora(s: LoraSpec): { source: WireModel; scale?: number } {
  const { source, scale } = scaledSource(s);
  return { source: toWireModel(source), ...(scale !== undefined ? { scale } : {}) };
}

function toWireModel(m: ModelSpec): WireModel {
  if (typeof m === 'string') return m;
  if (m instanceof URL) return m.href;
  if (m instanceof Blob) return m;
  return { files: Array.from(m as ArrayLike<File>, (file) => ({ path: file.webkitRelativePath, file })) };
}

/**
 * The worker's API over comlink, watched: a worker that cannot load its script, or throws
 * uncaught, fails whatever is pending (`call` and `failed` reject, `onFail` hears it). `stop` lets
 * go of it, terminating a worker started here.
 */
export function openWorker(given: Worker | undefined, onFail?: (e: EngineError) => void) {
  const worker = given ?? startEngineWorker();
  const api = Comlink.wrap<EngineWorkerApi>(worker);
  let failWorker!: (e: EngineError) => void;
  const failed = new Promise<never>((_, reject) => (failWorker = reject));
  failed.catch(() => {});
  const onWorkerError = (event: ErrorEvent) => {
    const err = new EngineError({ name: 'WorkerError', code: 'worker_error', message: `the engine worker failed: ${event.message || 'it could not start (check that the worker script loads)'}` });
    failWorker(err);
    onFail?.(err);
  };
  worker.addEventListener('error', onWorkerError);
  const call = <T>(p: Promise<T>): Promise<T> => Promise.race([p, failed]).catch((e) => Promise.reject(fromStructured(e)));
  const stop = () => {
    worker.removeEventListener('error', onWorkerError);
    api[Comlink.releaseProxy]();
    if (!given) worker.terminate();
  };
  return { api, failed, call, stop };
}

export async function createWorkerEngine(options: CreateEngineOptions, given?: Worker): Promise<EngineHandle> {
  const listeners = new Set<(e: StructuredError) => void>();
  const emit = (e: StructuredError) => listeners.forEach((l) => l(e));
  let workerFailed = false;
  const { api, failed, call, stop } = openWorker(given, (err) => {
    workerFailed = true;
    emit(err.toJSON());
  });

  let info: EngineInfo;
  const abort = new MessageChannel();
  const onAbort = () => abort.port1.postMessage('abort');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (options.signal?.aborted) throw new EngineError({ name: 'LoadError', code: 'aborted', message: 'loading was aborted' });
    const onProgress = options.onProgress;
    info = await call(
      api.load(
        {
          model: toWireModel(options.model),
          precision: options.precision,
          contextLength: options.contextLength,
          maxBatch: options.maxBatch,
          kvCacheTokens: options.kvCacheTokens,
          integerDot: options.integerDot,
          speculative: options.speculative,
          mtp: options.mtp,
          ...(options.draft ? { draft: { ...options.draft, model: toWireModel(options.draft.model) } } : {}),
          cache: options.cache,
          id: options.id,
          memoryBytes: options.memoryBytes,
          faultInjection: options.faultInjection,
          ...(options.mmproj ? { mmproj: String(options.mmproj) } : {}),
          deviceRecovery: options.deviceRecovery,
          ...(options.persistKv ? { persistKv: options.persistKv } : {}),
          lora: options.lora && Object.fromEntries(Object.entries(options.lora).map(([k, v]) => [k, toWireLora(v)])),
          loraPool: options.loraPool,
        },
        onProgress ? Comlink.proxy((p: LoadProgress) => onProgress(p)) : undefined,
        Comlink.transfer(abort.port2, [abort.port2]),
      ),
    );
    await call(api.onError(Comlink.proxy(emit)));
  } catch (e) {
    stop();
    throw e;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    abort.port1.close();
  }

  let open = true;
  // Unload (or a failed worker) ends in-flight requests as if aborted, so nothing waits on a dead engine.
  const closing = new AbortController();
  failed.catch(() => {
    open = false;
    closing.abort();
  });

  async function fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const request = toRequest(input, init);
    if (request.signal.aborted) throw abortError(request.signal);
    if (!open) return engineUnloaded();
    const signal = AbortSignal.any([request.signal, closing.signal]);
    const wire = await toWireRequest(request);
    const { port1, port2 } = new MessageChannel();
    const onAbort = () => port1.postMessage('abort');
    signal.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      signal.removeEventListener('abort', onAbort);
      port1.close();
    };
    let reply;
    try {
      const transfer: Transferable[] = wire.body ? [port2, wire.body] : [port2];
      reply = await untilAborted(call(api.fetch(Comlink.transfer({ ...wire, abort: port2 }, transfer))), signal, (late) => void late.body?.cancel().catch(() => {}));
    } catch (e) {
      done();
      if (!open && !request.signal.aborted) return engineUnloaded();
      if ((e as { name?: string }).name === 'AbortError') throw e;
      // The worker's API app answers every failure as a Response; this is the worker itself failing.
      const s = toStructured(e);
      return new Response(JSON.stringify({ error: { message: s.message, type: 'server_error', param: null, code: s.code } }), {
        status: 500,
        headers: { 'Content-Type': 'application/json' },
      });
    }
    return withAbortableBody(fromWireResponse(reply), signal, done);
  }

  const engine: EngineHandle = {
    fetch,
    info,
    stats: () => (open ? call(api.stats()) : Promise.reject(unloadedError())),
    loadLora: (name, source, opts) => {
      if (!open) return Promise.reject(unloadedError());
      const { source: src, scale } = toWireLora(source);
      return call(api.loadLora(name, src, { ...opts, ...(scale !== undefined ? { scale } : {}) }));
    },
    unloadLora: (name) => (open ? call(api.unloadLora(name)) : Promise.reject(unloadedError())),
    loras: () => (open ? call(api.loras()) : Promise.reject(unloadedError())),
    injectFault: (fault) => (open ? call(api.injectFault(fault)) : Promise.reject(unloadedError())),
    onError(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async unload() {
      if (!open) return;
      open = false;
      closing.abort();
      listeners.clear();
      try {
        await call(api.unload());
      } catch (e) {
        if (!workerFailed) throw e; // a failed worker has nothing left to free
      } finally {
        stop();
      }
    },
  };
  setInternals(engine, { isOpen: () => open, loseDevice: () => call(api.loseDevice()) });
  return engine;
}
