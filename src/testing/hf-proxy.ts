/**
 * Test-only (Node): an HTTP proxy in front of a static server that logs every request, so a test
 * can prove a load touched (or did not touch) the network, and that can misbehave like real
 * servers: ignore Range, cut a body short, answer with a page of its own.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { listenLocal } from './server';

export interface ProxyRequest {
  method: string;
  path: string;
  range?: string;
}

export interface ProxyOptions {
  /** Strip `Range` before forwarding, so the upstream answers 200 with the whole file. */
  ignoreRange?: boolean;
  /** Send only this many body bytes of `path`, then drop the connection. */
  cutAfter?: (path: string) => number | undefined;
  /** Answer `path` here instead of forwarding. */
  respond?: (path: string) => { status: number; headers?: Record<string, string>; body?: string } | undefined;
}

export interface CountingProxy {
  url: string;
  requests: ProxyRequest[];
  options: ProxyOptions;
  close(): Promise<void>;
}

export async function startCountingProxy(upstream: string, options: ProxyOptions = {}): Promise<CountingProxy> {
  const requests: ProxyRequest[] = [];
  const proxy: CountingProxy = { url: '', requests, options, close: async () => {} };

  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    requests.push({ method: req.method ?? 'GET', path, range: req.headers.range });
    const own = proxy.options.respond?.(path);
    if (own) {
      res.writeHead(own.status, { 'Content-Length': Buffer.byteLength(own.body ?? ''), ...own.headers });
      res.end(own.body ?? '');
      return;
    }
    const headers: IncomingHttpHeaders = { ...req.headers };
    delete headers.host;
    if (proxy.options.ignoreRange) delete headers.range;
    const up = httpRequest(upstream + (req.url ?? '/'), { method: req.method, headers }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      const cut = proxy.options.cutAfter?.(path);
      if (cut === undefined) {
        upRes.pipe(res);
        return;
      }
      let sent = 0;
      upRes.on('data', (chunk: Buffer) => {
        if (sent >= cut) return;
        const part = chunk.subarray(0, cut - sent);
        sent += part.length;
        res.write(part);
        if (sent >= cut) {
          upRes.destroy();
          // Flush what was written, then drop the connection mid-body.
          res.socket?.end(() => res.socket?.destroy());
        }
      });
      upRes.on('end', () => res.end());
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  const { url, close } = await listenLocal(server);
  proxy.url = url;
  proxy.close = close;
  return proxy;
}
