import { mkdtemp, readdir, rm, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { nodeDirCache } from './cache-node';
import { LoadError } from './errors';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'loader-cache-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const bytes = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255);
const A = 'http://host/org/a/resolve/main/model.safetensors';
const B = 'http://host/org/a/resolve/main/config.json';

describe('nodeDirCache', () => {
  it('stores streamed chunks and serves reads by range under the original URL', async () => {
    const cache = nodeDirCache(dir);
    expect(await cache.open(A)).toBeNull();
    const data = bytes(1000);
    await cache.put(A, new Blob([data.subarray(0, 300), data.subarray(300)]).stream(), 1000, { modelKey: 'http://host/org/a' });
    expect(await cache.has(A)).toBe(true);
    const src = (await cache.open(A))!;
    expect(src.name).toBe(A);
    expect(await src.size()).toBe(1000);
    expect(await src.read(250, 100)).toEqual(data.subarray(250, 350));
  });

  it('lists files grouped by model with their sizes, and deletes a model as one', async () => {
    const cache = nodeDirCache(dir);
    await cache.put(A, [bytes(100)], 100, { modelKey: 'm1' });
    await cache.put(B, [bytes(20)], 20, { modelKey: 'm1' });
    await cache.put('http://host/other.gguf', [bytes(7)], 7);
    await cache.putMissing('http://host/org/a/resolve/main/chat_template.jinja', { modelKey: 'm1' });
    const list = await cache.list();
    expect(list.map((m) => [m.modelKey, m.bytes, m.files.length])).toEqual([
      ['http://host/other.gguf', 7, 1],
      ['m1', 120, 2],
    ]);
    expect(list[1].storedAt).toBeGreaterThan(Date.now() - 60_000);
    expect(await cache.delete('m1')).toBe(true);
    expect(await cache.has(A)).toBe(false);
    expect(await cache.has('http://host/org/a/resolve/main/chat_template.jinja')).toBe(false);
    expect((await cache.list()).map((m) => m.modelKey)).toEqual(['http://host/other.gguf']);
    expect(await cache.delete('m1')).toBe(false);
  });

  it('records a missing file as an entry without bytes', async () => {
    const cache = nodeDirCache(dir);
    await cache.putMissing(B);
    expect(await cache.lookup(B)).toMatchObject({ url: B, missing: true, bytes: 0 });
    expect(await cache.open(B)).toBeNull();
  });

  it('leaves nothing, not even a temp file, when fewer bytes arrive than announced', async () => {
    const cache = nodeDirCache(dir);
    const e = await cache.put(A, [bytes(10), bytes(10)], 30).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LoadError);
    expect(e).toMatchObject({ code: 'truncated', file: A });
    expect(await cache.has(A)).toBe(false);
    expect(await readdir(dir)).toEqual([]);
  });

  it('leaves nothing when aborted mid-stream', async () => {
    const cache = nodeDirCache(dir);
    const ac = new AbortController();
    async function* body() {
      yield bytes(10);
      ac.abort();
      yield bytes(10);
    }
    const e = await cache.put(A, body(), 20, { signal: ac.signal }).catch((x: unknown) => x);
    expect(e).toMatchObject({ code: 'aborted' });
    expect(await readdir(dir)).toEqual([]);
  });

  it('stops trusting an entry whose bytes were cut short on disk', async () => {
    const cache = nodeDirCache(dir);
    await cache.put(A, [bytes(100)], 100);
    const bin = (await readdir(dir)).find((f) => f.endsWith('.bin'))!;
    await truncate(join(dir, bin), 50);
    expect(await cache.has(A)).toBe(false);
    expect(await cache.list()).toEqual([]);
  });

  it('replaces an entry on a second put', async () => {
    const cache = nodeDirCache(dir);
    await cache.put(A, [bytes(100, 1)], 100);
    await cache.put(A, [bytes(60, 2)], 60);
    const src = (await cache.open(A))!;
    expect(await src.read(0, 60)).toEqual(bytes(60, 2));
    expect((await readdir(dir)).sort()).toHaveLength(2);
  });
});
