/**
 * The page side of the service worker relay. The engine stays in this page (or its Worker),
 * where WebGPU is reliably available; the service worker forwards every `/v1/*` request of the
 * origin here. Any number of pages may host: the service worker uses the one that answers first.
 */
import { toStructured } from './errors';
import { internalsOf } from './internals';
import { SW_TAG, type FromPage, type ToPage } from './sw-protocol';
import { fromWireRequest, toWireResponse, transferables } from './wire';
import type { EngineHandle } from './types';

export interface RegisterServiceWorkerOptions {
  /** Registration scope (default `/`: every page of the origin). */
  scope?: string;
  /**
   * The service worker script: `webgpu-llm/service-worker` (dist/service-worker.js) served from
   * this origin. Default `/webgpu-llm-sw.js`. A `?base=/api/v1` query changes the prefix it
   * serves (default `/v1`).
   */
  url?: string | URL;
  /** `classic` (default; the built script has no imports) or `module` (a script that imports, e.g. under Vite's dev server). */
  type?: WorkerType;
}

export interface ServiceWorkerHost {
  registration: ServiceWorkerRegistration;
  /** Stops answering for this engine (the service worker stays registered for other pages). */
  stop(): void;
}

export async function registerServiceWorker(engine: EngineHandle, options: RegisterServiceWorkerOptions = {}): Promise<ServiceWorkerHost> {
  const container = navigator.serviceWorker;
  if (!container) throw new Error('service workers are not available here (they need a secure context: https or http://localhost)');
  const isOpen = () => internalsOf(engine)?.isOpen() ?? true;

  const onMessage = (event: MessageEvent) => {
    const msg = event.data as ToPage | undefined;
    const reply = event.ports[0];
    if (!msg || msg.tag !== SW_TAG || !reply) return;
    if (msg.type === 'ping') {
      if (isOpen()) reply.postMessage({ type: 'pong', model: engine.info.model } satisfies FromPage);
      else reply.close();
      return;
    }
    void answer(msg.request, reply);
  };

  async function answer(wire: Extract<ToPage, { type: 'request' }>['request'], reply: MessagePort) {
    const controller = new AbortController();
    reply.onmessage = () => controller.abort();
    try {
      const response = toWireResponse(await engine.fetch(fromWireRequest(wire, controller.signal)));
      reply.postMessage({ type: 'response', response } satisfies FromPage, transferables(response));
    } catch (e) {
      reply.postMessage({ type: 'error', error: toStructured(e) } satisfies FromPage);
    }
  }

  container.addEventListener('message', onMessage);
  container.startMessages();
  const url = options.url ?? '/webgpu-llm-sw.js';
  let registration: ServiceWorkerRegistration;
  try {
    registration = await container.register(url, { scope: options.scope ?? '/', type: options.type ?? 'classic' });
  } catch (e) {
    container.removeEventListener('message', onMessage);
    throw e;
  }
  return {
    registration,
    stop: () => container.removeEventListener('message', onMessage),
  };
}
