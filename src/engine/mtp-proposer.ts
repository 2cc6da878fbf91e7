/**
 * Qwen3.5's multi-token-prediction head as a proposer (issue #32, `speculative: {type: "mtp", k}`):
 * up to k chained guesses per step from the head (./mtp-head.ts), no second model.
 *
 * The head's row t takes the trunk's final hidden state h_t (after its output norm) and token
 * t+1, and its logits guess token t+2. As vLLM's MTP proposer does at prefill, the head's KV holds
 * a row for every position of the context, at the sequence's own positions, so its first guess
 * attends over the whole prompt:
 * - the rows whose next token is known as they are fed (the prompt's, all but its last) reach the
 *   head on the GPU: the step norms every row into GpuForward's rows buffer, and right after the
 *   step's submission the head copies this sequence's rows into its input and runs over them
 *   (`observeRows`, GpuMtpHead.feed: no readback, no logits), chunk by chunk as the prompt is
 *   prefilled;
 * - the rows that sample (the prompt's last, then each output token's) pair with a token known only
 *   once it is drawn: every token a sequence records comes with the hidden state of the row that
 *   drew it (the step reads the sampling rows' hidden states back, 4 · hidden bytes a token), so the
 *   pair (h_t, token t+1) is known once token t+1 is recorded. Before each step that samples,
 *   `prepare` feeds the pairs recorded since the last step and takes the head's argmax as the guess
 *   for the token after the sequence's last, then chains: guess j + 1 is the head's layer run again
 *   on (its own hidden state of guess j's row, guess j), k guesses in one GPU submission that reads
 *   back k token ids (reference/mtp.ts `chain`: which hidden state, after vLLM).
 * Only recorded tokens become fed rows, so a rejected proposal never reaches the head as one; the
 * chained rows' KV is dropped after the run, so the next feed writes those positions again. A
 * greedy guess is a function of the tokens before it, so the step's comparison keeps the target's
 * distribution, as for the other proposers.
 *
 * A prompt partly served from the prefix cache: the cached rows' hidden states were never
 * computed (the cache keeps the trunk's K/V, not its hidden states, and the head's own pages are
 * not cached), so the head's KV starts at the first row the step computes: it attends over the
 * rest of the context only, at positions counted from there (RoPE's scores depend on the distance
 * between positions, not on where they start). A preempted sequence gives its head slot back
 * (`suspend`); fed again from the start (or a cached prefix), its rows reach the head again (rows
 * the head holds already, were it kept, are skipped). A row missing
 * from the head (a token recorded without a hidden state, e.g. forced by a grammar; no free slot)
 * ends the sequence's guessing. All of this changes only how often guesses are accepted, never the
 * output.
 */
import { BackendError } from './errors';
import type { GpuMtpHead } from './mtp-head';
import type { Proposer } from './proposer';

/**
 * Chained guesses a request may ask for (`speculative.k`, 1..8). The head is trained to guess one
 * token ahead; a chained guess feeds it its own output, so acceptance falls with depth (vLLM's
 * Qwen3-Next recipe runs 2, DeepSeek's 1..3), and each guess is a sequential pass of the head's
 * layer in the submission and a verify row of the step (rows are bounded by the batch's maxSeqs).
 * 8 leaves room to measure past the useful depth while bounding the staged step metadata.
 */
export const MTP_MAX_GUESSES = 8;
/** `k` when a request or the engine option gives none. */
export const MTP_DEFAULT_GUESSES = 1;

/** The engine's MTP head as its proposers share it: one run at a time, a KV slot per sequence. */
export interface MtpGuesser {
  /** A free slot of the head's KV (-1: none free now; the sequence then proposes nothing). */
  acquire(): number;
  /** Feeds rows to slot `slot` (`hidden` f32 [n, hidden], `next` the n tokens after them); the head's `k` chained greedy guesses after the last (fewer where its KV has no room). */
  guess(slot: number, hidden: Float32Array, next: readonly number[], k: number): Promise<number[]>;
  /** Feeds rows to slot `slot` from the GPU (rows `at`.. of `rows`, f32 [·, hidden], `next` the tokens after them) at once, ahead of any later guess; no guess. */
  feed(slot: number, rows: GPUBuffer, at: number, next: readonly number[]): void;
  /** The slot's rows forgotten, the slot free again. */
  release(slot: number): void;
}

/** A GpuMtpHead behind MtpGuesser: runs queued (they share its buffers), rows in chunks it holds. */
export class MtpDrafter implements MtpGuesser {
  private readonly free: number[];
  private queue: Promise<unknown> = Promise.resolve();
  /** Its head could not be made again on a new device: no slot for anyone, so no guesses (the output is the same). */
  private down = false;

  constructor(
    /** The head on the device now (another after a lost device: `rebuilt`). */
    public head: GpuMtpHead,
    slots: number,
    private readonly hiddenSize: number,
    private readonly maxRows: number,
  ) {
    this.free = Array.from({ length: slots }, (_, i) => slots - 1 - i);
  }

  acquire(): number {
    return this.down ? -1 : (this.free.pop() ?? -1);
  }

  /** After a lost device (every proposer gave its slot back: `MtpProposer.suspend`): the head made on the new one, or null where that failed. */
  rebuilt(head: GpuMtpHead | null): void {
    if (head) this.head = head;
    this.down = head === null;
  }

