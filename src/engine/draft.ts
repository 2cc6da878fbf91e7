/**
 * The draft model of speculative decoding (EngineOptions.draft, `serve --draft-model`): a smaller
 * model of the same vocabulary that guesses the target's next tokens greedily, verified by the
 * target's steps (./proposers.ts `DraftProposer`).
 *
 * Its GPU side is on the target's device (./draft-engine.ts: its weights, its KV page pool, a step
 * runner), with no scheduler of its own: the target's step loop runs it. Before it plans a step, the target's
 * scheduler asks every sequence about to decode for its guess at once (`Sequence.prepare`), and
 * those asks, made in one synchronous turn, join one draft round: batched steps of the draft
 * model over every sequence that drafts (the first feeds each one's new tokens and draws its
 * first guess, each next one feeds the guess before and draws the next), as vLLM's and SGLang's
 * draft workers propose for the whole batch between the target's steps.
 *
 * Each target sequence keeps a slot of the draft's KV across rounds (`DraftSession`): the tokens
 * whose K/V it holds, its target's tokens then its last guesses. A round keeps the longest prefix
 * of them that the target's tokens still start with and cuts the rest (the rejected guesses'
 * positions: the draft's rollback, exact to the token), so a guess computes only the tokens the
 * target took since the last round (at most two: the last guess and the target's own draw). A
 * draft with recurrent layers (one state per slot, no going back) keeps its slot only when the
 * target's tokens extend all it holds, and starts over otherwise.
 * A session's slot goes back when its sequence leaves the target's batch, whichever way (it ends,
 * fails or is preempted: `close`, at once, or after the round under way), or to a sequence that
 * needs one when every slot is taken (the least recently drafted first; it then starts over). Its steps are
 * counted apart from the target's (EngineStats.draftSteps).
 * After a lost device the engine rebuilds the draft on the new one (`rebuild`): every slot is
 * forgotten (its K/V was on the lost device), so a resumed sequence drafts again from the start.
 */
import type { GPUContext } from '../gpu/device';
import type { MemoryUse } from '../gpu/memory';
import type { TextTokenizer } from '../text/tokenizer';
import { ModelError } from '../model/errors';
import type { KvPages } from './kv-pages';
import type { DraftStream, Drafter } from './proposers';
import type { BatchItem, StepCompletion } from './scheduler';
import { GREEDY, Sequence, type SequenceEnv } from './sequence';

/** What the draft round drives on the draft engine: its page pool and step runner, which no scheduler of its own uses. */
export interface DraftStepper {
  readonly kv: KvPages;
  readonly runner: { place(seq: Sequence, slot: number): void; submit(items: BatchItem[]): Promise<StepCompletion> };
  readonly env: SequenceEnv;
  /** Sequences (slots) and tokens in one step. */
  readonly limits: { readonly maxSeqs: number; readonly maxTokens: number };
  /**
   * Whether a slot's cache can be cut back to any prefix: attention only. A recurrent layer keeps
   * one state per slot, which every token advances (a verify step's checkpoints serve only that
   * step), so such a draft keeps what its slot holds only when the tokens extend all of it.
   */
  readonly cutsBack: boolean;
}

/** What the draft model runs on: its GPU side (./draft-engine.ts), driven step by step. */
export interface DraftBackend {
  readonly contextLength: number;
  readonly stepper: DraftStepper;
  /** GPU memory it allocated at load, by use. */
  readonly memoryUse: MemoryUse;
  /** After a lost device: its buffers freed and made again on `gpu`, a new stepper (an empty page pool); throws when it cannot. */
  rebuild(gpu: GPUContext): Promise<void>;
  dispose(): Promise<void>;
}

/** Tokens a draft guesses per step by default (EngineOptions.draft.tokens). */
export const DEFAULT_DRAFT_TOKENS = 8;

/** EngineOptions.draft.tokens, checked (before anything loads): a positive integer, default DEFAULT_DRAFT_TOKENS. */
export function draftTokens(tokens: number | undefined): number {
  if (tokens === undefined) return DEFAULT_DRAFT_TOKENS;
  if (!(Number.isInteger(tokens) && tokens >= 1)) throw new RangeError(`draft tokens must be a positive integer, got ${tokens}`);
  return tokens;
}

/**
 * Refuses a draft whose vocabulary is not the target's: its guesses are token ids, which must mean
 * the same text to both (llama.cpp's server checks the same). Every token string must match.
 */
export function checkDraftVocab(target: Pick<TextTokenizer, 'vocab'>, draft: Pick<TextTokenizer, 'vocab'>): void {
  const a = target.vocab;
  const b = draft.vocab;
  if (a.length !== b.length)
    throw new ModelError('invalid_field', `the draft model's vocabulary has ${b.length} tokens, the model's ${a.length}: a draft model must share the model's tokenizer`, 'draft');
  const at = a.findIndex((t, i) => t !== b[i]);
  if (at >= 0)
    throw new ModelError('invalid_field', `the draft model's token ${at} is ${JSON.stringify(b[at])}, the model's ${JSON.stringify(a[at])}: a draft model must share the model's tokenizer`, 'draft');
}


