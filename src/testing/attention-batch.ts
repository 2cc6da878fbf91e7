/**
 * Test data for the attention kernels: random dense K/V histories for a few sequences, scattered
 * into a paged cache through a shuffled block table, plus the step buffers of one ragged batch.
 */
import { random, shuffled } from './kernel-helpers';

export interface SeqSpec {
  /** Context length after the step. */
  len: number;
  /** This step's tokens: the last `fresh` positions of the sequence. */
  fresh: number;
}

export interface PagedBatch {
  T: number;
  q: Float32Array; // [T, nHeads, headDim]
  positions: Uint32Array; // [T]
  tokenSeq: Uint32Array; // [T]
  lastToken: Uint32Array; // [S]
  counts: Uint32Array; // { T, S, 0, 0 }
  blockTable: Uint32Array; // [maxSeqs, maxPagesPerSeq]
  kCache: Float32Array; // [numPages, pageSize, nKv, headDim]; slots no sequence owns (or no token sees) hold NaN
  vCache: Float32Array;
  keys: Float32Array[]; // dense histories, [len, nKv, headDim]
  values: Float32Array[];
}

export function makePagedBatch(o: {
  seqs: SeqSpec[];
  nHeads: number;
  nKv: number;
  headDim: number;
  pageSize: number;
  maxPagesPerSeq: number;
  seed: number;
  /** Spread of q: large enough that the softmax is far from uniform. */
  qScale?: number;
  /**
   * A sliding window: the cache slots of keys that none of a sequence's fresh tokens sees are
   * overwritten with NaN, so a kernel that reads them (rather than skipping them) shows it.
   */
  window?: number;
}): PagedBatch {
  const { seqs, nHeads, nKv, headDim, pageSize, maxPagesPerSeq, seed } = o;
  const row = nKv * headDim;
  const pagesOf = seqs.map((s) => Math.ceil(s.len / pageSize));
  const numPages = pagesOf.reduce((a, b) => a + b, 0) + 2; // two pages nobody owns
  const pool = shuffled(numPages, seed);
  const kCache = new Float32Array(numPages * pageSize * row).fill(NaN);
  const vCache = new Float32Array(numPages * pageSize * row).fill(NaN);
  const blockTable = new Uint32Array(seqs.length * maxPagesPerSeq);
  const keys: Float32Array[] = [];
  const values: Float32Array[] = [];
  const positions: number[] = [];
  const tokenSeq: number[] = [];
  const lastToken: number[] = [];
  seqs.forEach((s, i) => {
    if (pagesOf[i]! > maxPagesPerSeq) throw new RangeError(`sequence ${i} needs ${pagesOf[i]} pages, more than ${maxPagesPerSeq}`);
    const k = random(s.len * row, seed * 31 + 2 * i + 1);
    const v = random(s.len * row, seed * 31 + 2 * i + 2);
    keys.push(k);
    values.push(v);
    const table = pool.splice(0, pagesOf[i]!);
    blockTable.set(table, i * maxPagesPerSeq);
    for (let j = 0; j < s.len; j++) {
      const slot = table[Math.floor(j / pageSize)]! * pageSize + (j % pageSize);
      kCache.set(k.subarray(j * row, (j + 1) * row), slot * row);
      vCache.set(v.subarray(j * row, (j + 1) * row), slot * row);
    }
    for (let j = s.len - s.fresh; j < s.len; j++) {
      positions.push(j);
      tokenSeq.push(i);
    }
    // The earliest fresh token sees keys from (its position + 1 - window) on; none sees before.
    const hidden = o.window ? Math.max(0, s.len - s.fresh + 1 - o.window) : 0;
    for (let j = 0; j < hidden; j++) {
      const slot = table[Math.floor(j / pageSize)]! * pageSize + (j % pageSize);
      kCache.fill(NaN, slot * row, (slot + 1) * row);
      vCache.fill(NaN, slot * row, (slot + 1) * row);
    }
    lastToken.push(positions.length - 1);
  });
  const T = positions.length;
  return {
    T,
    q: random(T * nHeads * headDim, seed * 31, o.qScale ?? 4),
    positions: Uint32Array.from(positions),
    tokenSeq: Uint32Array.from(tokenSeq),
    lastToken: Uint32Array.from(lastToken),
    counts: Uint32Array.from([T, seqs.length, 0, 0]),
    blockTable,
    kCache,
    vCache,
    keys,
    values,
  };
}
