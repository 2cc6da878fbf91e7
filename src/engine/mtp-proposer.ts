/**
 * Qwen3.5's multi-token-prediction head as a proposer (issue #32, `speculative: {type: "mtp"}`):
 * one guess per step from the head (./mtp-head.ts), no second model.
 *
 * The head's row t takes the trunk's final hidden state h_t (after its output norm) and token
 * t+1, and its logits guess token t+2. Every token a sequence records comes with the hidden state
 * of the row that drew it (the step reads the sampling rows' hidden states back for it), so the
 * pair (h_t, token t+1) is known once token t+1 is recorded; only recorded tokens are fed, so a
 * rejected proposal never reaches the head and its KV needs no rollback. Before each step that
 * samples, `prepare` feeds the pairs recorded since the last step and takes the head's argmax as
 * the guess for the token after the sequence's last (one token: the head's own hidden state is
 * not chained into further guesses). A greedy guess is a function of the tokens before it, so
 * the step's comparison keeps the target's distribution, as for the other proposers.
 *
 * Simplification: the head's KV starts at the prompt's last row (the first row that samples):
 * the prompt's other rows' hidden states are never read back, so the head attends over the
 * output's rows only, at positions counted from there (RoPE's scores depend on the distance
 * between positions, not on where they start). Its guesses are then those of a head that saw a
 * shorter context, which only changes how often they are accepted, never the output.
 */
import { BackendError } from './errors';
import type { GpuMtpHead } from './mtp-head';
import type { Proposer } from './proposer';

/** The engine's MTP head as its proposers share it: one run at a time, a KV slot per sequence. */
export interface MtpGuesser {
  /** A free slot of the head's KV (-1: none free now; the sequence then proposes nothing). */
  acquire(): number;
  /** Feeds rows to slot `slot` (`hidden` f32 [n, hidden], `next` the n tokens after them); the head's greedy guess after the last. */
  guess(slot: number, hidden: Float32Array, next: readonly number[]): Promise<number>;
  /** The slot's rows forgotten, the slot free again. */
  release(slot: number): void;
}

/** A GpuMtpHead behind MtpGuesser: runs queued (they share its buffers), rows in chunks it holds. */
export class MtpDrafter implements MtpGuesser {
  private readonly free: number[];
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly head: GpuMtpHead,
    slots: number,
    private readonly hiddenSize: number,
    private readonly maxRows: number,
  ) {
    this.free = Array.from({ length: slots }, (_, i) => slots - 1 - i);
  }

  acquire(): number {
    return this.free.pop() ?? -1;
  }

  guess(slot: number, hidden: Float32Array, next: readonly number[]): Promise<number> {
    const run = this.queue.then(async () => {
      let logits: Float32Array | null = null;
      const H = this.hiddenSize;
      for (let at = 0; at < next.length; at += this.maxRows) {
        const n = Math.min(this.maxRows, next.length - at);
        logits = await this.head.run(slot, hidden.subarray(at * H, (at + n) * H), next.slice(at, at + n));
      }
      return logits ? argmax(logits) : -1;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  release(slot: number): void {
    this.head.release(slot);
    this.free.push(slot);
  }

  destroy(): void {
    this.head.destroy();
  }
}

/** A request's `speculative: {type: "mtp"}` on a model without a head (400; the engine option fails the load with the same text). */
export function noMtpHead(arch: string): BackendError {
  return new BackendError('invalid_field', 400, `speculative.type "mtp" needs a model with a multi-token-prediction head (Qwen3.5's mtp layer); this ${arch} model has none`, 'speculative');
}

/** The first index of the largest value (the greedy token). */
export function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

export class MtpProposer implements Proposer {
  /** Recorded tokens not yet fed to the head, each with the hidden state of the row that drew it. */
  private pending: { hidden: Float32Array; id: number }[] = [];
  private guessed = { at: -1, id: -1 };
  private slot = -1;
  /** A token was recorded without its row's hidden state (none drawn: e.g. forced by a grammar): the head's rows would skip it, so it guesses no more. */
  private broken = false;

  constructor(private readonly head: MtpGuesser) {}

  observe(hidden: Float32Array | undefined, id: number): void {
    if (!hidden) this.broken = true;
    else if (!this.broken) this.pending.push({ hidden, id });
  }

  async prepare(ids: readonly number[]): Promise<void> {
    if (this.broken || this.pending.length === 0) return;
    if (this.slot < 0) this.slot = this.head.acquire();
    const rows = this.pending;
    this.pending = [];
    if (this.slot < 0) return;
    const H = rows[0]!.hidden.length;
    const hidden = new Float32Array(rows.length * H);
    rows.forEach((r, i) => hidden.set(r.hidden, i * H));
    try {
      const id = await this.head.guess(this.slot, hidden, rows.map((r) => r.id));
      this.guessed = { at: ids.length, id };
    } catch {
      // A guess only: a failed run ends this sequence's guessing (its head rows may be partial).
      this.broken = true;
    }
  }

  propose(ids: readonly number[], _generated: number, max: number): number[] {
    return this.guessed.at === ids.length && this.guessed.id >= 0 && max > 0 ? [this.guessed.id] : [];
  }

  close(): void {
    if (this.slot >= 0) this.head.release(this.slot);
    this.slot = -1;
  }
}
