import { describe, expect, it } from 'vitest';
import { KvPages } from './kv-pages';
import { PrefixCache } from './prefix-cache';

const ids = (n: number, base = 0) => Array.from({ length: n }, (_, i) => base + i);

describe('PrefixCache', () => {
  it('matches whole cached pages of a prompt, leaving its last token to compute', () => {
    const kv = new KvPages(8, 4);
    const cache = new PrefixCache(kv);
    kv.append(1, 10);
    cache.extend(ids(10), kv.table(1), cache.cursor());
    expect(cache.size).toBe(2); // two full pages of the ten tokens
    expect(cache.match(ids(12), 11)).toEqual(kv.table(1).slice(0, 2));
    // A prompt of exactly 8 tokens keeps its last one to compute: only the first page.
    expect(cache.match(ids(8), 7)).toEqual(kv.table(1).slice(0, 1));
    // Another prefix: nothing.
    expect(cache.match(ids(12, 1), 11)).toEqual([]);
  });

  it('keys image-token positions by their marks (an image’s content hash): the same image matches, another never does', () => {
    const kv = new KvPages(8, 4);
    const cache = new PrefixCache(kv);
    kv.append(1, 8);
    // Ids 0..7 with an "image" at positions 2..5 (the same id for every image, as <image> is).
    const prompt = [0, 1, 9, 9, 9, 9, 6, 7];
    const marks = (hash: string) => new Map([2, 3, 4, 5].map((p, i) => [p, `${hash}:${i}`]));
    cache.extend(prompt, kv.table(1), cache.cursor(), 8, marks('a'));
    expect(cache.match([...prompt, 8], 8, '', marks('a'))).toEqual(kv.table(1));
    expect(cache.match([...prompt, 8], 8, '', marks('b'))).toEqual([]);
    expect(cache.match([...prompt, 8], 8)).toEqual([]);
  });

  it('keeps each adapter’s pages in its own namespace, and drops a namespace whole', () => {
    const kv = new KvPages(8, 4);
    const cache = new PrefixCache(kv);
    kv.append(1, 8);
    kv.append(2, 8);
    cache.extend(ids(8), kv.table(1), cache.cursor());
    cache.extend(ids(8), kv.table(2), cache.cursor('lora-a#1'));
    // The same tokens under the base and under an adapter are two pairs of pages.
    expect(cache.size).toBe(4);
    expect(cache.match(ids(9), 8)).toEqual(kv.table(1));
    expect(cache.match(ids(9), 8, 'lora-a#1')).toEqual(kv.table(2));
    expect(cache.match(ids(9), 8, 'lora-b#2')).toEqual([]);
    kv.release(1);
    kv.release(2);
    expect(kv.stats).toEqual({ total: 8, used: 0, cached: 4, free: 4 });
    cache.drop('lora-a#1');
    expect(cache.size).toBe(2);
    expect(kv.stats).toEqual({ total: 8, used: 0, cached: 2, free: 6 });
    expect(cache.match(ids(9), 8, 'lora-a#1')).toEqual([]);
    expect(cache.match(ids(9), 8)).toHaveLength(2);
  });

  it('keeps a finished sequence’s pages cached, shares them by reference and frees its partial page', () => {
    const kv = new KvPages(6, 4);
    const cache = new PrefixCache(kv);
    kv.append(1, 10);
    const cursor = cache.extend(ids(10), kv.table(1), cache.cursor());
    expect(cursor.pages).toBe(2);
    kv.release(1);
    expect(kv.stats).toEqual({ total: 6, used: 0, cached: 2, free: 4 });
    const pages = cache.match(ids(9), 8);
    kv.adopt(2, pages);
    expect(kv.length(2)).toBe(8);
    expect(kv.stats).toEqual({ total: 6, used: 2, cached: 0, free: 4 });
    expect(kv.availablePages).toBe(4);
    kv.release(2);
    expect(kv.availablePages).toBe(6);
  });

  it('evicts the least recently used unreferenced leaves when the pool runs dry, never a page in use', () => {
    const kv = new KvPages(4, 2);
    const cache = new PrefixCache(kv);
    // A: pages [a0 a1]; B: [b0]; both finished, B used last.
    kv.append(1, 4);
    cache.extend(ids(4, 100), kv.table(1), cache.cursor());
    kv.release(1);
    kv.append(2, 2);
    cache.extend(ids(2, 200), kv.table(2), cache.cursor());
    kv.release(2);
    // C reuses B's page and holds it.
    kv.adopt(3, cache.match(ids(3, 200), 2));
    expect(kv.freePages).toBe(1);
    expect(kv.availablePages).toBe(3);
    // D needs 3 pages: the free one, then A's leaf, then A's root page; never B's (C holds it).
    const held = kv.table(3)[0]!;
    kv.append(4, 6);
    expect(kv.table(4)).not.toContain(held);
    expect(cache.match(ids(4, 100), 4)).toEqual([]);
    expect(cache.match(ids(3, 200), 2)).toEqual([held]);
    expect(() => kv.append(5, 1)).toThrow();
  });

  it('keeps its own page when a twin sequence computed the same prefix, and offers pages from a cursor', () => {
    const kv = new KvPages(8, 2);
    const cache = new PrefixCache(kv);
    kv.append(1, 4);
    kv.append(2, 4);
    let c1 = cache.extend(ids(4), kv.table(1), cache.cursor(), 2);
    expect(c1.pages).toBe(1);
    c1 = cache.extend(ids(4), kv.table(1), c1);
    const c2 = cache.extend(ids(4), kv.table(2), cache.cursor());
    expect(c2.pages).toBe(2);
    expect(cache.size).toBe(2);
    expect(cache.match(ids(5), 4)).toEqual(kv.table(1));
    // Sequence 2's copies stay private: released, they go straight back to the pool.
    kv.release(2);
    expect(kv.freePages).toBe(6);
  });

  it('reclaims an idle page whose continuation a sequence holds (its path runs through a copy of it): the page and its idle subtree go, the held pages stay the sequence’s', () => {
    const kv = new KvPages(6, 2);
    const cache = new PrefixCache(kv);
    kv.append(1, 4);
    cache.extend(ids(4), kv.table(1), cache.cursor());
    kv.release(1); // both pages idle in the tree
    // Sequence 2 adopts the first page, computes its own second (a hybrid's match stopped there), then a third.
    const [first] = cache.match(ids(7), 6);
    kv.adopt(2, [first!]);
    kv.append(2, 4);
    let c2 = cache.extend(ids(6), kv.table(2), cache.cursor());
    expect([c2.pages, cache.size]).toEqual([3, 3]);
    // The tree's second page is idle, under a referenced first, over a referenced third: no idle leaf.
    expect(kv.availablePages).toBe(3);
    expect(cache.reclaim(3)).toBe(1);
    expect([kv.freePages, cache.size]).toEqual([3, 1]);
    // Its next offer walks the tree again and enters its own pages.
    c2 = cache.extend(ids(6), kv.table(2), c2);
    expect(cache.match(ids(7), 6)).toEqual(kv.table(2));
  });
});
