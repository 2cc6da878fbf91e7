/**
 * A hybrid's prefix cache on the CPU: the snapshot pool's bookkeeping, its GPU copies (against a
 * recording device), and the scheduler against a simulated recurrent model whose per-slot state
 * is a hash chain over every token fed, and whose draws come from that state alone. A sequence
 * resumed from a wrong state (none loaded, or the state at another position or of another
 * prefix) draws other tokens, and each step checks the state it starts from.
 */
import { describe, expect, it } from 'vitest';
import { FEED } from '../kernels/feed';
import { KvPages } from './kv-pages';
import type { LayerCacheKind, LayerCaches } from './layer-cache';
import { Scheduler, type BatchItem, type BatchRunner, type StepCompletion } from './scheduler';
import { Sequence, type SequenceEnv } from './sequence';
import { SnapshotPool, snapshotCount, StateSnapshots } from './state-snapshots';
import type { GenerateRequest, GenerationResult } from './types';
import { GREEDY } from '../testing/sampling';

const VOCAB = 50;
const SEED = 2166136261;
const env: SequenceEnv = { eosIds: [], contextLength: 256, breakers: () => () => false, verifies: false };
const mix = (h: number, t: number) => Math.imul(h ^ t, 16777619) >>> 0;
const chain = (ids: readonly number[]) => ids.reduce(mix, SEED);

/** What a sequence produces alone: each token drawn from the state after every token before it. */
function alone(prompt: readonly number[], n: number): number[] {
  const all = [...prompt];
  for (let i = 0; i < n; i++) all.push(chain(all) % VOCAB);
  return all.slice(prompt.length);
}

/** A recurrent "model": one state per slot, zeroed (SEED) at placement, loaded from and saved to snapshots as the items say. */
class SimulatedRecurrent implements BatchRunner {
  constructor(private readonly kv: KvPages) {}
  readonly state = new Map<number, number>();
  readonly snaps = new Map<number, number>();
  readonly drawn = new Map<number, number>();
  readonly counts = { loads: 0, saves: 0, tokens: 0 };
  place(_seq: Sequence, slot: number): void {
    this.state.set(slot, SEED);
  }
  async submit(items: BatchItem[]): Promise<StepCompletion> {
    const draws: Array<[Sequence, number]> = [];
    for (const { seq, slot, work, loadState, saveState } of items) {
      if (loadState !== undefined) {
        this.state.set(slot, this.snaps.get(loadState)!);
        this.counts.loads++;
      }
      // The state it starts from is its tokens' so far (when they are all known).
      if (seq.kvLength <= seq.tokens.length) expect(this.state.get(slot), `slot ${slot} at ${seq.kvLength}`).toBe(chain(seq.tokens.slice(0, seq.kvLength)));
      let h = this.state.get(slot)!;
      for (const t of work.tokens) h = mix(h, t === FEED ? this.drawn.get(slot)! : t);
      this.counts.tokens += work.tokens.length;
      this.kv.append(slot, work.tokens.length);
      this.state.set(slot, h);
      if (saveState !== undefined) {
        expect((seq.kvLength + work.tokens.length) % 4).toBe(0);
        this.snaps.set(saveState, h);
        this.counts.saves++;
      }
      if (work.samples) {
        this.drawn.set(slot, h % VOCAB);
        draws.push([seq, h % VOCAB]);
      }
      seq.advance(work, true);
    }
    return async () => {
      await Promise.resolve();
      for (const [seq, id] of draws) if (!seq.finish) seq.record({ id });
    };
  }
}

function request(prompt: number[], maxTokens: number): GenerateRequest {
  return { promptIds: prompt, maxTokens, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0 };
}

async function drain(s: Scheduler, prompt: number[], n: number): Promise<{ ids: number[]; result: GenerationResult }> {
  const seq = new Sequence(request(prompt, n), env);
  const stream = s.submit(seq, true);
  const ids: number[] = [];
  for (let t = await stream.next(); t; t = await stream.next()) ids.push(t.id);
  return { ids, result: seq.finish! };
}

/**
 * Watches the pool: a snapshot taken is blank (the runner's copy deleted) until a step writes it.
 * The returned check: every snapshot a node holds was written (none a plan took and then gave up).
 */
