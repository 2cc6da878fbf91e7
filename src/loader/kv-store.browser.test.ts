/**
 * The OPFS KV page store (./kv-store-opfs.ts) in Chromium: pages written whole and read back, the
 * budget kept by removing the least recently used, a new store (a reload) finding the pages, and
 * deleting a model's pages by its label.
 */
import { describe, expect, it } from 'vitest';
import { deleteOpfsKvPages, opfsKvStore } from './kv-store-opfs';

describe('opfsKvStore', () => {
  it('keeps pages within its budget, least recently used out first, across a new store', async () => {
    const root = `test-kv-${crypto.randomUUID()}`;
    const page = (v: number) => new Uint8Array(100).fill(v);
    const first = opfsKvStore(root, 350);
    for (const [n, v] of [['m/a', 1], ['m/b', 2], ['m/c', 3]] as const) await first.write(n, page(v));
    expect(await first.read('m/a')).toEqual(page(1)); // a used again: b is the oldest
    await first.write('m/d', page(4));
    expect(['m/a', 'm/b', 'm/c', 'm/d'].map((n) => first.has(n))).toEqual([true, false, true, true]);
    expect(await first.read('m/b')).toBeNull();

    const second = opfsKvStore(root, 350);
    await second.open();
    expect(['m/a', 'm/b', 'm/c', 'm/d'].map((n) => second.has(n))).toEqual([true, false, true, true]);
    expect(await second.read('m/d')).toEqual(page(4));

    await second.label('m', `hf:org/${root}`);
    expect(await deleteOpfsKvPages(`hf:org/${root}`, root)).toBe(true);
    expect(await opfsKvStore(root, 350).read('m/a')).toBeNull();
    await (await navigator.storage.getDirectory()).removeEntry(root, { recursive: true });
  });
});
