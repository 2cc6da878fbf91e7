/**
 * The paged KV cache's bookkeeping on the CPU: one pool of pages for every sequence, each
 * sequence's page table, and a reference count per page. The GPU side is one K and one V buffer
 * per layer, `[numPages, pageSize, nKv, headDim]`; a token at position p of a sequence lives in
 * page `table[p / pageSize]` at offset `p % pageSize`.
 *
 * A page may be shared: the prefix cache (./prefix-cache.ts) holds full pages that sequences with
 * the same prompt prefix `adopt` instead of recomputing. A page is free only when no sequence
 * references it and the prefix cache does not hold it; cached pages nobody references are
 * reclaimed through `reclaim` (the prefix cache's LRU eviction) when the free list runs dry.
 * Shared pages are always full, and a sequence only writes at positions past its length, so a
 * shared page is never written again.
 */
import { KvCacheFullError } from './errors';

export { KvCacheFullError };

/** Who can give pages back when the free list is empty (the prefix cache evicting what no one uses). */
export interface PageReclaimer {
  /** Frees up to `n` cached pages no sequence uses into the pool (through `KvPages.uncache`); returns how many it freed. */
  reclaim(n: number): number;
}

export class KvPages {
  private readonly free: number[] = [];
  private readonly tables = new Map<number, number[]>();
  private readonly lengths = new Map<number, number>();
  /** Sequences referencing each page. */
  private readonly refs: Uint32Array;
  /** Whether the prefix cache holds each page. */
  private readonly cachedFlag: Uint8Array;
  private reclaimer: PageReclaimer | null = null;
  /** Cached pages no sequence references: what the reclaimer can free. */
  private idleCached = 0;

  constructor(
    readonly numPages: number,
    readonly pageSize: number,
  ) {
    this.refs = new Uint32Array(numPages);
    this.cachedFlag = new Uint8Array(numPages);
    // Pop from the end: hand out low page ids first (nicer to read in tests and dumps).
    for (let p = numPages - 1; p >= 0; p--) this.free.push(p);
  }

  /** Lets a prefix cache give back its unreferenced pages when the pool runs dry. */
  setReclaimer(r: PageReclaimer): void {
    this.reclaimer = r;
  }

  /** Pages on the free list (not counting cached pages that could be reclaimed). */
  get freePages(): number {
    return this.free.length;
  }

  /** Pages an allocation can get now: free ones plus cached ones no sequence references. */
  get availablePages(): number {
    return this.free.length + (this.reclaimer ? this.idleCached : 0);
  }

  /** References to `page` held by sequences. */
  refCount(page: number): number {
    return this.refs[page]!;
  }

  /** Pages needed to hold `tokens` more tokens for `seq` (0 when they fit in its last page). */
  pagesNeeded(seq: number, tokens: number): number {
    const len = this.lengths.get(seq) ?? 0;
    const have = this.tables.get(seq)?.length ?? 0;
    return Math.max(0, Math.ceil((len + tokens) / this.pageSize) - have);
  }

  /**
   * Reserves room for `tokens` new tokens of `seq` and returns their slots
   * (page × pageSize + offset). Throws `KvCacheFullError` without changing anything if the pages
   * are not there, even after reclaiming cached pages.
   */
  append(seq: number, tokens: number, slots: Uint32Array | number[] = new Array(tokens)): Uint32Array | number[] {
    const needed = this.pagesNeeded(seq, tokens);
    if (needed > this.free.length && this.reclaimer) this.reclaimer.reclaim(needed - this.free.length);
    if (needed > this.free.length) throw new KvCacheFullError(needed, this.free.length, this.pageSize);
    let table = this.tables.get(seq);
    if (!table) this.tables.set(seq, (table = []));
    for (let i = 0; i < needed; i++) {
      const page = this.free.pop()!;
      this.refs[page] = 1;
      table.push(page);
    }
    const start = this.lengths.get(seq) ?? 0;
    for (let i = 0; i < tokens; i++) {
      const pos = start + i;
      slots[i] = table[Math.floor(pos / this.pageSize)]! * this.pageSize + (pos % this.pageSize);
    }
    this.lengths.set(seq, start + tokens);
    return slots;
  }

  /**
   * Starts `seq` (which must hold nothing) on shared full pages: its first `pages.length ×
   * pageSize` tokens are theirs. Each page gains a reference.
   */
  adopt(seq: number, pages: readonly number[]): void {
    if (this.length(seq) !== 0) throw new Error(`sequence ${seq} already holds ${this.length(seq)} tokens`);
    for (const p of pages) if (this.refs[p]!++ === 0 && this.cachedFlag[p]) this.idleCached--;
    this.tables.set(seq, [...pages]);
    this.lengths.set(seq, pages.length * this.pageSize);
  }

  /** Forgets the tail of a sequence past `length` (e.g. a prompt that failed mid-way), dropping whole pages. */
  truncate(seq: number, length: number): void {
    const table = this.tables.get(seq);
    if (!table) return;
    const keep = Math.ceil(length / this.pageSize);
    while (table.length > keep) this.drop(table.pop()!);
    this.lengths.set(seq, Math.min(length, this.lengths.get(seq) ?? 0));
  }

  release(seq: number): void {
    this.truncate(seq, 0);
    this.tables.delete(seq);
    this.lengths.delete(seq);
  }

  length(seq: number): number {
    return this.lengths.get(seq) ?? 0;
  }

  table(seq: number): readonly number[] {
    return this.tables.get(seq) ?? [];
  }

  /** The prefix cache now holds `page` (it stays allocated when its sequences let go). */
  markCached(page: number): void {
    if (this.cachedFlag[page]) return;
    this.cachedFlag[page] = 1;
    if (this.refs[page] === 0) this.idleCached++;
  }

  /** The prefix cache let go of `page`: it is freed if no sequence references it. */
  uncache(page: number): void {
    if (!this.cachedFlag[page]) return;
    this.cachedFlag[page] = 0;
    if (this.refs[page] === 0) {
      this.idleCached--;
      this.free.push(page);
    }
  }

  isCached(page: number): boolean {
    return this.cachedFlag[page] === 1;
  }

  /** Pages by state: referenced by a sequence, held only by the prefix cache, free. */
  get stats(): { total: number; used: number; cached: number; free: number } {
    let used = 0;
    let cached = 0;
    for (let p = 0; p < this.numPages; p++) {
      if (this.refs[p]! > 0) used++;
      else if (this.cachedFlag[p]) cached++;
    }
    return { total: this.numPages, used, cached, free: this.free.length };
  }

  private drop(page: number): void {
    const left = --this.refs[page]!;
    if (left > 0) return;
    if (this.cachedFlag[page]) this.idleCached++;
    else this.free.push(page);
  }
}