function auditWrites(pool: SnapshotPool, runner: SimulatedRecurrent): () => void {
  const held = new Set<number>();
  const [take, attach, release] = [pool.take.bind(pool), pool.attach.bind(pool), pool.release.bind(pool)];
  pool.take = () => {
    const snap = take();
    if (snap !== null) held.delete(snap), runner.snaps.delete(snap);
    return snap;
  };
  pool.attach = (snap, node) => {
    const ok = attach(snap, node);
    if (ok) held.add(snap);
    return ok;
  };
  pool.release = (snap) => {
    held.delete(snap);
    release(snap);
  };
  return () => {
    expect(held.size).toBe(pool.held);
    for (const snap of held) expect(runner.snaps.has(snap), `snapshot ${snap}`).toBe(true);
  };
}

/** Pages of 4 tokens. */
function rig(o: { pages?: number; snapshots?: number; maxSeqs?: number; prefill?: number } = {}) {
  const kv = new KvPages(o.pages ?? 64, 4);
  const runner = new SimulatedRecurrent(kv);
  const pool = new SnapshotPool(o.snapshots ?? 8);
  const scheduler = new Scheduler(kv, runner, { maxSeqs: o.maxSeqs ?? 8, prefillTokens: o.prefill ?? 32 }, pool);
  return { kv, runner, pool, scheduler };
}

const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 7 + i * 3) % VOCAB);

describe('SnapshotPool', () => {
  it('gives free snapshots, then the least recently used held one; a node keeps one, and its eviction frees it', () => {
    const pool = new SnapshotPool(2);
    const [a, b, c] = [{}, {}, {}];
    const s0 = pool.take()!;
    const s1 = pool.take()!;
    expect(pool.take()).toBeNull(); // both taken, neither held: nothing to evict
    expect(pool.attach(s0, a)).toBe(true);
    expect(pool.attach(s1, b)).toBe(true);
    expect(pool.of(a)).toBe(s0); // a used after b: b goes first
    expect(pool.take()).toBe(s1);
    expect(pool.holds(b)).toBe(false);
    // A node that holds one already keeps its own; the second goes back.
    expect(pool.attach(s1, a)).toBe(false);
    expect(pool.take()).toBe(s1);
    pool.attach(s1, c);
    pool.dropNode(c);
    expect([pool.held, pool.take()]).toEqual([1, s1]);
  });

  it('sizes the pool from a byte budget within [2, 64], a count when given, 0 without recurrent layers', () => {
    const state = (floats: number): LayerCacheKind => ({ kind: 'slot-state', floats });
    const kv: LayerCacheKind = { kind: 'paged-kv', kvHeads: 2, headDim: 64 };
    expect(snapshotCount([kv, kv], 2 ** 30)).toBe(0);
    expect(snapshotCount([state(2048), kv], 2 ** 30)).toBe(64);
    expect(snapshotCount([state(2 ** 20), state(2 ** 20)], 2 ** 30)).toBe(16); // 8 MiB each
    expect(snapshotCount([state(2 ** 26)], 2 ** 30)).toBe(2);
    expect(snapshotCount([state(2 ** 20)], 2 ** 30, 5)).toBe(5);
    expect(snapshotCount([state(2 ** 20)], 2 ** 23, 5)).toBe(2); // one layer's buffer within maxBufferSize
  });
});

describe('StateSnapshots', () => {
  it('copies each recurrent layer slot ↔ snapshot at their offsets, and destroys its buffers', () => {
    const made: Array<{ size: number; label: string; destroyed: boolean; destroy(): void }> = [];
    const device = {
      createBuffer: (d: GPUBufferDescriptor) => {
        const b = { size: d.size, label: d.label ?? '', destroyed: false, destroy: () => void (b.destroyed = true) };
        made.push(b);
        return b;
      },
    } as unknown as GPUDevice;
    const states = [{ label: 'state.0' }, { label: 'state.2' }];
    const caches = { state: (l: number) => states[l / 2] } as unknown as LayerCaches;
    const kinds: LayerCacheKind[] = [{ kind: 'slot-state', floats: 6 }, { kind: 'paged-kv', kvHeads: 1, headDim: 4 }, { kind: 'slot-state', floats: 10 }];
    const snaps = StateSnapshots.create(device, kinds, caches, 3)!;
    expect(made.map((b) => [b.label, b.size])).toEqual([['stateSnapshots.0', 72], ['stateSnapshots.2', 120]]);
    expect(snaps.bytes).toBe(192);
    const copies: unknown[][] = [];
    const encoder = { copyBufferToBuffer: (...a: unknown[]) => copies.push(a.map((x) => (typeof x === 'object' ? (x as { label: string }).label : x))) } as unknown as GPUCommandEncoder;
    snaps.load(encoder, 2, 1);
    snaps.save(encoder, 1, 0);
    expect(copies).toEqual([
      ['stateSnapshots.0', 48, 'state.0', 24, 24],
      ['stateSnapshots.2', 80, 'state.2', 40, 40],
      ['state.0', 24, 'stateSnapshots.0', 0, 24],
      ['state.2', 40, 'stateSnapshots.2', 0, 40],
    ]);
    snaps.destroy();
    expect(made.every((b) => b.destroyed)).toBe(true);
    expect(StateSnapshots.create(device, kinds, caches, 0)).toBeNull();
  });
});

