/**
 * The service worker side of the relay: `/v1/*` requests from any page of the origin go to a
 * page that hosts an engine (registerServiceWorker), found by pinging the origin's windows.
 *
 * Why a relay and not the engine in the service worker: WebGPU in service workers is missing
 * or partial in several browsers, the browser stops idle service workers at will (a multi-GB
 * model would have to reload each time), and a page-held engine is shared for free. So this
 * script holds no state that cannot be rebuilt: after a stop and restart it pings again. When
 * no page hosts an engine it answers 503 `no_engine_host`.
 *
 * This file imports types only, so the built service worker is one self-contained script.
 */
import type { FromPage, SW_TAG, ToPage } from './sw-protocol';
import type { WireRequest } from './wire';

const TAG: typeof SW_TAG = 'webgpu-llm';
/** How long a window has to answer a ping: pages without an engine never answer. */
const PING_MS = 1000;
/** How often a request waiting for its reply checks that the host page still exists. */
const ALIVE_MS = 2000;

function jsonError(status: number, message: string, type: string, code: string): Response {
  return new Response(JSON.stringify({ error: { message, type, param: null, code } }), {
    status,
    headers: { 'Content-Type': 'application/json' },
  });
}

/** Posts `msg` to `client` with a reply port; resolves with the first reply, or null after `timeoutMs`. */
function ask(client: Client, msg: ToPage, transfer: Transferable[], timeoutMs: number): Promise<{ reply: FromPage; port: MessagePort } | null> {
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      port1.close();
      resolve(null);
    }, timeoutMs);
    port1.onmessage = (e) => {
      clearTimeout(timer);
      resolve({ reply: e.data as FromPage, port: port1 });
    };
    client.postMessage(msg, [port2, ...transfer]);
  });
}

export function installRelay(scope: ServiceWorkerGlobalScope): void {
  const base = new URL(scope.location.href).searchParams.get('base') ?? '/v1';
  const prefix = base.replace(/\/+$/, '');
  /** The window that answered last: a shortcut only, rebuilt by pinging after a restart. */
  let lastHost: string | null = null;

  async function pong(client: Client): Promise<Client | null> {
    const r = await ask(client, { tag: TAG, type: 'ping' }, [], PING_MS);
    r?.port.close();
    return r?.reply.type === 'pong' ? client : null;
  }

  async function findHost(): Promise<Client | null> {
    if (lastHost) {
      const c = await scope.clients.get(lastHost);
      if (c && (await pong(c))) return c;
      lastHost = null;
    }
    const all = await scope.clients.matchAll({ type: 'window', includeUncontrolled: true });
    // The first window to answer wins; null once all have answered no or timed out.
    const host = await new Promise<Client | null>((resolve) => {
      let left = all.length;
      if (left === 0) resolve(null);
      for (const c of all)
        void pong(c).then((ok) => {
          if (ok) resolve(ok);
          else if (--left === 0) resolve(null);
        });
    });
    lastHost = host?.id ?? null;
    return host;
  }

  async function relay(request: Request): Promise<Response> {
    const host = await findHost();
    if (!host)
      return jsonError(
        503,
        'No page of this origin hosts a webgpu-llm engine: open a page that loads one and calls registerServiceWorker(engine), then retry.',
        'service_unavailable',
        'no_engine_host',
      );
    const body = request.method === 'GET' || request.method === 'HEAD' ? null : await request.arrayBuffer();
    const wire: WireRequest = { url: request.url, method: request.method, headers: [...request.headers], body };
    const { port1, port2 } = new MessageChannel();
    const onAbort = () => port1.postMessage('abort');
    request.signal?.addEventListener('abort', onAbort, { once: true });
    const reply = await new Promise<FromPage | null>((resolve) => {
      // A host page closed before answering would leave the request hanging: check it lives.
      const alive = setInterval(() => {
        void scope.clients.get(host.id).then((c) => {
          if (c) return;
          clearInterval(alive);
          resolve(null);
        });
      }, ALIVE_MS);
      port1.onmessage = (e) => {
        clearInterval(alive);
        resolve(e.data as FromPage);
      };
      host.postMessage({ tag: TAG, type: 'request', request: wire } satisfies ToPage, body ? [port2, body] : [port2]);
    });
    if (!reply) {
      lastHost = null;
      return jsonError(503, 'The page hosting the engine closed before answering; retry to use another host page.', 'service_unavailable', 'engine_host_gone');
    }
    if (reply.type === 'error') return jsonError(500, reply.error.message, 'server_error', reply.error.code);
    if (reply.type !== 'response') return jsonError(500, 'unexpected reply from the engine host page', 'server_error', 'relay_protocol');
    const r = reply.response;
    const nullBody = [101, 103, 204, 205, 304].includes(r.status);
    return new Response(nullBody ? null : r.body, { status: r.status, statusText: r.statusText, headers: r.headers });
  }

  scope.addEventListener('install', () => void scope.skipWaiting());
  scope.addEventListener('activate', (event) => event.waitUntil(scope.clients.claim()));
  scope.addEventListener('fetch', (event) => {
    const url = new URL(event.request.url);
    if (url.origin !== scope.location.origin) return;
    if (url.pathname !== prefix && !url.pathname.startsWith(prefix + '/')) return;
    event.respondWith(relay(event.request));
  });
}
