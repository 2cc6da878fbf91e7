/**
 * A persisted KV page's file (./kv-page-file.ts) and the Node store (../loader/kv-store-node.ts):
 * a file is used only for exactly the page it names, and the store stays within its budget by
 * removing the least recently used pages. The engine across restarts: ./batch.test.ts.
 */
import { mkdtemp, readdir, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteKvPages, nodeKvStore } from '../loader/kv-store-node';
import { decodePageFile, encodePageFile, pageName, type PageKey } from './kv-page-file';

const key: PageKey = { model: 'm1', namespace: '', pageSize: 4, ids: [5, 6, 7, 8, 9, 10, 11, 12] };
const payload = Uint8Array.from({ length: 64 }, (_, i) => i);

describe('KV page files', () => {
  it('gives the payload back only for the page it was written for', async () => {
    const file = await encodePageFile(key, payload);
    expect(await decodePageFile(file, key, 64)).toEqual({ payload });
    expect(await decodePageFile(file, { ...key, model: 'm2' }, 64)).toEqual({ refused: 'another model, precision, adapter or page size' });
    expect(await decodePageFile(file, { ...key, namespace: 'lora:a' }, 64)).toEqual({ refused: 'another model, precision, adapter or page size' });
    expect(await decodePageFile(file, { ...key, ids: [1, 6, 7, 8, 9, 10, 11, 12] }, 64)).toEqual({ refused: 'another token prefix' });
    expect(await decodePageFile(file, key, 32)).toEqual({ refused: 'another prefix length or page size in bytes' });
    expect(await decodePageFile(file.slice(0, file.length - 1), key, 64)).toEqual({ refused: 'checksum mismatch (corrupt or truncated)' });
    expect(await decodePageFile(file.slice(0, 20), key, 64)).toEqual({ refused: 'truncated' });
    const flipped = file.slice();
    flipped[40]! ^= 1;
    expect(await decodePageFile(flipped, key, 64)).toEqual({ refused: 'checksum mismatch (corrupt or truncated)' });
    expect(await decodePageFile(new TextEncoder().encode('{"not": "a page file at all, but long enough"}') as Uint8Array<ArrayBuffer>, key, 64)).toEqual({ refused: 'not a KV page file' });
  });

  it('names a page by its whole prefix, model and namespace', async () => {
    const a = await pageName(key);
    expect(a).toMatch(/^m1\/[0-9a-f]{32}$/);
    expect(await pageName({ ...key, ids: [0, ...key.ids.slice(1)] })).not.toBe(a);
    expect(await pageName({ ...key, namespace: 'x' })).not.toBe(a);
    expect(await pageName({ ...key })).toBe(a);
  });
});

describe('the Node KV store', () => {
  let dir: string;
  beforeAll(async () => void (dir = await mkdtemp(join(tmpdir(), 'kv-store-'))));
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('keeps within its budget by removing the least recently used pages, also after a restart', async () => {
    const page = new Uint8Array(100);
    const first = nodeKvStore(dir, 350);
    for (const n of ['m/a', 'm/b', 'm/c']) await first.write(n, page);
    await first.read('m/a'); // a is used again: b is now the oldest
    await first.write('m/d', page);
    expect(['m/a', 'm/b', 'm/c', 'm/d'].map((n) => first.has(n))).toEqual([true, false, true, true]);
    expect((await readdir(join(dir, 'm'))).sort()).toEqual(['a.kv', 'c.kv', 'd.kv']);
    // A new process finds the pages and their order by the files' times.
    await utimes(join(dir, 'm', 'c.kv'), new Date(1000), new Date(1000));
    const second = nodeKvStore(dir, 350);
    await second.open();
    expect(second.has('m/a')).toBe(true);
    await second.write('m/e', page);
    expect(['m/a', 'm/c', 'm/d', 'm/e'].map((n) => second.has(n))).toEqual([true, false, true, true]);
    expect(await second.read('m/c')).toBeNull();
  });

  it('removes a deleted model’s pages, found by the model key they were labelled with', async () => {
    const store = nodeKvStore(dir);
    await store.write('k1/p', new Uint8Array(8));
    await store.write('k2/p', new Uint8Array(8));
    await store.label('k1', 'hf:org/one');
    await store.label('k2', 'hf:org/two');
    expect(await deleteKvPages(dir, 'hf:org/one')).toBe(true);
    expect(await deleteKvPages(dir, 'hf:org/three')).toBe(false);
    expect((await readdir(dir)).filter((d) => d.startsWith('k')).sort()).toEqual(['k2']);
  });
});