describe('Scheduler with recurrent state snapshots', () => {
  it('ends a prefill chunk at the prompt’s last page boundary; a repeat resumes from its state there', async () => {
    const { scheduler, runner } = rig();
    const p = prompt(1, 14);
    const cold = await drain(scheduler, p, 5);
    expect(cold.ids).toEqual(alone(p, 5));
    expect(cold.result.cachedTokens).toBe(0);
    const tokens = runner.counts.tokens;
    const hit = await drain(scheduler, p, 5);
    expect(hit.ids).toEqual(alone(p, 5));
    // The state at 12 tokens: its last 2 prompt tokens and 4 decode tokens computed.
    expect(hit.result.cachedTokens).toBe(12);
    expect(runner.counts.tokens - tokens).toBe(2 + 4);
    expect(runner.counts.loads, JSON.stringify(runner.counts)).toBe(1);
  });

  it('serves a conversation’s next turn from the last page boundary the previous turn fed; only its latest decode snapshot is kept', async () => {
    const { scheduler, pool } = rig();
    const p = prompt(2, 14);
    const first = await drain(scheduler, p, 14); // fed 27 tokens: snapshots at 12 (prompt), 16, 20, 24
    expect(pool.held).toBe(2); // the prompt's and the latest
    const next = [...p, ...first.ids, 7, 8, 9];
    const second = await drain(scheduler, next, 4);
    expect(second.ids).toEqual(alone(next, 4));
    expect(second.result.cachedTokens).toBe(24);
  });

  it('shares the prompt of choices that start together: the twins resume from the first one’s state', async () => {
    const { scheduler, runner } = rig();
    const p = prompt(3, 17);
    const outs = await Promise.all([0, 1, 2].map(() => drain(scheduler, p, 4)));
    for (const o of outs) expect(o.ids).toEqual(alone(p, 4));
    expect(outs.map((o) => o.result.cachedTokens).sort()).toEqual([0, 16, 16]);
    // The prompt once, the twins' last prompt token each, then every choice's decode.
    expect(runner.counts.tokens).toBe(17 + 2 + 3 * 3);
  });

  it('keeps every output exact under a pool of 3 snapshots and 16 pages (snapshots and pages evicted, sequences preempted)', async () => {
    const { scheduler, pool, kv, runner } = rig({ pages: 16, snapshots: 3, maxSeqs: 4, prefill: 8 });
    const audit = auditWrites(pool, runner);
    const prompts = [prompt(4, 13), prompt(5, 9), prompt(4, 13), prompt(6, 21), prompt(5, 9), prompt(4, 13)];
    const outs: Array<{ ids: number[]; result: GenerationResult }> = [];
    for (let i = 0; i < prompts.length; i += 3) {
      outs.push(...(await Promise.all(prompts.slice(i, i + 3).map((p) => drain(scheduler, p, 12)))));
      audit();
    }
    prompts.forEach((p, i) => expect(outs[i]!.ids, `request ${i}`).toEqual(alone(p, 12)));
    // Each conversation's next turn, alone: it resumes from whatever snapshot its path holds (never one a given-up plan took and no step wrote).
    for (let i = 0; i < 3; i++) {
      const next = [...prompts[i]!, ...outs[i]!.ids, 1];
      expect((await drain(scheduler, next, 2)).ids).toEqual(alone(next, 2));
    }
    expect(scheduler.counters.preemptions).toBeGreaterThan(0);
    expect(outs.some((o) => o.result.cachedTokens > 0)).toBe(true);
    expect(pool.held).toBeLessThanOrEqual(3);
    // Every page back, each held snapshot on a cached page: evicting the pages frees them all.
    expect(kv.stats.used).toBe(0);
    scheduler.prefix.reclaim(16);
    expect(pool.held).toBe(0);
  });
});

