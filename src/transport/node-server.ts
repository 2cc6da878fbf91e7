/**
 * serve(): a real `node:http` server around the API's `handle(Request)`. Loopback by default.
 * Streamed replies are written chunk by chunk as the engine produces them (no Nagle delay, headers
 * sent at once); a client that disconnects aborts its generation.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { internalsOf } from './internals';
import { createEngine, type NodeEngineOptions } from './node-engine';
import type { EngineHandle, FaultSpec } from './types';
import { toStructured } from './errors';
import { metricsText, METRICS_CONTENT_TYPE } from './metrics';
import type { RequestLimits } from '../api/limits';

export type ServeOptions = ({ engine: EngineHandle; model?: undefined } | ({ engine?: undefined } & NodeEngineOptions)) & {
  /** Default 8080; 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1 (loopback only); `0.0.0.0` to listen on every interface. */
  host?: string;
  /** When set, every request but `/health` and CORS preflights needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Largest request body in bytes (default DEFAULT_LIMITS.maxBodyBytes, 32 MiB); larger ones get a 413. */
  maxBodyBytes?: number;
  /** How long a new structured-output grammar may compile, in ms (default DEFAULT_LIMITS.grammarCompileMs); past it a 400. */
  grammarCompileMs?: number;
  /**
   * `POST /debug/fault` with `{"kind": "device_lost"}` makes the engine's GPU device lost as a
   * driver reset would (tests and operators watching recovery). Answered to loopback clients only,
   * behind the API key when one is set. Default off; a loaded engine must have been created with
   * `faultInjection: true` too.
   */
  faultInjection?: boolean;
  /** Fetch `http(s)` image URLs in chat image parts (default false: a server should not fetch what a client names unless told to). */
  allowImageUrls?: boolean;
};

export interface Server {
  /** `http://host:port`, e.g. for `baseURL: url + '/v1'`. */
  url: string;
  engine: EngineHandle;
  /** Stops listening, ends open connections, and unloads the engine if serve() loaded it. */
  close(): Promise<void>;
}

/** The API handler; `peer`: the client's address as the socket has it. */
type Handle = (request: Request, peer?: { address?: string }) => Promise<Response>;

/** The API handler with the key check: the engine's own app when it runs in this process. */
function handlerFor(engine: EngineHandle, apiKey: string | undefined, limits: Partial<RequestLimits>): Handle {
  const host = internalsOf(engine)?.host;
  if (host) return host.handler(apiKey, limits);
  // Any other EngineHandle: the same rule as the API app's, in front of its fetch.
  return async (request) => {
    const path = new URL(request.url).pathname;
    if (apiKey !== undefined && request.method !== 'OPTIONS' && !path.endsWith('/health') && request.headers.get('authorization') !== `Bearer ${apiKey}`)
      return Response.json(
        { error: { message: 'Incorrect or missing API key: send "Authorization: Bearer <key>"', type: 'authentication_error', param: null, code: 'invalid_api_key' } },
        { status: 401 },
      );
    return engine.fetch(request);
  };
}

/**
 * The Node request as a fetch `Request` whose body streams from the socket: nothing is read
 * before the app asks (the API key is checked on the headers first) and the app counts the bytes
 * against its body limit as they arrive. Null when the request target is not a valid URL.
 */
function toRequest(req: IncomingMessage, origin: string, signal: AbortSignal): Request | null {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) headers.append(k, one);
  }
  let url: URL;
  try {
    url = new URL(req.url ?? '/', origin);
  } catch {
    return null;
  }
  const body = req.method === 'GET' || req.method === 'HEAD' ? null : (Readable.toWeb(req) as ReadableStream<Uint8Array>);
  return new Request(url, { method: req.method, headers, body, signal, duplex: 'half' } as RequestInit);
}

/** Methods fetch's `Request` refuses to carry (CONNECT, TRACE, TRACK): no route takes them. */
const FORBIDDEN_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);
const ALLOWED = 'GET, POST, DELETE, OPTIONS';

function refusal(status: number, message: string, code: string, headers: Record<string, string> = {}): Response {
  return Response.json({ error: { message, type: 'invalid_request_error', param: null, code } }, { status, headers });
}

async function respond(handle: Handle, req: IncomingMessage, res: ServerResponse, origin: string): Promise<void> {
  const controller = new AbortController();
  // 'close' before the reply finished means the client went away: stop its generation.
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const method = (req.method ?? 'GET').toUpperCase();
  const request = FORBIDDEN_METHODS.has(method) ? null : toRequest(req, origin, controller.signal);
  const response = request
    ? await handle(request, { address: req.socket.remoteAddress })
    : FORBIDDEN_METHODS.has(method)
      ? refusal(405, `${method} is not allowed; use ${ALLOWED}`, 'method_not_allowed', { Allow: ALLOWED })
      : refusal(400, `the request target ${JSON.stringify(req.url)} is not a valid URL`, 'invalid_path');
  const headers = [...response.headers].flat();
  if (response.statusText) res.writeHead(response.status, response.statusText, headers);
  else res.writeHead(response.status, headers);
  if (!response.body) return void res.end();
  res.flushHeaders();
  const reader = response.body.getReader();
  controller.signal.addEventListener('abort', () => void reader.cancel().catch(() => {}), { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || res.destroyed) break;
      // Respect the socket's backpressure, but never wait on a client that left.
      if (!res.write(value)) await new Promise<void>((ok) => (res.once('drain', ok), res.once('close', ok)));
    }
  } catch {
    // cancelled because the client left; nothing to answer
  } finally {
    if (!res.destroyed) res.end();
  }
}