/** One target sequence's place in the draft (DraftModel.open): its KV slot, kept across rounds. */
class DraftSession implements DraftStream {
  /** Its slot in the draft's KV (null: none yet, or given to another session). */
  slot: number | null = null;
  /** The tokens whose K/V its slot holds, in order. */
  held: readonly number[] = [];
  /** The round it last drafted in (the least recent gives its slot up first). */
  lastRound = -1;
  /** Closed since its last ask: its slot goes back, and an ask queued before that gets no guess. */
  closed = false;

  constructor(private readonly model: DraftModel) {}

  draft(ids: readonly number[], count: number): Promise<number[]> {
    // A sequence preempted and fed again asks again: it starts over in a slot.
    this.closed = false;
    return this.model.ask(this, ids, count);
  }

  close(): void {
    this.closed = true;
    this.model.release(this);
  }
}

/** A session's guess asked for in this turn. */
interface Ask {
  session: DraftSession;
  ids: readonly number[];
  count: number;
  resolve(guess: number[]): void;
}

export class DraftModel implements Drafter {
  /** Draft steps since load, rounds, and tokens fed to bring sessions up to their target's tokens (the guesses' feeds not counted). */
  readonly counters = { steps: 0, rounds: 0, caughtUp: 0 };
  private asks: Ask[] = [];
  private rounds: Promise<void> | null = null;
  /** Sessions holding a slot, and the slots no session holds. */
  private readonly holders = new Set<DraftSession>();
  private freeSlots: number[] = [];
  /** Rebuilds on a new device so far: a round begun before one neither hands out its guesses nor touches the slots after it. */
  private device = 0;
  /** Its rebuild after a lost device failed: no guesses (the model serves on without them) until a later rebuild succeeds. */
  failed = false;
  /** A rebuild is under way: no guesses meanwhile. */
  private building = false;

  constructor(
    /** Its GPU side (tests reach its step runner through it). */
    readonly backend: DraftBackend,
    readonly tokens: number,
  ) {
    this.forget();
  }

  /** Every slot free and no session holding one (each starts over in a slot at its next ask). */
  private forget(): void {
    for (const s of this.holders) {
      s.slot = null;
      s.held = [];
    }
    this.holders.clear();
    this.freeSlots = Array.from({ length: this.backend.stepper.limits.maxSeqs }, (_, i) => i).reverse();
  }

  /**
   * After a lost device (the engine's rebuild): the draft built again on `gpu` (./draft-engine.ts).
   * What the slots held was on the lost device, so every session forgets its slot: a sequence
   * resumed by the model drafts again from the start, as a new one. Throws when the draft cannot
   * be rebuilt; it then guesses nothing (`failed`) until a later rebuild succeeds.
   */
  async rebuild(gpu: GPUContext): Promise<void> {
    this.device++;
    this.building = true;
    this.forget();
    try {
      await this.backend.rebuild(gpu);
      this.failed = false;
    } catch (e) {
      this.failed = true;
      throw e;
    } finally {
      this.building = false;
    }
  }

  /** The draft engine's steps since load. */
  get steps(): number {
    return this.counters.steps;
  }

  /** The draft's page pool (tests: a sequence that ended leaves none used). */
  get pages(): { used: number; free: number } {
    return this.backend.stepper.kv.stats;
  }

  /** GPU memory the draft allocated at load, by use (the engine's memoryUse counts it in). */
  get memoryUse(): MemoryUse {
    return this.backend.memoryUse;
  }

  open(): DraftStream {
    return new DraftSession(this);
  }

  /**
   * A session's greedy continuation of `ids`, `count` tokens (fewer where the context ends): a
   * guess only, so whatever goes wrong (no pages, a failure) is no guess. Every ask of one
   * synchronous turn (the scheduler asks all its drafting sequences at once) joins one round.
   */
  ask(session: DraftSession, ids: readonly number[], count: number): Promise<number[]> {
    if (this.failed || this.building) return Promise.resolve([]);
    return new Promise((resolve) => {
      this.asks.push({ session, ids, count, resolve });
      this.rounds ??= Promise.resolve().then(() => this.runRounds());
    });
  }

  /** A session's sequence ended: its slot goes back (after the round it is in, if any). */
  release(session: DraftSession): void {
    if (this.rounds || session.slot === null) return;
    this.unslot(session);
  }

  private unslot(session: DraftSession): void {
    const slot = session.slot!;
    this.backend.stepper.kv.release(slot);
    this.freeSlots.push(slot);
    this.holders.delete(session);
    session.slot = null;
    session.held = [];
  }

