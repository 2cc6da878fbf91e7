/**
 * Continuous batching: one loop drives every sequence in flight. Each step is one ragged batch
 * (./step.ts): a token for every running sequence that decodes, plus prefill chunks of those still
 * reading their prompt, under a per-step token budget, so a long prompt never stalls the streams
 * already running. New requests join at the next step; ended or aborted ones leave at once.
 *
 * Memory is one pool of KV pages (./kv-pages.ts) with a prefix cache over it (./prefix-cache.ts):
 * a new sequence adopts the cached pages of its prompt's longest cached prefix, and its own full
 * pages enter the cache as it fills them. When a step needs more pages than the pool can give, the
 * newest running sequence is preempted: its pages go back (its full ones stay cached, so it
 * usually finds them again), and it waits at the head of the queue to be fed its prompt and output
 * again. Sampling depends only on (seed, tokens so far), so its output is what it would have been.
 *
 * The loop is pipelined: step n+1 is planned and submitted before step n's tokens are read back.
 * A sequence whose token step n drew on the GPU is fed that token by step n+1 on the GPU (FEED,
 * src/kernels/feed.ts); its id reaches the CPU one step later. A sequence that step n ended
 * (a stop id) is known only then: the token step n+1 drew for it is discarded, never delivered.
 * Sequences whose draws must come back first (a grammar, a CPU sampler) skip a step instead.
 *
 * A hybrid model's recurrent layers keep one state per slot (./state-snapshots.ts): with a
 * snapshot pool, a prefill chunk ends at the prompt's last page boundary, the state there (and at
 * each page boundary after, while it decodes: only the latest kept) is copied into a snapshot
 * that belongs to the prefix-cache node of the page ending there, and a new sequence adopts
 * cached pages only up to the deepest node holding one, whose state its slot starts from.
 *
 * The scheduler knows nothing of the GPU: a `BatchRunner` (the engine) runs the steps.
 */
import { nextTask } from './backend-util';
import type { KvPages } from './kv-pages';
import { PrefixCache, type PrefixCursor, type PrefixNode } from './prefix-cache';
import type { SeqStep, Sequence } from './sequence';
import type { SnapshotPool } from './state-snapshots';
import type { GeneratedToken } from './types';

/** One sequence's part of a step. */
export interface BatchItem {
  readonly seq: Sequence;
  /** Its slot: the KV sequence id and the row of per-sequence GPU state, fixed while it runs. */
  readonly slot: number;
  readonly work: SeqStep;
  /** A hybrid's state snapshot copied into the slot before the step (a cached prefix's state). */
  readonly loadState?: number;
  /** A snapshot the slot's state is copied into after the step (its tokens end at a page boundary). */
  readonly saveState?: number;
  /** Set by the runner when this sequence alone failed (e.g. its grammar refused a token). */
  error?: unknown;
}

export interface BatchRunner {
  /** A sequence takes `slot` (again, after a preemption): set its per-slot state. */
  place(seq: Sequence, slot: number): void;
  /**
   * Records and submits one step: reserves each item's KV (the scheduler made sure the pages are
   * there), feeds its tokens and advances it. Resolves to the step's completion, which the
   * scheduler awaits after submitting the next step: it waits for the step's results and records
   * the tokens it drew (skipping sequences that already ended). Throws only when the whole step
   * failed; one sequence's failure goes in its item's `error`.
   */
  submit(items: BatchItem[]): Promise<StepCompletion>;
  /** Whether a whole step's failure is the loss of the GPU device (its sequences then wait for `recover` instead of ending). */
  isLoss?(error: unknown): boolean;
  /**
   * After a loss: resolves once steps run again on a new device (every K/V gone), or rejects with
   * the error every sequence then ends with.
   */
  recover?(): Promise<void>;
}

/** Waits for a submitted step's results and records them into its sequences. */
export type StepCompletion = () => Promise<void>;

/** A submitted step not yet completed. */
interface InFlight {
  items: BatchItem[];
  complete: StepCompletion;
}

export interface SchedulerLimits {
  /** Sequences in one step (and slots). */
  maxSeqs: number;
  /** Rows of one step (default maxSeqs): a decoding sequence's token, and one per proposal it verifies (rows beyond maxSeqs are for those alone). */
  rows?: number;
  /** Prompt tokens in one step, over all its prefill chunks (a step holds up to this plus one decode token per sequence). */
  prefillTokens: number;
}

