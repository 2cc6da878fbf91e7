import { describe, expect, it } from 'vitest';
import { KvCacheFullError, KvPages } from './kv-pages';

describe('KvPages', () => {
  it('hands out slots page by page and reuses freed pages', () => {
    const kv = new KvPages(4, 4);
    expect([...kv.append(1, 6)]).toEqual([0, 1, 2, 3, 4, 5]);
    expect([...kv.append(2, 2)]).toEqual([8, 9]);
    expect([...kv.append(1, 3)]).toEqual([6, 7, 12]);
    expect(kv.freePages).toBe(0);
    expect(kv.table(1)).toEqual([0, 1, 3]);
    kv.release(1);
    expect(kv.freePages).toBe(3);
    expect(kv.length(1)).toBe(0);
    expect([...kv.append(2, 3)]).toEqual([10, 11, 0]); // page 0 was freed last-in, first-out
  });

  it('refuses an append that does not fit, leaving the state unchanged', () => {
    const kv = new KvPages(2, 4);
    kv.append(1, 5);
    expect(() => kv.append(2, 5)).toThrow(KvCacheFullError);
    expect(kv.length(2)).toBe(0);
    expect(kv.freePages).toBe(0);
    expect(kv.pagesNeeded(1, 3)).toBe(0);
    expect(kv.pagesNeeded(1, 4)).toBe(1);
  });

  it('truncates a sequence back to a length and frees whole pages', () => {
    const kv = new KvPages(3, 4);
    kv.append(7, 10);
    kv.truncate(7, 4);
    expect(kv.length(7)).toBe(4);
    expect(kv.freePages).toBe(2);
    expect([...kv.append(7, 1)]).toEqual([kv.table(7)[1]! * 4]);
  });
});