  private async runRounds(): Promise<void> {
    while (this.asks.length) {
      const asks = this.asks.splice(0);
      const device = this.device;
      let guesses: number[][];
      try {
        guesses = await this.round(asks);
      } catch {
        // A failed step (a lost device): what the slots hold is unknown, so every session starts over (on the device it ran on).
        if (device === this.device) for (const s of [...this.holders]) this.unslot(s);
        guesses = asks.map(() => []);
      }

      asks.forEach((a, i) => a.resolve(guesses[i]!));
    }
    this.rounds = null;
    for (const s of [...this.holders]) if (s.closed) this.unslot(s);
  }

  /** One round: the asks' sessions caught up and their guesses drawn in batched steps of the draft model. */
  private async round(asks: readonly Ask[]): Promise<number[][]> {
    const { kv, runner, env, limits, cutsBack } = this.backend.stepper;
    const round = this.counters.rounds++;
    const device = this.device;
    const inRound = new Set(asks.map((a) => a.session));
    const seqs: Array<Sequence | null> = [];
    let pages = 0;
    for (const { session, ids, count } of asks) {
      const n = Math.min(count, this.backend.contextLength - ids.length);
      if (session.closed || n <= 0 || !this.slotFor(session, inRound)) {
        seqs.push(null);
        continue;
      }
      const slot = session.slot!;
      session.lastRound = round;
      // What its slot holds that the target's tokens still start with stays; the rest (rejected guesses) goes. Its last token is fed again: its draw is the first guess.
      let keep = 0;
      while (keep < session.held.length && keep < ids.length - 1 && session.held[keep] === ids[keep]) keep++;
      if (!cutsBack && keep < session.held.length) keep = 0;
      kv.truncate(slot, keep);
      session.held = session.held.slice(0, keep);
      // The K/V rows it adds: the tokens after `keep`, then every guess but the last.
      const need = kv.pagesNeeded(slot, ids.length - keep + n - 1);
      for (let idle = this.idle(inRound); pages + need > kv.availablePages && idle; idle = this.idle(inRound)) this.unslot(idle);
      if (pages + need > kv.availablePages) {
        seqs.push(null);
        continue;
      }
      pages += need;
      const seq = new Sequence({ promptIds: [...ids], maxTokens: n, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0 }, env);
      seq.reuse(keep);
      // A slot starting over has its per-slot state reset (a recurrent layer's; kept otherwise: it is the state after `keep` tokens).
      if (keep === 0) runner.place(seq, slot);
      this.counters.caughtUp += ids.length - keep;
      seqs.push(seq);
    }
    const live = asks.flatMap((a, i) => (seqs[i] ? [{ seq: seqs[i]!, slot: a.session.slot! }] : []));
    // As the target's scheduler: step n+1 is submitted before step n is read back (a guess drawn on the GPU is fed there).
    let inFlight: StepCompletion | null = null;
    for (;;) {
      let budget = limits.maxTokens - live.length;
      const items: BatchItem[] = [];
      for (const { seq, slot } of live) {
        if (seq.finish || !seq.ready) continue;
        const prefill = seq.pending > 1;
        if (prefill && budget === 0) continue;
        const work = seq.work(prefill ? budget : 1);
        if (prefill) budget -= work.tokens.length;
        items.push({ seq, slot, work });
      }
      if (!items.length) {
        if (!inFlight) break;
        await inFlight();
        inFlight = null;
        continue;
      }
      const done = await runner.submit(items);
      this.counters.steps++;
      if (inFlight) await inFlight();
      inFlight = done;
    }
    // The device was rebuilt meanwhile: the sessions' slots are the new pool's.
    if (device !== this.device) return asks.map(() => []);
    return asks.map((a, i) => {
      const seq = seqs[i];
      if (!seq) return [];
      a.session.held = seq.tokens.slice(0, kv.length(a.session.slot!));
      return seq.tokens.slice(a.ids.length);
    });
  }

  /** Gives a session a slot: a free one, else the idle one's (`idle`: it starts over). */
  private slotFor(session: DraftSession, inRound: ReadonlySet<DraftSession>): boolean {
    if (session.slot !== null) return true;
    if (!this.freeSlots.length) {
      const victim = this.idle(inRound);
      if (!victim) return false;
      this.unslot(victim);
    }
    session.slot = this.freeSlots.pop()!;
    this.holders.add(session);
    return true;
  }

  /** The session holding a slot that drafted least recently, not in this round (null: none). */
  private idle(inRound: ReadonlySet<DraftSession>): DraftSession | null {
    let victim: DraftSession | null = null;
    for (const s of this.holders) if (!inRound.has(s) && (!victim || s.lastRound < victim.lastRound)) victim = s;
    return victim;
  }

  dispose(): Promise<void> {
    return this.backend.dispose();
  }
}
