/**
 * The browser caches (OPFS and the Cache API) in Chromium: the same contract as the Node cache,
 * and a whole model load from the fixture server that the second time makes no fetch at all.
 */
import { afterEach, describe, expect, inject, it, vi } from 'vitest';
import { cacheApiCache } from './cache-api';
import { opfsCache } from './cache-opfs';
import type { ModelCache } from './cache';
import { openModelWithCache } from './open';
import type { LoadProgress } from './progress';

const base = () => inject('fixturesURL');
const bytes = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255);

const stores: Array<[string, () => ModelCache]> = [
  ['opfsCache', () => opfsCache(`test-${crypto.randomUUID()}`)],
  ['cacheApiCache', () => cacheApiCache(`test-${crypto.randomUUID()}`)],
];

afterEach(() => {
  vi.restoreAllMocks();
});

describe.each(stores)('%s', (_, make) => {
  const A = 'http://example.test/org/a/resolve/main/model.safetensors';

  it('stores a stream and reads ranges of it under the original URL', async () => {
    const cache = make();
    expect(await cache.open(A)).toBeNull();
    const data = bytes(5000);
    await cache.put(A, new Blob([data.subarray(0, 1234), data.subarray(1234)]).stream(), 5000, { modelKey: 'm' });
    expect(await cache.lookup(A)).toMatchObject({ url: A, modelKey: 'm', bytes: 5000 });
    const src = (await cache.open(A))!;
    expect(src.name).toBe(A);
    expect(await src.size()).toBe(5000);
    expect(await src.read(4000, 1000)).toEqual(data.subarray(4000));
  });

  it('lists models with their sizes and deletes one as a whole', async () => {
    const cache = make();
    await cache.put(A, [bytes(100)], 100, { modelKey: 'm1' });
    await cache.put('http://example.test/m1/config.json', [bytes(10)], 10, { modelKey: 'm1' });
    await cache.putMissing('http://example.test/m1/chat_template.jinja', { modelKey: 'm1' });
    await cache.put('http://example.test/m2.gguf', [bytes(3)], undefined, { modelKey: 'm2' });
    expect((await cache.list()).map((m) => [m.modelKey, m.bytes, m.files.length])).toEqual([
      ['m1', 110, 2],
      ['m2', 3, 1],
    ]);
    expect(await cache.lookup('http://example.test/m1/chat_template.jinja')).toMatchObject({ missing: true });
    expect(await cache.delete('m1')).toBe(true);
    expect(await cache.has(A)).toBe(false);
    expect(await cache.has('http://example.test/m1/chat_template.jinja')).toBe(false);
    expect((await cache.list()).map((m) => m.modelKey)).toEqual(['m2']);
  });

  it('keeps nothing from a write that is aborted or comes up short', async () => {
    const cache = make();
    const ac = new AbortController();
    async function* body() {
      yield bytes(10);
      ac.abort();
      yield bytes(10);
    }
    expect(await cache.put(A, body(), 20, { signal: ac.signal }).catch((e: unknown) => e)).toMatchObject({ code: 'aborted' });
    expect(await cache.put(A, [bytes(10)], 20).catch((e: unknown) => e)).toMatchObject({ code: 'truncated', file: A });
    expect(await cache.has(A)).toBe(false);
    expect(await cache.list()).toEqual([]);
  });

  it('loads a model folder from the fixture server once, then without any fetch', async () => {
    const cache = make();
    const folder = `${base()}/llama-tiny-0/hf-F16`;
    const events: LoadProgress[] = [];
    const first = await openModelWithCache(folder, { cache, onProgress: (p) => events.push(p) });
    expect(first.config.arch).toBe('llama');
    const last = events.filter((e) => e.phase === 'download').at(-1)!;
    expect(last.totalBytesDone).toBe(last.totalBytes);

    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    const second = await openModelWithCache(folder, { cache });
    expect(fetchSpy).not.toHaveBeenCalled();
    expect(await second.readTensor('blk.0.ffn_down.weight')).toEqual(await first.readTensor('blk.0.ffn_down.weight'));
    const [model] = await cache.list();
    expect(model.modelKey).toBe(folder);
    expect(model.files.some((f) => f.url.endsWith('/model.safetensors'))).toBe(true);
    expect(await cache.delete(folder)).toBe(true);
  });
});
