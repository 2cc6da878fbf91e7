/**
 * The paged KV cache's bookkeeping on the CPU: which pages each sequence owns. The GPU side is one
 * K and one V buffer per layer, `[numPages, pageSize, nKv, headDim]`; a token at position p of a
 * sequence lives in page `table[p / pageSize]` at offset `p % pageSize`.
 */
import { KvCacheFullError } from './errors';

export { KvCacheFullError };
export class KvPages {
  private readonly free: number[] = [];
  private readonly tables = new Map<number, number[]>();
  private readonly lengths = new Map<number, number>();

  constructor(
    readonly numPages: number,
    readonly pageSize: number,
  ) {
    // Pop from the end: hand out low page ids first (nicer to read in tests and dumps).
    for (let p = numPages - 1; p >= 0; p--) this.free.push(p);
  }

  get freePages(): number {
    return this.free.length;
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
   * are not there.
   */
  append(seq: number, tokens: number, slots: Uint32Array | number[] = new Array(tokens)): Uint32Array | number[] {
    const needed = this.pagesNeeded(seq, tokens);
    if (needed > this.free.length) throw new KvCacheFullError(needed, this.free.length, this.pageSize);
    let table = this.tables.get(seq);
    if (!table) this.tables.set(seq, (table = []));
    for (let i = 0; i < needed; i++) table.push(this.free.pop()!);
    const start = this.lengths.get(seq) ?? 0;
    for (let i = 0; i < tokens; i++) {
      const pos = start + i;
      slots[i] = table[Math.floor(pos / this.pageSize)]! * this.pageSize + (pos % this.pageSize);
    }
    this.lengths.set(seq, start + tokens);
    return slots;
  }

  /** Forgets the tail of a sequence past `length` (e.g. a prompt that failed mid-way), freeing whole pages. */
  truncate(seq: number, length: number): void {
    const table = this.tables.get(seq);
    if (!table) return;
    const keep = Math.ceil(length / this.pageSize);
    while (table.length > keep) this.free.push(table.pop()!);
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
}
