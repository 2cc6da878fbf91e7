/** The MTP proposer's bookkeeping with a stand-in head: which rows reach the head, when it guesses and how many, its slot. */
import { describe, expect, it } from 'vitest';
import { MtpProposer, type MtpGuesser } from './mtp-proposer';
import { proposerFor } from './proposers';

/** A head that records what it is fed (`rows`: from the GPU, as the buffer's row index) and guesses the last fed token + 100, + 101, … (k of them). */
function fakeHead(slots = 1) {
  const fed: { slot: number; hidden?: number[]; rows?: number; next: number[]; k?: number }[] = [];
  const free = Array.from({ length: slots }, (_, i) => i);
  const head: MtpGuesser & { released: number[] } = {
    released: [],
    acquire: () => free.shift() ?? -1,
    guess: async (slot, hidden, next, k) => {
      fed.push({ slot, hidden: [...hidden], next: [...next], ...(k === 1 ? {} : { k }) });
      return Array.from({ length: k }, (_, j) => next[next.length - 1]! + 100 + j);
    },
    feed: (slot, _rows, at, next) => void fed.push({ slot, rows: at, next: [...next] }),
    release(slot) {
      head.released.push(slot);
      free.push(slot);
    },
  };
  return { head, fed };
}

describe('MtpProposer', () => {
  it('feeds each recorded token with its row hidden state once, guesses only for the ids it prepared, frees its slot', async () => {
    const { head, fed } = fakeHead();
    const p = proposerFor({ mtp: { k: 1, head } })!;
    expect(p).toBeInstanceOf(MtpProposer);
    const ids = [1, 2, 3];
    // Nothing recorded yet (the prefill step): no rows, no guess.
    await p.prepare!(ids, 0, 4);
    expect(p.propose(ids, 0, 4)).toEqual([]);
    p.observe!(Float32Array.of(0.5, 1), 7, 2);
    ids.push(7);
    await p.prepare!(ids, 1, 4);
    expect(p.propose(ids, 1, 4)).toEqual([107]);
    expect(p.propose(ids, 1, 0)).toEqual([]);
    // A verify step recorded two tokens: both rows go in one run, in order; a second prepare feeds nothing again.
    p.observe!(Float32Array.of(2, 3), 107, 3);
    p.observe!(Float32Array.of(4, 5), 9, 4);
    ids.push(107, 9);
    await p.prepare!(ids, 3, 4);
    await p.prepare!(ids, 3, 4);
    expect(fed).toEqual([
      { slot: 0, hidden: [0.5, 1], next: [7] },
      { slot: 0, hidden: [2, 3, 4, 5], next: [107, 9] },
    ]);
    expect(p.propose(ids, 3, 4)).toEqual([109]);
    // Stale: ids moved on without a prepare.
    expect(p.propose([...ids, 5], 4, 4)).toEqual([]);
    p.close!();
    expect(head.released).toEqual([0]);
  });

  it('stops guessing after a token recorded without a hidden state, and when the head has no free slot', async () => {
    const { head } = fakeHead(1);
    const a = new MtpProposer(head);
    a.observe(undefined, 4, 1);
    a.observe(Float32Array.of(1), 5, 2);
    await a.prepare([1, 4, 5]);
    expect(a.propose([1, 4, 5], 2, 1)).toEqual([]);
    const b = new MtpProposer(head);
    const c = new MtpProposer(head);
    b.observe(Float32Array.of(1), 5, 0);
    c.observe(Float32Array.of(1), 6, 0);
    await b.prepare([5]);
    await c.prepare([6]);
    expect([b.propose([5], 1, 1), c.propose([6], 1, 1)]).toEqual([[105], []]);
  });

  it('asks the head for k chained guesses, fewer where the step has less room, and hands out at most max', async () => {
    const { head, fed } = fakeHead();
    const p = proposerFor({ mtp: { k: 3, head } })!;
    p.observe!(Float32Array.of(1), 7, 0);
    await p.prepare!([1, 7], 1, 8);
    expect(p.propose([1, 7], 1, 8)).toEqual([107, 108, 109]);
    expect(p.propose([1, 7], 1, 2)).toEqual([107, 108]);
    p.observe!(Float32Array.of(2), 9, 1);
    await p.prepare!([1, 7, 9], 2, 2);
    expect(p.propose([1, 7, 9], 2, 2)).toEqual([109, 110]);
    expect(fed.map((f) => f.k)).toEqual([3, 2]);
  });

  it("takes a prompt's known rows from the GPU at their positions, once: chunk by chunk, after a cached prefix, again after a preemption", async () => {
    const rows = {} as GPUBuffer;
    const { head, fed } = fakeHead();
    const p = new MtpProposer(head);
    // A prompt of 9 whose first 4 are cached: its chunks (positions 4..6 at step row 2, then 7..8 at row 0, the last sampling).
    p.observeRows(rows, 2, 4, [16, 17, 18]);
    p.observeRows(rows, 0, 7, [19]);
    p.observe(Float32Array.of(1), 50, 8);
    // Preempted, then fed again from its cached prefix: rows 4..8 are held (8 pending), 9 pairs with the next draw.
    p.observeRows(rows, 1, 4, [16, 17, 18, 19, 50]);
    p.observe(Float32Array.of(2), 51, 9);
    const ids = [...Array.from({ length: 9 }, (_, i) => 11 + i), 50, 51];
    await p.prepare(ids);
    expect(fed).toEqual([
      { slot: 0, rows: 2, next: [16, 17, 18] },
      { slot: 0, rows: 0, next: [19] },
      { slot: 0, hidden: [1, 2], next: [50, 51] },
    ]);
    expect(p.propose(ids, 2, 1)).toEqual([151]);
    // Suspended (preempted): the slot goes back, and the rows fed again reach the head again from the first.
    p.suspend();
    expect(head.released).toEqual([0]);
    p.observeRows(rows, 0, 8, [50, 51]);
    expect(fed.at(-1)).toEqual({ slot: 0, rows: 0, next: [50, 51] });
    expect(p.propose(ids, 2, 1)).toEqual([]);
    // Rows overlapping the held ones: only the new ones go, from their row in the buffer.
    const { head: h2, fed: fed2 } = fakeHead();
    const r = new MtpProposer(h2);
    r.observeRows(rows, 0, 0, [1, 2]);
    r.observeRows(rows, 3, 1, [2, 3, 4]);
    expect(fed2).toEqual([
      { slot: 0, rows: 0, next: [1, 2] },
      { slot: 0, rows: 4, next: [3, 4] },
    ]);
    // A gap before a row (the head would miss a position), or rows behind pending ones: no more guesses.
    const q = new MtpProposer(fakeHead().head);
    q.observeRows(rows, 0, 0, [1]);
    q.observe(Float32Array.of(1), 9, 2);
    await q.prepare([0, 1, 5, 9]);
    expect(q.propose([0, 1, 5, 9], 1, 1)).toEqual([]);
    const s = new MtpProposer(fakeHead().head);
    s.observe(Float32Array.of(1), 9, 3);
    s.observeRows(rows, 0, 4, [1]);
    await s.prepare([0, 0, 0, 0, 9]);
    expect(s.propose([0, 0, 0, 0, 9], 1, 1)).toEqual([]);
  });
});