  guess(slot: number, hidden: Float32Array, next: readonly number[], k: number): Promise<number[]> {
    const run = this.queue.then(async () => {
      let guesses: number[] = [];
      const H = this.hiddenSize;
      // Chunks of the head's rows; the last one chains the guesses (the others read nothing back).
      for (let at = 0; at < next.length; at += this.maxRows) {
        const n = Math.min(this.maxRows, next.length - at);
        guesses = await this.head.run(slot, hidden.subarray(at * H, (at + n) * H), next.slice(at, at + n), at + n === next.length ? Math.min(k, this.head.maxGuesses) : 0);
      }
      return guesses;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Submitted now, not queued behind a guess in flight: a run writes the head's buffers and submits
   * within one turn of the event loop, so a feed between two runs takes the queue after the one and
   * before the other.
   */
  feed(slot: number, rows: GPUBuffer, at: number, next: readonly number[]): void {
    this.head.feed(slot, rows, at, next);
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

/** `speculative.k` of an MTP request out of 1..MTP_MAX_GUESSES (400; the engine option fails the load with the same text). */
export function mtpGuessesOutOfRange(k: number): BackendError | null {
  if (Number.isInteger(k) && k >= 1 && k <= MTP_MAX_GUESSES) return null;
  return new BackendError('invalid_field', 400, `speculative.k of "mtp" must be an integer from 1 to ${MTP_MAX_GUESSES} (chained guesses per step); got ${k}`, 'speculative');
}

export class MtpProposer implements Proposer {
  /** Recorded tokens not yet fed to the head, each with the hidden state of the row that drew it. */
  private pending: { hidden: Float32Array; id: number }[] = [];
  private guessed: { at: number; ids: readonly number[] } = { at: -1, ids: [] };
  private slot = -1;
  /** The head's rows would miss a position (a token recorded without its row's hidden state, none drawn: e.g. forced by a grammar; no free slot): it guesses no more. */
  private broken = false;
  /** The position of the row the head takes next, pending rows counted (-1: none yet; the first is the first row a step computed). */
  private nextRow = -1;

  /** `k`: chained guesses per step at most (MTP_MAX_GUESSES). */
  constructor(
    private readonly head: MtpGuesser,
    private readonly k = MTP_DEFAULT_GUESSES,
  ) {}

  observe(hidden: Float32Array | undefined, id: number, row: number): void {
    if (!hidden) this.broken = true;
    else if (this.take(row, 1) === 0) this.pending.push({ hidden, id });
  }

  observeRows(rows: GPUBuffer, at: number, from: number, next: readonly number[]): void {
    const skip = this.take(from, next.length);
    if (skip < 0) return;
    // They go to the head now, ahead of the pending rows `prepare` feeds: none is pending here (a
    // step feeds rows whose next token is known only before the first draw, or again after a
    // preemption, when the head holds them already), but a head missing rows must not guess.
    if (this.pending.length) this.broken = true;
    else {
      try {
        this.head.feed(this.slot, rows, at + skip, next.slice(skip));
      } catch {
        this.broken = true;
      }
    }
  }

  /**
   * Rows at positions `from`.. (`n` of them) offered to the head: how many of the first it holds
   * already (after a preemption the sequence is fed again), or -1 when it takes none of them (it
   * holds them all, or it is broken: a gap before them, no free slot). The rest count as taken.
   */
  private take(from: number, n: number): number {
    if (this.broken) return -1;
    if (this.nextRow < 0) this.nextRow = from;
    const skip = this.nextRow - from;
    if (skip < 0) this.broken = true;
    else if (skip < n && this.slot < 0 && (this.slot = this.head.acquire()) < 0) this.broken = true;
    if (this.broken || skip >= n) return -1;
    this.nextRow = from + n;
    return skip;
  }

  /** `max`: the proposals the step could take (the sequence's room): fewer guesses are chained when it is below k. */
  async prepare(ids: readonly number[], _generated = 0, max = this.k): Promise<void> {
    // Rows are pending only once `take` gave the sequence a slot.
    if (this.broken || this.pending.length === 0) return;
    const rows = this.pending;
    this.pending = [];
    const H = rows[0]!.hidden.length;
    const hidden = new Float32Array(rows.length * H);
    rows.forEach((r, i) => hidden.set(r.hidden, i * H));
    try {
      const guesses = await this.head.guess(this.slot, hidden, rows.map((r) => r.id), Math.max(1, Math.min(this.k, max)));
      this.guessed = { at: ids.length, ids: guesses };
    } catch {
      // A guess only: a failed run ends this sequence's guessing (its head rows may be partial).
      this.broken = true;
    }
  }

  propose(ids: readonly number[], _generated: number, max: number): number[] {
    return this.guessed.at === ids.length ? this.guessed.ids.slice(0, Math.max(0, max)) : [];
  }

  close(): void {
    if (this.slot >= 0) this.head.release(this.slot);
    this.slot = -1;
  }

  /**
   * Preempted (or its device lost): the head's slot and rows go back now. Fed again, every row the
   * sequence computes up to its last has a known next token, so the head gets them all again on the
   * GPU from the first (a row once missing, e.g. a forced token's, is there again).
   */
  suspend(): void {
    this.close();
    this.pending = [];
    this.guessed = { at: -1, ids: [] };
    this.nextRow = -1;
    this.broken = false;
  }
}
