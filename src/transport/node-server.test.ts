/**
 * The HTTP layer against hostile requests (issue #19): the API key is checked on the headers
 * before any of the body is read, bodies are counted against the cap as they arrive, malformed
 * request targets and methods get 4xx, and nesting, pattern and prompt limits answer 400 naming
 * the limit. A real loopback server around the app with the reference backend.
 */
import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../api/app';
import { loadRig, type Rig } from '../testing/api-rig';
import { listen, type Listener } from './node-server';

let rig: Rig;
let open: Listener;
let keyed: Listener;
const KEY = 'secret';
const CAP = 1024 * 1024;

beforeAll(async () => {
  rig = await loadRig();
  const backends = [rig.qwen.backend];
  open = await listen(createApp({ backends, limits: { maxBodyBytes: CAP } }).handle, { port: 0 });
  keyed = await listen(createApp({ backends, apiKey: KEY, limits: { maxBodyBytes: CAP } }).handle, { port: 0 });
});
afterAll(async () => {
  await open?.close();
  await keyed?.close();
  await rig?.close();
});

/** Sends raw bytes, resolves with the status line's code (the server may answer before we finish). */
function raw(url: string, text: string): Promise<{ status: number; head: string }> {
  const { port } = new URL(url);
  return new Promise((ok, fail) => {
    const s = connect(Number(port), '127.0.0.1', () => s.write(text));
    let got = '';
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        s.destroy();
        ok({ status: Number(got.split(' ')[1]), head: got.slice(0, got.indexOf('\r\n\r\n')) });
      }
    });
    s.on('error', fail);
  });
}

/**
 * POSTs a chunked body of `total` bytes, writing a chunk only after the previous one drained, and
 * stops writing once the reply has come: resolves with the status and how much was sent by then.
 */
function trickle(url: string, path: string, headers: Record<string, string>, total: number): Promise<{ status: number; sent: number }> {
  return new Promise((ok, fail) => {
    let sent = 0;
    let answered = false;
    const req = httpRequest(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers } }, (res) => {
      answered = true;
      res.resume();
      ok({ status: res.statusCode ?? 0, sent });
      req.destroy();
    });
    req.on('error', (e) => (answered ? undefined : fail(e)));
    const chunk = Buffer.alloc(8 * 1024, 0x20);
    const pump = () => {
      while (!answered && sent < total) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', () => setTimeout(pump, 1));
      }
      if (!answered) req.end();
    };
    req.write('{"model":"qwen3-tiny","prompt":"');
    setTimeout(pump, 20);
  });
}

const post = (url: string, path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body });

describe('the HTTP layer under hostile requests', () => {
  it('refuses a request without the API key before reading its body', async () => {
    // 64 MiB would be read whole if the key were checked after the body.
    const r = await trickle(keyed.url, '/v1/completions', {}, 64 * 1024 * 1024);
    expect(r.status).toBe(401);
    expect(r.sent).toBeLessThan(8 * 1024 * 1024);
  });

  it('answers 413 as soon as a chunked body passes the cap, with the key', async () => {
    const r = await trickle(keyed.url, '/v1/completions', { Authorization: `Bearer ${KEY}` }, 64 * 1024 * 1024);
    expect(r.status).toBe(413);
    expect(r.sent).toBeLessThan(8 * 1024 * 1024);
  });

  it('answers 413 to a declared Content-Length past the cap', async () => {
    const r = await raw(open.url, `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${CAP + 1}\r\n\r\n{`);
    expect(r.status).toBe(413);
  });

  it('answers 400 to absolute-form targets with a bad host and to bad percent-encoding', async () => {
    expect((await raw(open.url, 'GET http://%zz/v1/models HTTP/1.1\r\nHost: x\r\n\r\n')).status).toBe(400);
    expect((await raw(open.url, 'GET http://[::1/v1/models HTTP/1.1\r\nHost: x\r\n\r\n')).status).toBe(400);
    expect((await fetch(`${open.url}/v1/models/%ZZ`)).status).toBe(400);
  });

  it('answers 405 with Allow to TRACE and to a wrong method on a known path', async () => {
    const t = await raw(open.url, 'TRACE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(t.status).toBe(405);
    expect(t.head).toMatch(/\r\nallow: GET, POST, DELETE, OPTIONS/i);
    const d = await fetch(`${open.url}/v1/chat/completions`, { method: 'DELETE' });
    expect(d.status).toBe(405);
    expect(d.headers.get('allow')).toBe('POST, OPTIONS');
  });

  it('answers 400 naming the limit to JSON nested 100k deep in any field', async () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    for (const [path, body] of [
      ['/v1/chat/completions', `{"model":"qwen3-tiny","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":${deep}}}`],
      ['/v1/completions', `{"model":"qwen3-tiny","prompt":"hi","stop":${deep}}`],
      ['/apply-template', `{"messages":${deep}}`],
    ]) {
      const r = await post(open.url, path, body);
      expect(r.status, path).toBe(400);
      expect((await r.json()).error.code).toBe('json_too_deep');
    }
  });

  it('answers 400 to a stop_regex past the pattern limit and to an invalid one', async () => {
    const big = await post(open.url, '/v1/completions', JSON.stringify({ model: 'qwen3-tiny', prompt: 'hi', stop_regex: ['a'.repeat(40_000)] }));
    expect(big.status).toBe(400);
    expect((await big.json()).error.param).toBe('stop_regex');
  });

  it('refuses a prompt of megabytes by its length, before tokenizing, and then serves the next request', async () => {
    const cap = 8 * 1024 * 1024;
    const server = await listen(createApp({ backends: [rig.qwen.backend], limits: { maxBodyBytes: cap } }).handle, { port: 0 });
    try {
      const r = await post(server.url, '/v1/chat/completions', JSON.stringify({ model: 'qwen3-tiny', messages: [{ role: 'user', content: 'word '.repeat(1_000_000) }] }));
      expect(r.status).toBe(400);
      expect((await r.json()).error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
      const next = await post(server.url, '/v1/completions', JSON.stringify({ model: 'qwen3-tiny', prompt: 'hi', max_tokens: 2 }));
      expect(next.status).toBe(200);
    } finally {
      await server.close();
    }
  });
});
