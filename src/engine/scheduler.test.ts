/**
 * The scheduler on the CPU, against a runner that simulates the paged KV cache: each step writes
 * the fed tokens' ids into the slots of their pages and checks that every position a sequence
 * attends to holds its own token. A page freed or overwritten while another sequence still reads
 * it (a prefix-cache or preemption bug) fails that check. The "model" draws the next token from a
 * hash of the whole sequence, so a sequence's output is the same however it was batched,
 * preempted or served from the cache, exactly when the scheduler feeds it the right tokens.
 */
import { describe, expect, it } from 'vitest';
import { KvPages } from './kv-pages';
import { FEED } from '../kernels/feed';
import { Scheduler, type BatchItem, type BatchRunner, type StepCompletion } from './scheduler';
import { Sequence, type SequenceEnv } from './sequence';
import type { GenerateRequest, GenerationResult } from './types';
import { GREEDY } from '../testing/sampling';

const VOCAB = 50;
const env: SequenceEnv = { eosIds: [], contextLength: 256, breakers: () => () => false };

function nextToken(tokens: readonly number[]): number {
  let h = 2166136261;
  for (const t of tokens) h = Math.imul(h ^ t, 16777619) >>> 0;
  return h % VOCAB;
}

/** What a sequence produces alone: the hash chain from its prompt, to `n` tokens or a stop id. */
function alone(prompt: readonly number[], n: number, stop: readonly number[] = []): number[] {
  const all = [...prompt];
  for (let i = 0; i < n; i++) {
    all.push(nextToken(all));
    if (stop.includes(all.at(-1)!)) break;
  }
  return all.slice(prompt.length);
}

/**
 * The "GPU": writes each step's tokens into its KV cells, draws each sampling row's token from the
 * hash of what the KV holds for it, and keeps that token by slot, where the next step's FEED reads
 * it before the CPU has it. Tokens reach the sequences only when the scheduler completes the step.
 * Sequences in `readBack` have their draws go through the CPU (as a grammar's or a CPU sampler's).
 */
class SimulatedKv implements BatchRunner {
  readonly cells: Int32Array;
  readonly drawn = new Map<number, number>();
  readonly readBack = new Set<Sequence>();
  steps: Array<{ rows: number; tokens: number }> = [];
  /** Submits and completions, in order: `s3` step 3 submitted, `c3` its results handed out. */
  events: string[] = [];
  /** Called as each completion starts. */
  onComplete: (() => void) | null = null;
  placed = 0;
  constructor(readonly kv: KvPages) {
    this.cells = new Int32Array(kv.numPages * kv.pageSize).fill(-1);
  }
  place(): void {
    this.placed++;
  }
  async submit(items: BatchItem[]): Promise<StepCompletion> {
    const proposedOf = (i: BatchItem) => i.work.proposed ?? [];
    const step = this.steps.push({ rows: items.reduce((n, i) => n + 1 + proposedOf(i).length, 0), tokens: items.reduce((n, i) => n + i.work.tokens.length + proposedOf(i).length, 0) });
    const draws: Array<[BatchItem, number[]]> = [];
    for (const item of items) {
      const { seq, slot, work } = item;
      const start = this.kv.length(slot);
      expect(start).toBe(seq.kvLength);
      // A verify step's proposals are rows after its tokens, at the next positions.
      const fed = [...work.tokens, ...proposedOf(item)];
      const slots = this.kv.append(slot, fed.length);
      fed.forEach((t, i) => {
        if (t === FEED) expect(this.readBack.has(seq)).toBe(false);
        this.cells[slots[i]!] = t === FEED ? this.drawn.get(slot)! : t;
      });
      // Everything it attends to must be its own tokens (the last one may be a draw the CPU has not seen yet).
      const table = this.kv.table(slot);
      const ps = this.kv.pageSize;
      const held: number[] = [];
      for (let p = 0; p < start + work.tokens.length; p++) {
        const cell = this.cells[table[Math.floor(p / ps)]! * ps + (p % ps)]!;
        if (p < seq.tokens.length && cell !== seq.tokens[p]) throw new Error(`slot ${slot} position ${p}: the KV holds ${cell}, the sequence has ${seq.tokens[p]}`);
        held.push(cell);
      }
      if (work.samples) {
        // One draw per row: after the tokens, then after each proposal.
        const ids = [nextToken(held), ...proposedOf(item).map((_, i) => nextToken([...held, ...proposedOf(item).slice(0, i + 1)]))];
        this.drawn.set(slot, ids[0]!);
        draws.push([item, ids]);
      }
      seq.advance(work, !this.readBack.has(seq));
    }
    this.events.push(`s${step}`);
    return async () => {
      this.onComplete?.();
      await Promise.resolve();
      this.events.push(`c${step}`);
      for (const [{ seq, work }, ids] of draws) {
        if (seq.finish) continue;
        if (work.proposed) seq.verify(ids.map((id) => ({ id })), work.proposed);
        else seq.record({ id: ids[0]! });
      }
    };
  }
}

