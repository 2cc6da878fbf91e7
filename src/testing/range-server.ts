/**
 * Test-only: a tiny node:http server for this folder's tests, serving in-memory files with
 * single-range `Range` support, and switches to misbehave like real servers do. (The shared
 * static server for other tests is src/testing's serveDirectory.)
 */
import { createServer, type Server } from 'node:http';
import { listenLocal } from './server';

export interface TestServerOptions {
  /** Answer 200 with the whole file to range requests, as some servers do. */
  ignoreRange?: boolean;
  /** Answer HEAD with 405, so the size must come from a ranged GET. */
  noHead?: boolean;
}

export interface TestServer {
  url(path: string): string;
  /** Every request seen: method, path, Range header. */
  requests: Array<{ method: string; path: string; range?: string }>;
  /** Body bytes sent so far. */
  bytesSent: number;
  close(): Promise<void>;
}

export async function startTestServer(files: Record<string, Uint8Array>, opts: TestServerOptions = {}): Promise<TestServer> {
  const state = { requests: [] as TestServer['requests'], bytesSent: 0 };
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname).slice(1);
    const range = req.headers.range;
    state.requests.push({ method: req.method ?? 'GET', path, range });
    const body = files[path];
    if (!body) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
      return;
    }
    if (req.method === 'HEAD') {
      if (opts.noHead) res.writeHead(405).end();
      else res.writeHead(200, { 'Content-Length': body.length, 'Accept-Ranges': 'bytes' }).end();
      return;
    }
    const m = /^bytes=(\d+)-(\d*)$/.exec(range ?? '');
    if (!m || opts.ignoreRange) {
      state.bytesSent += body.length;
      res.writeHead(200, { 'Content-Length': body.length }).end(body);
      return;
    }
    const start = Number(m[1]);
    const end = Math.min(m[2] ? Number(m[2]) : body.length - 1, body.length - 1);
    if (start >= body.length) {
      res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }).end();
      return;
    }
    const part = body.subarray(start, end + 1);
    state.bytesSent += part.length;
    res.writeHead(206, { 'Content-Length': part.length, 'Content-Range': `bytes ${start}-${end}/${body.length}` }).end(part);
  });
  const local = await listenLocal(server);
  return {
    url: (path) => `${local.url}/${path}`,
    get requests() {
      return state.requests;
    },
    get bytesSent() {
      return state.bytesSent;
    },
    close: local.close,
  };
}
