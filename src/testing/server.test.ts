import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRange, serveDirectory, type StaticServer } from './server';

describe('serveDirectory', () => {
  let dir: string;
  let server: StaticServer;
  const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) & 255);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'serve-'));
    await mkdir(join(dir, 'sub'));
    await writeFile(join(dir, 'sub', 'data.bin'), bytes);
    await writeFile(join(dir, 'config.json'), '{"a":1}');
    await writeFile(join(dir, 'empty.bin'), new Uint8Array(0));
    server = await serveDirectory(dir);
  });
  afterAll(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('serves a whole file with CORS and range headers', async () => {
    const res = await fetch(`${server.url}/sub/data.bin`);
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-expose-headers')).toContain('Content-Range');
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('content-length')).toBe('1000');
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes);
  });

  it('answers HEAD with the size and no body', async () => {
    const res = await fetch(`${server.url}/config.json`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe('7');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect((await res.arrayBuffer()).byteLength).toBe(0);
  });

  it('serves a byte range with 206 and Content-Range', async () => {
    const res = await fetch(`${server.url}/sub/data.bin`, { headers: { Range: 'bytes=10-19' } });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe('bytes 10-19/1000');
    expect(res.headers.get('content-length')).toBe('10');
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes.slice(10, 20));
  });

  it('clamps open and suffix ranges to the file', async () => {
    const open = await fetch(`${server.url}/sub/data.bin`, { headers: { Range: 'bytes=990-' } });
    expect(open.headers.get('content-range')).toBe('bytes 990-999/1000');
    expect(new Uint8Array(await open.arrayBuffer())).toEqual(bytes.slice(990));
    const past = await fetch(`${server.url}/sub/data.bin`, { headers: { Range: 'bytes=995-2000' } });
    expect(past.headers.get('content-range')).toBe('bytes 995-999/1000');
    await past.arrayBuffer();
    const suffix = await fetch(`${server.url}/sub/data.bin`, { headers: { Range: 'bytes=-4' } });
    expect(new Uint8Array(await suffix.arrayBuffer())).toEqual(bytes.slice(996));
  });

  it('answers 416 for a range past the end', async () => {
    const res = await fetch(`${server.url}/sub/data.bin`, { headers: { Range: 'bytes=1000-1001' } });
    expect(res.status).toBe(416);
    expect(res.headers.get('content-range')).toBe('bytes */1000');
    await res.arrayBuffer();
    const empty = await fetch(`${server.url}/empty.bin`, { headers: { Range: 'bytes=0-0' } });
    expect(empty.status).toBe(416);
    await empty.arrayBuffer();
  });

  it('answers 404 for missing files, directories and paths outside the root', async () => {
    for (const path of ['/nope.bin', '/sub', '/../etc/passwd', '/%2e%2e/%2e%2e/etc/passwd']) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status, path).toBe(404);
      await res.arrayBuffer();
    }
  });
});

describe('parseRange', () => {
  it('ignores malformed and multi-range headers', () => {
    expect(parseRange('bytes=5-2', 10)).toBeNull();
    expect(parseRange('bytes=0-1,4-5', 10)).toBeNull();
    expect(parseRange('items=0-1', 10)).toBeNull();
    expect(parseRange('bytes=-', 10)).toBeNull();
  });
  it('rejects a zero-length suffix', () => {
    expect(parseRange('bytes=-0', 10)).toBe('unsatisfiable');
  });
});