function request(prompt: number[], maxTokens: number, signal?: AbortSignal, stopTokenIds: number[] = []): GenerateRequest {
  return { promptIds: prompt, maxTokens, sampling: GREEDY, stopTokenIds, ignoreEos: true, minTokens: 0, signal };
}

async function drain(s: Scheduler, seq: Sequence, useCache = true): Promise<{ ids: number[]; result: GenerationResult }> {
  const stream = s.submit(seq, useCache);
  const ids: number[] = [];
  for (let t = await stream.next(); t; t = await stream.next()) ids.push(t.id);
  return { ids, result: seq.finish! };
}

function rig(pages: number, pageSize: number, maxSeqs = 16, prefillTokens = 32) {
  const kv = new KvPages(pages, pageSize);
  const runner = new SimulatedKv(kv);
  const scheduler = new Scheduler(kv, runner, { maxSeqs, prefillTokens });
  return { kv, runner, scheduler };
}

const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 7 + i * 3) % VOCAB);

describe('Scheduler', () => {
  it('runs 16 sequences in the same steps, each with its output alone', async () => {
    const { scheduler, runner, kv } = rig(256, 4, 16, 256);
    const reqs = Array.from({ length: 16 }, (_, i) => ({ p: prompt(i, 3 + i), n: 5 + (i % 7) }));
    const outs = await Promise.all(reqs.map(({ p, n }) => drain(scheduler, new Sequence(request(p, n), env))));
    outs.forEach((o, i) => expect(o.ids).toEqual(alone(reqs[i]!.p, reqs[i]!.n)));
    expect(Math.max(...runner.steps.map((s) => s.rows))).toBe(16);
    expect(kv.stats.used).toBe(0);
  });

  it('mixes prefill chunks with decode tokens under the prefill budget', async () => {
    const { scheduler, runner } = rig(256, 4, 4, 8);
    const short = drain(scheduler, new Sequence(request(prompt(1, 3), 30), env));
    const long = drain(scheduler, new Sequence(request(prompt(2, 60), 4), env));
    const [a, b] = await Promise.all([short, long]);
    expect(a.ids).toEqual(alone(prompt(1, 3), 30));
    expect(b.ids).toEqual(alone(prompt(2, 60), 4));
    // The long prompt came in chunks of at most 8 tokens while the short one kept decoding.
    expect(Math.max(...runner.steps.map((s) => s.tokens))).toBeLessThanOrEqual(9);
    expect(runner.steps.filter((s) => s.rows === 2).length).toBeGreaterThanOrEqual(8);
  });

  it('preempts the newest sequence when the pool runs dry, and every output stays exact', async () => {
    // 24 pages of 4 tokens: far less than 8 sequences of up to 40 tokens need at once.
    const { scheduler, kv } = rig(24, 4, 8, 16);
    const reqs = Array.from({ length: 8 }, (_, i) => ({ p: prompt(i + 3, 6 + i), n: 30 }));
    const outs = await Promise.all(reqs.map(({ p, n }) => drain(scheduler, new Sequence(request(p, n), env))));
    outs.forEach((o, i) => expect(o.ids).toEqual(alone(reqs[i]!.p, reqs[i]!.n)));
    expect(scheduler.counters.preemptions).toBeGreaterThan(0);
    expect(kv.stats.used).toBe(0);
    expect(kv.stats.free + kv.stats.cached).toBe(24);
  });

  it('serves interleaved conversations from their own cached prefixes, counting cached tokens exactly', async () => {
    const { scheduler } = rig(64, 4);
    const convo = (seed: number) => prompt(seed, 13);
    let a = convo(11);
    let b = convo(29);
    for (let turn = 0; turn < 3; turn++) {
      for (const which of ['a', 'b'] as const) {
        const p = which === 'a' ? a : b;
        const out = await drain(scheduler, new Sequence(request(p, 6), env));
        expect(out.ids).toEqual(alone(p, 6));
        // What the previous turn left in whole pages: its prompt and output, less its last token (never fed).
        const prev = turn === 0 ? 0 : Math.floor((p.length - 3 - 1) / 4) * 4;
        expect(out.result.cachedTokens).toBe(Math.min(prev, Math.floor((p.length - 1) / 4) * 4));
        const next = [...p, ...out.ids, 1, 2, 3];
        if (which === 'a') a = next;
        else b = next;
      }
    }
  });

  it('shares the prompt pages of choices that start together (the twin waits for the first prefill)', async () => {
    const { scheduler, runner } = rig(64, 4);
    const p = prompt(5, 17);
    const outs = await Promise.all([0, 1, 2].map(() => drain(scheduler, new Sequence(request(p, 4), env))));
    for (const o of outs) expect(o.ids).toEqual(alone(p, 4));
    expect(outs.map((o) => o.result.cachedTokens).sort()).toEqual([0, 16, 16]);
    // The prompt once (17 tokens), then a token of each choice's decode (3 + 3 × 1 + 2 × 3 more).
    expect(runner.steps.reduce((n, s) => n + s.tokens, 0)).toBe(17 + 3 + 2 * (1 + 3));
  });

  it('frees every page of 100 sequences aborted at random points, and the others stay exact', async () => {
    const { scheduler, kv } = rig(128, 4, 8, 16);
    let seed = 1;
    const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    const runs: Promise<void>[] = [];
    for (let i = 0; i < 130; i++) {
      const p = prompt(i, 3 + Math.floor(rand() * 20));
      const n = 5 + Math.floor(rand() * 20);
      const ctl = new AbortController();
      const abortAt = i < 100 ? Math.floor(rand() * n) : -1;
      runs.push(
        (async () => {
          const seq = new Sequence(request(p, n, ctl.signal), env);
          const stream = scheduler.submit(seq, true);
          const ids: number[] = [];
          if (abortAt === 0) (ctl.abort(), scheduler.wakeUp());
          for (let t = await stream.next(); t; t = await stream.next()) {
            ids.push(t.id);
            if (ids.length === abortAt) (ctl.abort(), scheduler.wakeUp());
          }
          if (abortAt < 0) expect(ids).toEqual(alone(p, n));
          else expect(seq.finish!.finishReason).toBe('abort');
        })(),
      );
    }
    await Promise.all(runs);
    expect(kv.stats.used).toBe(0);
    expect(kv.stats.free + kv.stats.cached).toBe(128);
    expect(scheduler.runningCount + scheduler.waitingCount).toBe(0);
  });
  it('submits step n+1 before step n is read back, and a decode feeds the draw it has not seen', async () => {
    const { scheduler, runner } = rig(64, 4, 4, 16);
    const outs = await Promise.all([1, 2].map((i) => drain(scheduler, new Sequence(request(prompt(i, 5), 12), env))));
    outs.forEach((o, i) => expect(o.ids).toEqual(alone(prompt(i + 1, 5), 12)));
    // Every step but the last is completed only after the next one was submitted.
    const steps = runner.steps.length;
    expect(steps).toBeGreaterThanOrEqual(12);
    for (let k = 1; k < steps; k++) expect(runner.events.indexOf(`s${k + 1}`)).toBeLessThan(runner.events.indexOf(`c${k}`));
  });

  it('drops the draw made one step after a stop id ended a sequence: outputs equal their runs alone', async () => {
    const { scheduler, runner } = rig(128, 4, 8, 16);
    const reqs = Array.from({ length: 8 }, (_, i) => ({ p: prompt(i + 20, 4 + i), n: 40, stop: [i % 5, 11, 23] }));
    const outs = await Promise.all(reqs.map(({ p, n, stop }) => drain(scheduler, new Sequence(request(p, n, undefined, stop), env))));
    outs.forEach((o, i) => expect(o.ids).toEqual(alone(reqs[i]!.p, reqs[i]!.n, reqs[i]!.stop)));
    // Some ended by a stop id while chained: their step after the stop fed and drew a token that was dropped.
    expect(outs.filter((o) => o.result.finishReason === 'stop').length).toBeGreaterThan(2);
    expect(runner.steps.length).toBeGreaterThan(0);
  });

  it('runs sequences whose draws come back to the CPU beside chained ones, a step apart, all exact', async () => {
    const { scheduler, runner } = rig(128, 4, 8, 16);
    const seqs = Array.from({ length: 6 }, (_, i) => new Sequence(request(prompt(i + 40, 6), 10), env));
    for (const seq of seqs.filter((_, i) => i % 2)) runner.readBack.add(seq);
    const outs = await Promise.all(seqs.map((seq) => drain(scheduler, seq)));
    outs.forEach((o, i) => expect(o.ids).toEqual(alone(prompt(i + 40, 6), 10)));
  });
  it('serves a sequence queued while the loop completes its last step in flight', async () => {
    const { scheduler, runner } = rig(64, 4, 4, 16);
    const p = prompt(3, 5);
    // Ends by a stop id at its second token: the step that drew a third is still to complete when it leaves.
    const first = new Sequence(request(p, 10, undefined, [alone(p, 2)[1]!]), env);
    const second = new Sequence(request(prompt(4, 5), 3), env);
    let stream: ReturnType<Scheduler['submit']> | null = null;
    runner.onComplete = () => {
      if (first.finish && !stream) stream = scheduler.submit(second, true);
    };
    expect((await drain(scheduler, first)).ids).toEqual(alone(p, 2));
    await new Promise((r) => setTimeout(r, 0));
    expect(stream).not.toBeNull();
    const ids: number[] = [];
    for (let t = await stream!.next(); t; t = await stream!.next()) ids.push(t.id);
    expect(ids).toEqual(alone(prompt(4, 5), 3));
  });

  describe('speculative decoding (verify steps)', () => {
    const spec = (p: number[], n: number, speculation: GenerateRequest['speculation'], stop: number[] = [], signal?: AbortSignal) => new Sequence({ ...request(p, n, signal, stop), speculation }, env);

    it('takes a prediction of its own output in few steps, and an unrelated one changes nothing; the KV rolls back every miss', async () => {
      const { scheduler, runner, kv } = rig(256, 4, 8, 32);
      const ps = [prompt(1, 5), prompt(2, 7), prompt(3, 6)];
      const want = ps.map((p) => alone(p, 40));
      const [own, unrelated, ngram] = await Promise.all([
        drain(scheduler, spec(ps[0]!, 40, { prediction: want[0]! })),
        drain(scheduler, spec(ps[1]!, 40, { prediction: prompt(9, 30) })),
        drain(scheduler, spec(ps[2]!, 40, { ngram: { n: 2, k: 4 } })),
      ]);
      // Each step checked the KV held each sequence's tokens and no more (SimulatedKv.submit): a rejected proposal left behind fails it.
      expect([own.ids, unrelated.ids, ngram.ids]).toEqual(want);
      // Proposals take the rows the other sequences leave (8 in all).
      expect(own.result.speculation!.accepted).toBe(own.result.speculation!.proposed);
      expect(own.result.speculation!.accepted).toBeGreaterThan(30);
      expect(unrelated.result.speculation!.proposed).toBeGreaterThan(unrelated.result.speculation!.accepted);
      expect(Math.max(...runner.steps.map((s) => s.rows))).toBeLessThanOrEqual(8);
      expect(kv.stats.used).toBe(0);
    });

    it('awaits a draft model before planning, every drafting sequence in one turn: each guess verified, the output as alone', async () => {
      const { scheduler, runner, kv } = rig(256, 4, 8, 32);
      // Its own next tokens, one in three wrong, after a task's delay (a draft engine's steps).
      let open = 0;
      // Asks, and the synchronous turns they came in (a draft model batches one turn's asks into one round).
      let [asks, turns, inTurn] = [0, 0, false];
      const stream = {
        async draft(ids: readonly number[], count: number) {
          asks++;
          if (!inTurn) [turns, inTurn] = [turns + 1, true];
          queueMicrotask(() => (inTurn = false));
          await new Promise((r) => setTimeout(r, 1));
          const t = [...ids];
          for (let i = 0; i < count; i++) t.push(t.length % 3 === 0 ? (nextToken(t) + 1) % VOCAB : nextToken(t));
          return t.slice(ids.length);
        },
        close: () => open--,
      };
      const drafter = { tokens: 3, open: () => (open++, stream) };
      const ps = [prompt(5, 5), prompt(6, 6)];
      const outs = await Promise.all(ps.map((p) => drain(scheduler, spec(p, 30, { draft: drafter }))));
      // SimulatedKv checked at every step that the KV held each sequence's tokens and no more.
      expect(outs.map((o) => o.ids)).toEqual(ps.map((p) => alone(p, 30)));
      for (const { result } of outs) {
        expect(result.speculation!.accepted).toBeGreaterThan(0);
        expect(result.speculation!.proposed).toBeGreaterThan(result.speculation!.accepted);
      }
      expect(runner.steps.length).toBeLessThan(30);
      expect(kv.stats.used).toBe(0);
      // Each sequence's draft stream closed as it ended (what the draft held for it goes back).
      expect(open).toBe(0);
      // Both drafted in the same turns (one round for both), not in alternate steps of the pipelined loop.
      expect(turns).toBeLessThan(asks * 0.75);
    });

    /** A draft model's streams, one per sequence (its own next tokens, every third wrong): which hold a draft slot (asked since last closed). */
    function drafts() {
      const holding = new Set<object>();
      const drafter = {
        tokens: 3,
        open() {
          const stream = {
            async draft(ids: readonly number[], count: number) {
              holding.add(stream);
              await Promise.resolve();
              const t = [...ids];
              for (let i = 0; i < count; i++) t.push(t.length % 3 === 0 ? (nextToken(t) + 1) % VOCAB : nextToken(t));
              return t.slice(ids.length);
            },
            close: () => void holding.delete(stream),
          };
          return stream;
        },
      };
      return { holding, drafter };
    }

    it('asks the draft for no guess when the step has no row to spare, and verifies on the rows beyond maxSeqs', async () => {
      const p = prompt(4, 5);
      for (const rows of [1, 3]) {
        const kv = new KvPages(64, 4);
        const d = drafts();
        let asked = 0;
        const open = d.drafter.open.bind(d.drafter);
        d.drafter.open = () => {
          const stream = open();
          const draft = stream.draft.bind(stream);
          stream.draft = (ids, count) => (asked++, draft(ids, count));
          return stream;
        };
        const scheduler = new Scheduler(kv, new SimulatedKv(kv), { maxSeqs: 1, rows, prefillTokens: 16 });
        const out = await drain(scheduler, spec(p, 12, { draft: d.drafter }));
        expect(out.ids).toEqual(alone(p, 12));
        // One slot and no verify row: every step decodes one token and the draft never runs; two rows beyond it: it drafts (3 tokens at most, 2 verified a step).
        if (rows === 1) expect([asked, scheduler.counters.steps]).toEqual([0, 12]);
        else expect(asked).toBeGreaterThan(0);
      }
    });

    it("frees a sequence's draft slot on every way out, at once: a failed step, preemption, the engine stopping, a lost device", async () => {
      // A step fails for one sequence (its grammar refused a token): its draft slot is back before its consumer sees the error, the other's output as alone.
      class FailingKv extends SimulatedKv {
        victim: Sequence | null = null;
        override async submit(items: BatchItem[]): Promise<StepCompletion> {
          const complete = await super.submit(items);
          const item = items.find((i) => i.seq === this.victim && i.seq.generated >= 4);
          if (!item) return complete;
          this.victim = null;
          return async () => {
            await complete();
            item.error = new Error('refused');
          };
        }
      }
      let kv = new KvPages(64, 4);
      const runner = new FailingKv(kv);
      let scheduler = new Scheduler(kv, runner, { maxSeqs: 8, prefillTokens: 16 });
      let d = drafts();
      const [p, q] = [prompt(7, 5), prompt(8, 6)];
      const failing = spec(p, 30, { draft: d.drafter });
      runner.victim = failing;
      const [failed, other] = await Promise.all([
        drain(scheduler, failing).catch((e: unknown) => ({ error: e, held: d.holding.size })),
        drain(scheduler, spec(q, 12, { draft: d.drafter })),
      ]);
      // Held then: the other sequence's slot only.
      expect(failed).toMatchObject({ error: { message: 'refused' }, held: 1 });
      expect(other.ids).toEqual(alone(q, 12));
      expect(d.holding.size).toBe(0);
      expect(kv.stats.used).toBe(0);

      // Preemption: a sequence waiting to be fed again holds no draft slot (checked at every step), and outputs stay exact.
      kv = new KvPages(24, 4);
      d = drafts();
      const checked = new (class extends SimulatedKv {
        override submit(items: BatchItem[]): Promise<StepCompletion> {
          expect(d.holding.size).toBeLessThanOrEqual(scheduler.runningCount);
          return super.submit(items);
        }
      })(kv);
      scheduler = new Scheduler(kv, checked, { maxSeqs: 8, prefillTokens: 16 });
      const reqs = Array.from({ length: 6 }, (_, i) => prompt(i + 3, 6 + i));
      const outs = await Promise.all(reqs.map((r) => drain(scheduler, spec(r, 30, { draft: d.drafter }))));
      outs.forEach((o, i) => expect(o.ids).toEqual(alone(reqs[i]!, 30)));
      expect(scheduler.counters.preemptions).toBeGreaterThan(0);
      expect(d.holding.size).toBe(0);

      // The engine stopping (disposed): running and waiting sequences end with the error, their slots back.
      // One slot and a verify row beyond it (the engine's VERIFY_ROWS): the running sequence drafts while the other waits.
      kv = new KvPages(64, 4);
      d = drafts();
      scheduler = new Scheduler(kv, new SimulatedKv(kv), { maxSeqs: 1, rows: 2, prefillTokens: 16 });
      const both = [prompt(1, 5), prompt(2, 5)].map((r) => drain(scheduler, spec(r, 30, { draft: d.drafter })).catch((e: unknown) => e));
      while (!d.holding.size) await new Promise((r) => setTimeout(r, 0));
      await scheduler.stop(new Error('disposed'));
      for (const e of await Promise.all(both)) expect(e).toMatchObject({ message: 'disposed' });
      expect(d.holding.size).toBe(0);

      // The device lost (the draft's KV with it): no slot is held while it recovers, and the sequences fed again draft again, exact.
      kv = new KvPages(64, 4);
      d = drafts();
      const losing = new LosingKv(kv, 4, 'recover');
      const recover = losing.recover.bind(losing);
      let heldInRecovery = -1;
      losing.recover = () => ((heldInRecovery = d.holding.size), recover());
      scheduler = new Scheduler(kv, losing, { maxSeqs: 8, prefillTokens: 16 });
      const lost = await Promise.all(reqs.slice(0, 2).map((r) => drain(scheduler, spec(r, 20, { draft: d.drafter }))));
      lost.forEach((o, i) => expect(o.ids).toEqual(alone(reqs[i]!, 20)));
      expect(heldInRecovery).toBe(0);
      expect(lost[0]!.result.speculation!.proposed).toBeGreaterThan(0);
      expect(d.holding.size).toBe(0);
    });

    it('needs three steps for 40 tokens it predicted (up to 16 proposals a step, the prompt step too), and stops within a run at max_tokens or a stop id', async () => {
      const p = prompt(4, 5);
      const want = alone(p, 40);
      let r = rig(64, 4, 17, 32);
      expect((await drain(r.scheduler, spec(p, 40, { prediction: want }))).ids).toEqual(want);
      expect(r.runner.steps.length).toBe(3);
      // A prediction longer than max_tokens: proposals stop where output must.
      r = rig(64, 4, 17, 32);
      const short = await drain(r.scheduler, spec(p, 10, { prediction: want }));
      expect(short).toMatchObject({ ids: want.slice(0, 10), result: { finishReason: 'length', speculation: { proposed: 9, accepted: 9 } } });
      // A stop id inside an accepted run ends it there.
      r = rig(64, 4, 17, 32);
      const at = want.findIndex((id, i) => i > 3 && !want.slice(0, i).includes(id));
      const stopped = await drain(r.scheduler, spec(p, 40, { prediction: want }, [want[at]!]));
      expect(stopped.ids).toEqual(want.slice(0, at + 1));
      expect(stopped.result).toMatchObject({ finishReason: 'stop', stopTokenId: want[at] });
      expect(r.kv.stats.used).toBe(0);
    });

    it('proposes nothing where the backend cannot verify (recurrent state): the same output, a step a token', async () => {
      const { scheduler, runner } = rig(64, 4, 17, 32);
      const p = prompt(6, 5);
      const out = await drain(scheduler, new Sequence({ ...request(p, 12), speculation: { prediction: alone(p, 12) } }, { ...env, verifies: false }));
      expect(out.ids).toEqual(alone(p, 12));
      expect(out.result.speculation).toEqual({ proposed: 0, accepted: 0 });
      expect(runner.steps.length).toBe(12);
    });

    it('ends a sequence aborted while its verify step runs, with its pages back', async () => {
      const { scheduler, runner, kv } = rig(64, 4, 17, 32);
      const p = prompt(5, 5);
      const ctl = new AbortController();
      runner.onComplete = () => {
        if (runner.steps.length === 2) ctl.abort();
      };
      const out = await drain(scheduler, spec(p, 40, { prediction: alone(p, 40) }, [], ctl.signal));
      expect(out.result.finishReason).toBe('abort');
      expect(out.ids.length).toBeLessThan(40);
      expect(out.ids).toEqual(alone(p, out.ids.length));
      expect(kv.stats.used).toBe(0);
    });
  });
});

