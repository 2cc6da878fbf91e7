import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobSource, fileSource, httpSource, memorySource, type ByteSource } from './source';
import { startTestServer, type TestServer } from '../testing/range-server';
import { FormatError } from './types';

const bytes = new Uint8Array(5000).map((_, i) => (i * 31 + 7) & 0xff);

/** The same checks for every kind of source. */
async function checkSource(src: ByteSource): Promise<void> {
  expect(await src.size()).toBe(bytes.length);
  expect(await src.read(0, 10)).toEqual(bytes.subarray(0, 10));
  expect(await src.read(1234, 2000)).toEqual(bytes.subarray(1234, 3234));
  expect(await src.read(4990, 10)).toEqual(bytes.subarray(4990));
  expect((await src.read(100, 0)).length).toBe(0);
  const err = await src.read(4995, 10).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FormatError);
  expect(err).toMatchObject({ code: 'truncated', file: src.name });
}

describe('memorySource, blobSource and fileSource', () => {
  it('memorySource reads exact ranges and rejects reads past the end', async () => {
    await checkSource(memorySource(bytes, 'mem.bin'));
  });

  it('blobSource reads exact ranges and takes a File name', async () => {
    await checkSource(blobSource(new Blob([bytes])));
    expect(blobSource(new File([bytes], 'model.gguf')).name).toBe('model.gguf');
  });

  it('fileSource reads a local file and names a missing one in its error', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'formats-src-'));
    try {
      const path = join(dir, 'data.bin');
      await writeFile(path, bytes);
      await checkSource(fileSource(path));
      const missing = fileSource(join(dir, 'nope.bin'));
      await expect(missing.size()).rejects.toMatchObject({ code: 'io', file: join(dir, 'nope.bin') });
      await expect(missing.read(0, 1)).rejects.toMatchObject({ code: 'io' });
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});

describe('httpSource against a local server', () => {
  let server: TestServer;
  let lazy: TestServer;
  let headless: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ 'a.bin': bytes });
    lazy = await startTestServer({ 'a.bin': bytes }, { ignoreRange: true });
    headless = await startTestServer({ 'a.bin': bytes }, { noHead: true });
  });
  afterAll(async () => {
    await Promise.all([server.close(), lazy.close(), headless.close()]);
  });

  it('reads with Range requests and gets the size from HEAD', async () => {
    await checkSource(httpSource(server.url('a.bin')));
    expect(server.requests.some((r) => r.method === 'HEAD')).toBe(true);
    expect(server.requests.some((r) => r.range === 'bytes=1234-3233')).toBe(true);
  });

  it('gets the size from Content-Range when HEAD is refused', async () => {
    const src = httpSource(headless.url('a.bin'));
    expect(await src.size()).toBe(bytes.length);
    expect(await src.read(10, 5)).toEqual(bytes.subarray(10, 15));
  });

  it('falls back to full responses when the server ignores Range, and remembers it', async () => {
    const src = httpSource(lazy.url('a.bin'));
    expect(await src.read(100, 50)).toEqual(bytes.subarray(100, 150));
    const before = lazy.requests.length;
    // The whole (small) file is now cached: later reads need no request.
    expect(await src.read(4000, 1000)).toEqual(bytes.subarray(4000, 5000));
    expect(lazy.requests.length).toBe(before);
    expect(await src.size()).toBe(bytes.length);
    await checkSource(httpSource(lazy.url('a.bin')));
  });

  it('streams only the needed window of a file larger than the prefix cache when ranges are ignored', async () => {
    const src = httpSource(lazy.url('a.bin'), undefined, { prefixCacheBytes: 1000 });
    expect(await src.read(4000, 500)).toEqual(bytes.subarray(4000, 4500));
    expect(await src.read(100, 50)).toEqual(bytes.subarray(100, 150)); // now bytes 0..150 are cached
    const before = lazy.requests.length;
    expect(await src.read(10, 20)).toEqual(bytes.subarray(10, 30));
    expect(lazy.requests.length).toBe(before);
    expect(await src.read(900, 100)).toEqual(bytes.subarray(900, 1000));
    expect(lazy.requests.length).toBe(before + 1);
  });

  it('reports HTTP errors with the URL and the status', async () => {
    const url = server.url('missing.bin');
    const src = httpSource(url);
    const err = await src.read(0, 4).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FormatError);
    expect(err).toMatchObject({ code: 'http', file: url, status: 404 });
    expect((err as Error).message).toContain('404');
    await expect(src.size()).rejects.toMatchObject({ code: 'http', status: 404 });
  });

  it('reports a refused connection as an http error naming the URL', async () => {
    const url = 'http://127.0.0.1:1/none.bin';
    await expect(httpSource(url).read(0, 1)).rejects.toMatchObject({ code: 'http', file: url });
  });

  it('passes caller headers along with the Range header', async () => {
    const src = httpSource(server.url('a.bin'), { headers: { 'X-Test': 'yes' } });
    expect(await src.read(1, 2)).toEqual(bytes.subarray(1, 3));
  });
});