/** A listening `node:http` server around any `handle(Request)`. */
export interface Listener {
  url: string;
  close(): Promise<void>;
}

/** Serves `handle` over HTTP on `host:port` (loopback and 8080 by default). */
export async function listen(handle: Handle, options: { port?: number; host?: string } = {}): Promise<Listener> {
  const host = options.host ?? '127.0.0.1';
  let origin = '';
  const server = createServer((req, res) => {
    respond(handle, req, res, origin).catch((e: unknown) => {
      // handle() never throws; this is a broken request stream or socket.
      if (!res.headersSent) {
        res.writeHead(500, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `server error: ${String(e)}`, type: 'server_error', param: null, code: 'internal_error' } }));
      } else res.destroy();
    });
  });
  server.on('connection', (s) => s.setNoDelay(true));
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(options.port ?? 8080, host, () => {
      server.off('error', fail);
      ok();
    });
  });
  const { port } = server.address() as AddressInfo;
  origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    url: origin,
    async close() {
      const closed = new Promise<void>((ok) => server.close(() => ok()));
      // Keep-alive connections would hold close() open until they time out.
      server.closeAllConnections();
      await closed;
    },
  };
}

/** The fault route's path (ServeOptions.faultInjection). */
export const FAULT_PATH = '/debug/fault';

/** Whether a socket address is this machine (IPv4, IPv6, or IPv4 mapped into IPv6). */
function isLoopback(address: string | undefined): boolean {
  return address !== undefined && (/^(::ffff:)?127\./.test(address) || address === '::1');
}

/**
 * `handle` with `POST /debug/fault` in front (ServeOptions.faultInjection): loopback only, the API
 * key checked by sending the route's 401 through `handle` itself (same rule, same reply).
 */
function withFaultRoute(handle: Handle, engine: EngineHandle, apiKey: string | undefined): Handle {
  return async (request, peer) => {
    if (new URL(request.url).pathname !== FAULT_PATH) return handle(request, peer);
    if (!isLoopback(peer?.address)) return refusal(403, `${FAULT_PATH} answers only clients on this machine (loopback)`, 'forbidden');
    if (apiKey !== undefined && request.headers.get('authorization') !== `Bearer ${apiKey}`)
      return Response.json(
        { error: { message: 'Incorrect or missing API key: send "Authorization: Bearer <key>"', type: 'authentication_error', param: null, code: 'invalid_api_key' } },
        { status: 401 },
      );
    if (request.method !== 'POST') return refusal(405, `${FAULT_PATH} takes POST`, 'method_not_allowed', { Allow: 'POST' });
    let fault: unknown;
    try {
      fault = await request.json();
    } catch {
      return refusal(400, `${FAULT_PATH} wants a JSON body: {"kind": "device_lost"}`, 'invalid_json');
    }
    try {
      await engine.injectFault(fault as FaultSpec);
    } catch (e) {
      const s = toStructured(e);
      return refusal(s.code === 'engine_unloaded' ? 503 : 400, s.message, s.code);
    }
    return Response.json({ injected: (fault as FaultSpec).kind });
  };
}

/** The metrics route's path. */
export const METRICS_PATH = '/metrics';

/**
 * `handle` with `GET /metrics` in front: the engine's stats in Prometheus' text format
 * (./metrics.ts). Open without the API key, as `/health` (and vLLM's `/metrics`): counts only.
 */
function withMetricsRoute(handle: Handle, engine: EngineHandle): Handle {
  return async (request, peer) => {
    if (new URL(request.url).pathname !== METRICS_PATH) return handle(request, peer);
    if (request.method !== 'GET' && request.method !== 'HEAD') return refusal(405, `${METRICS_PATH} takes GET`, 'method_not_allowed', { Allow: 'GET' });
    try {
      return new Response(metricsText(await engine.stats(), engine.info.model), { headers: { 'content-type': METRICS_CONTENT_TYPE } });
    } catch (e) {
      const s = toStructured(e);
      return refusal(s.code === 'engine_unloaded' ? 503 : 500, s.message, s.code);
    }
  };
}

export async function serve(options: ServeOptions): Promise<Server> {
  const owned = !options.engine;
  const engine = options.engine ?? (await createEngine(options as NodeEngineOptions));
  const limits = Object.fromEntries(
    Object.entries({ maxBodyBytes: options.maxBodyBytes, grammarCompileMs: options.grammarCompileMs, remoteImages: options.allowImageUrls ?? false }).filter(([, v]) => v !== undefined),
  );
  const api = handlerFor(engine, options.apiKey, limits);
  const listener = await listen(withMetricsRoute(options.faultInjection ? withFaultRoute(api, engine, options.apiKey) : api, engine), options);
  return {
    url: listener.url,
    engine,
    async close() {
      await listener.close();
      if (owned) await engine.unload();
    },
  };
}