/** The simulated GPU, lost at step `at` (its completion rejects with the loss): every cell and kept draw is gone, as on a new device. */
class LosingKv extends SimulatedKv {
  recovered = 0;
  constructor(
    kv: KvPages,
    private readonly at: number,
    private readonly outcome: 'recover' | 'fail',
  ) {
    super(kv);
  }
  override async submit(items: BatchItem[]): Promise<StepCompletion> {
    const complete = await super.submit(items);
    if (this.steps.length !== this.at) return complete;
    return async () => {
      this.cells.fill(-1);
      this.drawn.clear();
      throw Object.assign(new Error('lost'), { code: 'device_lost' });
    };
  }
  isLoss(e: unknown): boolean {
    return (e as { code?: string }).code === 'device_lost';
  }
  async recover(): Promise<void> {
    await new Promise((ok) => setTimeout(ok, 5));
    if (this.outcome === 'fail') throw Object.assign(new Error('gave up'), { code: 'device_lost' });
    this.recovered++;
  }
}

describe('Scheduler after a lost device', () => {
  it('feeds every sequence again, decoding or in its prefill, and each output is what it would have been', async () => {
    const kv = new KvPages(64, 4);
    const runner = new LosingKv(kv, 6, 'recover');
    const scheduler = new Scheduler(kv, runner, { maxSeqs: 8, prefillTokens: 8 });
    runner.readBack.add(new Sequence(request([0], 1), env)); // (none of ours: every draw stays on the GPU)
    const reqs = [
      { p: prompt(1, 3), n: 12 },
      { p: prompt(2, 5), n: 12 },
      { p: prompt(3, 40), n: 4 }, // still in its prefill (chunks of 8) at step 6
    ];
    const outs = await Promise.all(reqs.map(({ p, n }) => drain(scheduler, new Sequence(request(p, n), env))));
    outs.forEach((o, i) => expect(o.ids).toEqual(alone(reqs[i]!.p, reqs[i]!.n)));
    expect(runner.recovered).toBe(1);
    expect(kv.stats.used).toBe(0);
    // The prefix cache forgot the lost pages: all its pages now are from after the loss.
    expect(kv.stats.free + kv.stats.cached).toBe(64);
  });

  it('ends every sequence with the error when recovery fails, and refuses new ones', async () => {
    const kv = new KvPages(64, 4);
    const runner = new LosingKv(kv, 3, 'fail');
    const scheduler = new Scheduler(kv, runner, { maxSeqs: 8, prefillTokens: 8 });
    const outs = await Promise.all([prompt(1, 3), prompt(2, 20)].map((p) => drain(scheduler, new Sequence(request(p, 10), env)).catch((e: unknown) => e)));
    for (const o of outs) expect(o).toMatchObject({ message: 'gave up' });
    expect(() => scheduler.submit(new Sequence(request(prompt(3, 3), 2), env), true)).toThrow('gave up');
    expect(kv.stats.used).toBe(0);
  });
});