/** The tokens of one sequence, from the loop to its consumer (`generate`'s iterator). */
class TokenStream {
  private readonly queue: GeneratedToken[] = [];
  private wake: (() => void) | null = null;
  private closed = false;
  private error: unknown = null;

  push(t: GeneratedToken): void {
    this.queue.push(t);
    this.notify();
  }

  close(error?: unknown): void {
    this.closed = true;
    if (error !== undefined) this.error = error;
    this.notify();
  }

  /** The next token, or null once the sequence ended (throws its error, if it failed). */
  async next(): Promise<GeneratedToken | null> {
    for (;;) {
      if (this.queue.length) return this.queue.shift()!;
      if (this.error !== null) throw this.error;
      if (this.closed) return null;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}

interface Running {
  seq: Sequence;
  slot: number;
  stream: TokenStream;
  /** Where its pages stop in the prefix cache. */
  cursor: PrefixCursor;
  /** Whether the prefix cache may serve its prompt (the API's cache_prompt). */
  useCache: boolean;
  /** State snapshots its steps took (`saveState`) whose page is not in the prefix cache yet: `end` tokens each. */
  snaps: Array<{ end: number; snap: number }>;
  /** The node holding the last snapshot it took past its prompt's (the one before it is dropped: only the latest is kept). */
  moving: PrefixNode | null;
}

interface Waiting {
  seq: Sequence;
  stream: TokenStream;
  useCache: boolean;
}

export class Scheduler {
  readonly prefix: PrefixCache;
  private readonly waiting: Waiting[] = [];
  /** In admission order: the newest is preempted first. */
  private running: Running[] = [];
  private readonly freeSlots: number[] = [];
  private loop: Promise<void> | null = null;
  private stopped: Error | null = null;
  /** The device was lost: the loop sets every sequence aside and waits for the runner's recovery (`recoverLoss`). */
  private lossSeen = false;
  /** Steps run, and preemptions (tests and the bench read them). */
  readonly counters = { steps: 0, preemptions: 0, batchedRows: 0 };

  constructor(
    private readonly kv: KvPages,
    private readonly runner: BatchRunner,
    readonly limits: SchedulerLimits,
    /** A hybrid model's state snapshots (absent: attention only, or hybrid prefixes never served). */
    readonly snapshots: SnapshotPool | null = null,
  ) {
    this.prefix = new PrefixCache(kv);
    if (snapshots) this.prefix.onRemoved = (node) => snapshots.dropNode(node);
    for (let s = limits.maxSeqs - 1; s >= 0; s--) this.freeSlots.push(s);
  }

  /** Sequences admitted and not yet ended. */
  get runningCount(): number {
    return this.running.length;
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Queues a sequence; its tokens arrive through the returned iterator. Ending it early: `seq.end('abort')`. */
  submit(seq: Sequence, useCache: boolean): { next(): Promise<GeneratedToken | null> } {
    if (this.stopped) throw this.stopped;
    const stream = new TokenStream();
    this.waiting.push({ seq, stream, useCache });
    this.wakeUp();
    return stream;
  }

  /** The loop looks again (a sequence was aborted, or a new one queued). */
  wakeUp(): void {
    this.loop ??= this.run().finally(() => {
      this.loop = null;
      // A sequence queued while the loop completed its last step in flight: it found the loop still running.
      if (!this.stopped && this.waiting.length) this.wakeUp();
    });
  }

  /** The GPU device was lost (the runner's recovery says so at once, before a step fails). */
  deviceLost(): void {
    if (!this.runner.recover) return;
    this.lossSeen = true;
    this.wakeUp();
  }

  /** Ends every sequence with `error` and refuses new ones; resolves when the loop has stopped. */
  async stop(error: Error): Promise<void> {
    this.stopped = error;
    this.wakeUp();
    await this.loop;
    for (const w of this.waiting.splice(0)) this.drop(w, error);
    for (const r of this.running.splice(0)) this.leave(r, error);
  }

  private async run(): Promise<void> {
    // The step submitted and not yet completed: the next one is submitted before it completes.
    let inFlight: InFlight | null = null;
    try {
      while (!this.stopped) {
        if (this.lossSeen) {
          // The step still in flight ran after the lost one (or on the lost device): its draws
          // follow draws never recorded, so it is dropped, not completed.
          inFlight = null;
          await this.recoverLoss();
          continue;
        }
        this.reap();
        if (!this.waiting.length && !this.running.length) break;
        // A draft model guesses before the step that verifies its guess is planned (time passes: aborts may be due).
        let drafting = this.drafting();
        if (drafting.length && inFlight && this.running.some((r) => r.seq.prepares && !r.seq.ready)) {
          // One draft round for every sequence that drafts (./draft.ts batches them): those whose draws the step in flight reads back join it, not the next round.
          await this.complete(inFlight);
          inFlight = null;
          drafting = this.drafting();
        }
        if (drafting.length) {
          // As many guesses as the step has rows for (none: the draft does not run).
          const room = this.spareRows();
          await Promise.all(drafting.map((seq) => seq.prepare(room)));
          this.reap();
        }
        const items = this.plan(inFlight !== null);
        if (!items?.length) {
          if (inFlight) {
            // Nothing can run before the step in flight is read back (its sequences wait for their
            // tokens, or pages must be freed by preemption, which only happens between steps).
            await this.complete(inFlight);
            inFlight = null;
          } else {
            // Nothing can run this step (a prompt waits for a twin's prefill that is itself waiting): let events in.
            await nextTask();
          }
          continue;
        }
        let next: InFlight;
        try {
          next = { items, complete: await this.runner.submit(items) };
          // Pages this step fills are cached now: a step submitted later runs after it on the GPU.
          for (const item of items) {
            const r = this.running.find((x) => x.seq === item.seq);
            if (r) this.offer(r);
          }
        } catch (e) {
          // The step as a whole failed: every sequence in it ends with the error (the device's loss: they wait for the recovery).
          if (this.runner.isLoss?.(e)) this.lossSeen = true;
          else for (const item of items) item.error ??= e;
          next = { items, complete: async () => {} };
        }
        if (inFlight) await this.complete(inFlight);
        inFlight = next;
        // Between steps: timers, aborts and new requests get their turn.
        await nextTask();
      }
    } finally {
      if (inFlight) await this.complete(inFlight);
    }
  }

  /** Running sequences about to decode whose proposer guesses asynchronously (a draft model): they guess all at once, which a draft engine batches. */
  private drafting(): Sequence[] {
    return this.running.filter((r) => r.seq.prepares && r.seq.ready && r.seq.pending === 1).map((r) => r.seq);
  }

  /** Waits for a step's results and hands them out (`afterStep`). */
  private async complete(step: InFlight): Promise<void> {
    try {
      await step.complete();
    } catch (e) {
      if (this.runner.isLoss?.(e)) {
        // Its sequences wait for the recovery (the loop's next turn), their draws not taken.
        this.lossSeen = true;
        return;
      }
      for (const item of step.items) item.error ??= e;
    }
    this.counters.steps++;
    this.counters.batchedRows += step.items.length;
    for (const item of step.items) this.afterStep(item);
  }

  /** Delivers a step's token, offers new full pages to the prefix cache, and lets ended sequences go. */
  private afterStep(item: BatchItem): void {
    const r = this.running.find((x) => x.seq === item.seq);
    if (!r) return; // it left already (ended a step earlier, aborted or failed): what this step drew for it is dropped
    if (item.error !== undefined) {
      this.leave(r, item.error);
      return;
    }
    for (let token = r.seq.take(); token; token = r.seq.take()) r.stream.push(token);
    // A verify step (speculative decoding): the K/V of proposals past the first miss goes, its pages back in the pool.
    if (item.work.proposed) this.kv.truncate(r.slot, r.seq.kvLength);
    this.offer(r);
    if (r.seq.finish) this.leave(r);
  }

  /** Offers a running sequence's full pages of known tokens to the prefix cache. */
  private offer(r: Running): void {
    r.cursor = this.prefix.extend(r.seq.tokens, this.kv.table(r.slot), r.cursor, r.seq.keyedLength, r.seq.images?.keys);
    if (r.snaps.length) this.attach(r);
  }

  /** Its snapshots whose page is cached now go to that page's node; one past its prompt's replaces the one it took before. */
  private attach(r: Running): void {
    const pool = this.snapshots!;
    const ps = this.kv.pageSize;
    r.snaps = r.snaps.filter(({ end, snap }) => {
      const node = this.prefix.nodeAt(r.cursor, end / ps);
      if (!node) return true;
      if (pool.attach(snap, node) && end > this.boundary(r.seq.promptIds.length)) {
        if (r.moving && r.moving !== node) pool.dropNode(r.moving);
        r.moving = node;
      }
      return false;
    });
  }

  /** The last page boundary before a sequence of `length` tokens' last one: where a repeat of it can resume (its last token is always computed). */
  private boundary(length: number): number {
    const ps = this.kv.pageSize;
    return Math.floor((length - 1) / ps) * ps;
  }

  /** A prefill chunk of `n` tokens from `fed` on, cut to end at the sequence's last page boundary (its state snapshot is taken there). */
  private chunk(seq: Sequence, fed: number, n: number): number {
    if (!this.snapshots) return n;
    const b = this.boundary(seq.tokens.length);
    return fed < b && fed + n > b ? b - fed : n;
  }

  /**
   * A step whose tokens end at a page boundary at or past the sequence's last one (its prompt's,
   * then every page it decodes) copies the state there into a snapshot, if one is free or
   * evictable. Not a verify step: its rows past a miss are rolled back.
   */
  private saveAt(r: Running, work: SeqStep): { saveState?: number } {
    if (!this.snapshots || work.proposed?.length) return {};
    const end = r.seq.kvLength + work.tokens.length;
    if (end % this.kv.pageSize !== 0 || end < this.boundary(r.seq.tokens.length)) return {};
    // The cache holds the state there already (a repeated prompt): no snapshot evicted for a copy of it.
    const { tokens } = r.seq;
    if (end <= tokens.length) {
      const path = this.prefix.path(tokens, end, r.seq.adapter?.key, r.seq.images?.keys);
      if (path.length === end / this.kv.pageSize && this.snapshots.holds(path.at(-1)!)) return {};
    }
    const snap = this.snapshots.take();
    if (snap === null) return {};
    r.snaps.push({ end, snap });
    return { saveState: snap };
  }

  /** A plan given up (null): the snapshots its steps would have saved go back, never written. */
  private abandon(items: readonly BatchItem[]): null {
    for (const { seq, saveState } of items) {
      if (saveState === undefined) continue;
      const r = this.running.find((x) => x.seq === seq)!;
      r.snaps = r.snaps.filter((s) => s.snap !== saveState);
      this.snapshots!.release(saveState);
    }
    return null;
  }

  /** Ends running and waiting sequences that were aborted (or may not sample at all). */
  private reap(): void {
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const w = this.waiting[i]!;
      if (w.seq.checkEnd()) {
        this.waiting.splice(i, 1);
        w.stream.close();
      }
    }
    for (const r of [...this.running]) if (r.seq.checkEnd()) this.leave(r);
  }

  /** A running sequence ends: its full pages stay in the prefix cache (unless it failed), the rest go back to the pool, and what its proposer holds (a draft model's KV slot). */
  private leave(r: Running, error?: unknown): void {
    this.unslot(r, error === undefined);
    r.seq.release(true);
    r.stream.close(error);
  }

  /** A waiting sequence fails (the engine stopped, or its device's recovery failed): what its proposer holds goes too. */
  private drop(w: Waiting, error: unknown): void {
    w.seq.release(true);
    w.stream.close(error);
  }

  /** Takes a sequence out of the running set: its pages go back (its full ones offered to the prefix cache first, when `keep`) and its slot is free. */
  private unslot(r: Running, keep: boolean): void {
    this.running = this.running.filter((x) => x !== r);
    if (keep) this.offer(r);
    // Snapshots of pages that never entered the cache (not keyed yet, or the sequence failed).
    for (const { snap } of r.snaps.splice(0)) this.snapshots!.release(snap);
    this.kv.release(r.slot);
    this.freeSlots.push(r.slot);
  }

  /**
   * After the device was lost (no step in flight): every K/V is gone, so each running sequence
   * goes back to the head of the queue in admission order, to be fed its tokens again, and the
   * prefix cache forgets its pages; then the loop waits for the runner's recovery. If that fails,
   * every sequence ends with its error and no new one is taken.
   */
  private async recoverLoss(): Promise<void> {
    this.lossSeen = false;
    for (const r of this.running.splice(0).reverse()) {
      this.kv.release(r.slot);
      this.freeSlots.push(r.slot);
      r.seq.lose();
      // The draft's KV (on the same device) is gone with its own: it starts over.
      r.seq.release(false);
      this.waiting.unshift({ seq: r.seq, stream: r.stream, useCache: r.useCache });
    }
    this.prefix.clear();
    this.snapshots?.clear();
    try {
      await this.runner.recover!();
    } catch (e) {
      this.stopped = e instanceof Error ? e : new Error(String(e));
      for (const w of this.waiting.splice(0)) this.drop(w, e);
    }
  }

  /** Frees a running sequence's pages and puts it back at the head of the queue, to be fed again. */
  private preempt(r: Running): void {
    this.counters.preemptions++;
    this.unslot(r, true);
    r.seq.restart();
    // What its proposer holds waits with it no more (fed again, it drafts again from the tokens then).
    r.seq.release(false);
    this.waiting.unshift({ seq: r.seq, stream: r.stream, useCache: r.useCache });
  }

  /**
   * Rows no sequence will take (each running one and each that may be admitted takes one): a
   * decoding sequence that speculates verifies up to these many proposals, one row each. The
   * rows beyond maxSeqs (EngineOptions' maxBatch) are always left: a lone sequence speculates.
   */
  private spareRows(): number {
    return (this.limits.rows ?? this.limits.maxSeqs) - this.running.length - Math.min(this.waiting.length, this.freeSlots.length);
  }

  /**
   * This step's batch. Running sequences first, oldest first: a decode token each, or a prefill
   * chunk from what the budget leaves. If the pool cannot hold them, the newest running sequence
   * is preempted (possibly the one being placed); with a step in flight (`pipelined`) the plan is
   * abandoned instead (null): preemption waits until that step completed, when every sequence's
   * tokens are known and its pages may be freed. Then waiting sequences are admitted, oldest
   * first, while a slot, budget and pages are left.
   */
  private plan(pipelined: boolean): BatchItem[] | null {
    // Prefill chunks share the step's prefill budget; every decode token comes on top of it.
    let budget = this.limits.prefillTokens;
    let pages = 0; // pages this batch needs beyond what its sequences hold
    const items: BatchItem[] = [];
    const planned = new Set<Running>();
    let spareRows = this.spareRows();
    // Decoding sequences take one token each before any prefill chunk.
    const order = [...this.running].sort((a, b) => Number(a.seq.pending > 1) - Number(b.seq.pending > 1));
    for (const r of order) {
      const decodes = r.seq.pending === 1;
      if (!this.running.includes(r) || !r.seq.ready || (!decodes && budget === 0)) continue;
      const n = decodes ? 1 : this.chunk(r.seq, r.seq.kvLength, Math.min(r.seq.pending, budget));
      // Its proposals' K/V rows need pages too (rolled back once verified); a prefill chunk that samples may have them.
      const proposed = r.seq.work(n, spareRows).proposed?.length ?? 0;
      let need = this.kv.pagesNeeded(r.slot, n + proposed);
      if (pages + need > this.kv.availablePages && pipelined) return this.abandon(items);
      // Not enough pages: preempt the newest running sequence not yet in this batch (or this one).
      while (pages + need > this.kv.availablePages) {
        const victim = [...this.running].reverse().find((x) => !planned.has(x));
        if (!victim) break;
        this.preempt(victim);
        if (victim === r) break;
        need = this.kv.pagesNeeded(r.slot, n + proposed);
      }
      if (!this.running.includes(r) || pages + need > this.kv.availablePages) continue;
      const work = r.seq.work(n, proposed);
      spareRows -= work.proposed?.length ?? 0;
      items.push({ seq: r.seq, slot: r.slot, work, ...this.saveAt(r, work) });
      planned.add(r);
      pages += need;
      if (!decodes) budget -= work.tokens.length;
    }
    // Admit waiting sequences while slots, budget and pages last.
    for (let i = 0; i < this.waiting.length && budget > 0 && this.freeSlots.length; ) {
      const w = this.waiting[i]!;
      if (this.twinPrefilling(w)) {
        i++;
        continue;
      }
      const { matched, loadState } = this.matchOf(w);
      const cached = matched.length * this.kv.pageSize;
      const left = w.seq.tokens.length - cached;
      const n = left === 1 ? 1 : this.chunk(w.seq, cached, Math.min(left, budget));
      // A prompt prefilled in one step verifies proposals with its first draw (a prediction's first tokens).
      const proposed = n === left ? w.seq.proposals(spareRows).length : 0;
      // Adopting cached pages takes them out of what can be reclaimed.
      const adoptedReclaimable = matched.filter((p) => this.kv.refCount(p) === 0).length;
      const need = Math.ceil((cached + n + proposed) / this.kv.pageSize) - matched.length;
      if (pages + need + adoptedReclaimable > this.kv.availablePages) break; // keep the queue's order
      this.waiting.splice(i, 1);
      const slot = this.freeSlots.pop()!;
      this.kv.adopt(slot, matched);
      w.seq.reuse(cached);
      const r: Running = { seq: w.seq, slot, stream: w.stream, cursor: this.prefix.cursor(w.seq.adapter?.key), useCache: w.useCache, snaps: [], moving: null };
      r.cursor = this.prefix.extend(w.seq.tokens, matched, r.cursor, cached, w.seq.images?.keys);
      this.running.push(r);
      this.runner.place(w.seq, slot);
      const work = w.seq.work(n, proposed);
      spareRows -= work.proposed?.length ?? 0;
      items.push({ seq: w.seq, slot, work, ...(loadState !== undefined ? { loadState } : {}), ...this.saveAt(r, work) });
      planned.add(r);
      pages += need;
      if (n > 1) budget -= work.tokens.length;
    }
    return items;
  }

  /**
   * The cached pages a waiting sequence adopts: its prompt's longest cached prefix of whole pages;
   * with recurrent layers, only up to the deepest page holding a state snapshot, which its slot
   * starts from (`loadState`).
   */
  private matchOf(w: Waiting): { matched: number[]; loadState?: number } {
    if (!w.useCache) return { matched: [] };
    const args = [w.seq.tokens, w.seq.tokens.length - 1, w.seq.adapter?.key, w.seq.images?.keys] as const;
    const pool = this.snapshots;
    if (!pool) return { matched: this.prefix.match(...args) };
    const path = this.prefix.path(...args);
    let d = path.length;
    while (d > 0 && !pool.holds(path[d - 1]!)) d--;
    return d ? { matched: path.slice(0, d).map((n) => n.page), loadState: pool.of(path[d - 1]!)! } : { matched: [] };
  }

  /**
   * Whether a waiting sequence should wait for a running one that is still computing pages of the
   * same prompt (the `n` choices of one request, or the prompts of a batch that share a prefix):
   * admitted once those pages are cached, it adopts them instead of computing them twice.
   */
  private twinPrefilling(w: Waiting): boolean {
    if (!w.useCache) return false;
    const ps = this.kv.pageSize;
    const ids = w.seq.tokens;
    for (const r of this.running) {
      if (r.seq.adapter?.key !== w.seq.adapter?.key) continue; // its pages are another adapter's
      const fed = r.seq.kvLength;
      const theirs = r.seq.tokens;
      if (fed >= r.seq.promptIds.length) continue; // done with its prompt: what it shares is cached
      let common = 0;
      const max = Math.min(ids.length - 1, theirs.length);
      const [mine, its] = [w.seq.images?.keys, r.seq.images?.keys];
      while (common < max && ids[common] === theirs[common] && mine?.get(common) === its?.get(common)) common++;
      // It will compute at least one whole page we could adopt (a hybrid: with the state snapshot at its prompt's last page boundary).
      const b = this.boundary(r.seq.tokens.length);
      if (this.snapshots ? fed < b && b <= common : Math.floor(common / ps) > Math.floor(fed / ps)) return true;
    }
    return false;
  }
}
