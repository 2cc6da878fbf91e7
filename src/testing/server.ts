/**
 * A static file server for tests: serves a directory over real HTTP on 127.0.0.1 with HEAD,
 * single byte ranges and CORS, so loaders are exercised the way a browser would fetch a model.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, resolve, sep } from 'node:path';

export interface StaticServer {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:40123`. */
  url: string;
  close(): Promise<void>;
}

const CONTENT_TYPES: Record<string, string> = {
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.jinja': 'text/plain; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  // Module scripts and workers load only with a JavaScript type (the scratch apps of e2e/apps).
  '.js': 'text/javascript',
};

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Headers': 'Range, Content-Type',
  'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS',
  'Access-Control-Expose-Headers': 'Content-Length, Content-Range, Accept-Ranges',
};

export async function serveDirectory(dir: string): Promise<StaticServer> {
  const root = resolve(dir);
  const server = createServer((req, res) => {
    handle(root, req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, String(err));
      else res.destroy();
    });
  });
  return listenLocal(server);
}

/**
 * Starts a test server on 127.0.0.1 at a free port. `close()` also ends open connections:
 * keep-alive sockets would otherwise hold it open until they time out.
 */
export async function listenLocal(server: Server): Promise<StaticServer> {
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => ok());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((ok, fail) => {
        server.close((err) => (err ? fail(err) : ok()));
        server.closeAllConnections();
      }),
  };
}

async function handle(root: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = req.method ?? 'GET';
  if (method === 'OPTIONS') return send(res, 204);
  if (method !== 'GET' && method !== 'HEAD') return send(res, 405, `method ${method} not allowed`, { Allow: 'GET, HEAD, OPTIONS' });

  let path: string;
  try {
    path = decodeURIComponent(new URL(req.url ?? '/', 'http://localhost').pathname);
  } catch {
    return send(res, 400, 'bad URL');
  }
  const file = resolve(root, '.' + path);
  if (file !== root && !file.startsWith(root + sep)) return send(res, 404, 'not found');
  const info = await stat(file).catch(() => null);
  if (!info || !info.isFile()) return send(res, 404, `not found: ${path}`);

  const size = info.size;
  const headers: Record<string, string | number> = {
    ...CORS,
    'Accept-Ranges': 'bytes',
    'Content-Type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream',
    'Last-Modified': info.mtime.toUTCString(),
  };
  let start = 0;
  let end = size - 1;
  let status = 200;
  const range = req.headers.range;
  if (range !== undefined) {
    const parsed = parseRange(range, size);
    if (parsed === 'unsatisfiable') return send(res, 416, 'range not satisfiable', { 'Content-Range': `bytes */${size}` });
    if (parsed) {
      [start, end] = parsed;
      status = 206;
      headers['Content-Range'] = `bytes ${start}-${end}/${size}`;
    }
  }
  headers['Content-Length'] = end - start + 1;
  res.writeHead(status, headers);
  if (method === 'HEAD' || end < start) return void res.end();
  const stream = createReadStream(file, { start, end });
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

/**
 * One `bytes=a-b`, `bytes=a-` or `bytes=-n` range, clamped to the file. Returns null to ignore
 * the header (malformed or multi-range: a plain 200 is allowed) and 'unsatisfiable' for 416.
 */
export function parseRange(header: string, size: number): [number, number] | null | 'unsatisfiable' {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] !== '' && m[2] !== '' && Number(m[2]) < Number(m[1])) return null;
  if (size === 0) return 'unsatisfiable';
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'unsatisfiable';
    return [Math.max(0, size - n), size - 1];
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return 'unsatisfiable';
  return [start, end];
}

function send(res: ServerResponse, status: number, body = '', extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...CORS, 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), ...extra });
  res.end(body);
}
