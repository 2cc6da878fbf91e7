/**
 * Proposers of speculative decoding (issue #32): each guesses the tokens that follow a sequence,
 * and one step of the target model verifies the guess (./sequence.ts `verify`). A proposer only
 * guesses: a wrong guess costs the rows it took, never the output.
 *
 * Both proposers here are lookups, deterministic (their "draft distribution" is one token with
 * probability 1), so verification is a draw from the target at each row and a comparison:
 *   - `prediction` (OpenAI's Predicted Outputs): the caller's text, which the output is expected
 *     to largely repeat; after a mismatch the lookup finds where the output's last tokens occur in
 *     it again (re-alignment), as prompt-lookup decoding does.
 *   - `ngram` (prompt-lookup decoding): the last n tokens of the prompt and output so far, found
 *     earlier in them; the tokens that followed are the guess.
 * The third, a draft model (`DraftProposer`, the model in ./draft.ts), guesses by running a smaller model greedily: its guess
 * too is one token per position given the tokens before (greedy is a function of them), so the
 * same comparison keeps the target's distribution. It guesses asynchronously (`prepare`), and keeps
 * the sequence's place in the draft while the sequence runs (until `close`, or `suspend` when preempted).
 * The fourth, a model's MTP head (`MtpProposer`, ./mtp-proposer.ts), guesses up to k tokens greedily,
 * chained, from the target's hidden states, which it gets with each recorded token (`observe`).
 */


import { MtpProposer, type MtpGuesser } from './mtp-proposer';
import type { Proposer } from './proposer';

export type { Proposer } from './proposer';

/** What a request asks to speculate with (GenerateRequest.speculation). */
export interface SpeculationRequest {
  /** Token ids of the predicted output (the `prediction` field's content, tokenized). */
  prediction?: readonly number[];
  /** Prompt-lookup decoding: match up to `n` tokens, propose up to `k`. */
  ngram?: { n: number; k: number };
  /** A draft model's greedy guesses (EngineOptions.draft): up to `k` tokens per step. */
  draft?: Drafter;
  /** The model's MTP head (./mtp-proposer.ts): up to `k` chained greedy guesses per step (1..MTP_MAX_GUESSES). */
  mtp?: { k: number; head?: MtpGuesser };
}

/** A draft model as a proposer sees it (./draft.ts `DraftModel`). */
export interface Drafter {
  /** Tokens it guesses per step at most (EngineOptions.draft.tokens). */
  readonly tokens: number;
  /** A sequence's place in it (its own KV, kept from guess to guess), until `close`. */
  open(): DraftStream;
}

/** One sequence's guesses from a draft model. */
export interface DraftStream {
  /** Its greedy continuation of `ids`, `count` tokens (fewer where its context ends; [] when it cannot run). */
  draft(ids: readonly number[], count: number): Promise<number[]>;
  /** What the draft holds for it goes back (its sequence ended, failed or left the batch for now); a later `draft` starts over. */
  close(): void;
}

/** Tokens a prediction proposes per step at most (llama.cpp's default draft length). */
export const DEFAULT_PROPOSAL = 16;
/** Tokens of the output's tail a prediction is re-aligned by. */
const PREDICTION_MATCH = 4;


/** One row per proposer kind: how a request's field becomes its proposer. */
const PROPOSERS: { [K in keyof Required<SpeculationRequest>]: (spec: NonNullable<SpeculationRequest[K]>) => Proposer } = {
  prediction: (tokens) => new PredictionProposer(tokens),
  ngram: ({ n, k }) => new NgramProposer(n, k),
  draft: (spec) => new DraftProposer(spec),
  // The engine hands the head in (GpuEngine.generate refuses `mtp` on a model without one).
  mtp: (spec) => new MtpProposer(spec.head!, spec.k),
};

/** The request's proposer, or null when it asks for none (a prediction wins over n-gram lookup, which wins over a draft model, which wins over an MTP head). */
export function proposerFor(spec: SpeculationRequest | undefined): Proposer | null {
  if (spec?.prediction?.length) return PROPOSERS.prediction(spec.prediction);
  if (spec?.ngram) return PROPOSERS.ngram(spec.ngram);
  if (spec?.draft) return PROPOSERS.draft(spec.draft);
  if (spec?.mtp?.head) return PROPOSERS.mtp(spec.mtp);
  return null;
}

/**
 * Where the last `m` tokens of `tail` occur in `source`, among occurrences that end at or before
 * index `end`: the index just after the occurrence, the first such index at or after `from` if
 * any, else the last before it; -1 when they do not occur.
 */
export function findAfter(source: readonly number[], tail: readonly number[], m: number, from: number, end = source.length): number {
  let before = -1;
  for (let i = m; i <= end; i++) {
    let ok = true;
    for (let j = 1; j <= m && ok; j++) ok = source[i - j] === tail[tail.length - j];
    if (!ok) continue;
    if (i >= from) return i;
    before = i;
  }
  return before;
}

/**
 * Predicted Outputs: proposes the prediction's tokens from where the output is in it. At the
 * start that is the prediction's start; after each step, where the output's last tokens (up to
 * PREDICTION_MATCH, fewer if the longer tails are not found) occur in the prediction, nearest at
 * or after the last place found, so an edit that inserts or drops text re-aligns on the text after it.
 */
export class PredictionProposer implements Proposer {
  /** Index in the prediction of the next expected token. */
  private at = 0;

  constructor(private readonly prediction: readonly number[]) {}

  propose(ids: readonly number[], generated: number, max: number): number[] {
    if (generated > 0) {
      const out = ids.slice(ids.length - generated);
      let at = -1;
      for (let m = Math.min(PREDICTION_MATCH, generated); m >= 1 && at < 0; m--) at = findAfter(this.prediction, out, m, this.at);
      if (at < 0) return [];
      this.at = at;
    }
    return this.prediction.slice(this.at, this.at + Math.min(max, DEFAULT_PROPOSAL));
  }
}

/**
 * Prompt-lookup decoding (as vLLM's `ngram` and llama.cpp's lookup): the last `n` tokens (or
 * fewer, down to 1) of everything so far, found earlier in it (the most recent occurrence); up to
 * `k` of the tokens after that occurrence are the guess.
 */
export class NgramProposer implements Proposer {
  constructor(
    private readonly n: number,
    private readonly k: number,
  ) {}

  propose(ids: readonly number[], _generated: number, max: number): number[] {
    const want = Math.min(this.k, max);
    for (let m = Math.min(this.n, ids.length - 1); m >= 1; m--) {
      // Occurrences ending before the tail itself; the last one is the most recent context.
      const at = findAfter(ids, ids, m, ids.length, ids.length - 1);
      if (at >= 0) return ids.slice(at, at + want);
    }
    return [];
  }
}

/**
 * A draft model's guesses: before each step that samples, the draft model continues the sequence
 * greedily by up to its `tokens` (`prepare`: one round of the draft, batched with every other
 * sequence's), and the step verifies them (`propose` hands out the guess made for exactly these
 * ids). A greedy draft is a function of the tokens before each guess, so, as for lookups,
 * accepting a row when the target's draw equals the guess keeps the target's distribution.
 */
export class DraftProposer implements Proposer {
  /** The guess and the length of the ids it continues. */
  private guess: { at: number; tokens: number[] } = { at: -1, tokens: [] };
  private readonly stream: DraftStream;

  constructor(private readonly drafter: Drafter) {
    this.stream = drafter.open();
  }

  async prepare(ids: readonly number[], _generated: number, max: number): Promise<void> {
    if (this.guess.at === ids.length) return;
    const tokens = await this.stream.draft(ids, Math.min(max, this.drafter.tokens));
    this.guess = { at: ids.length, tokens };
  }

  propose(ids: readonly number[], _generated: number, max: number): number[] {
    return this.guess.at === ids.length ? this.guess.tokens.slice(0, max) : [];
  }

  close(): void {
    this.stream.close();
  }

  /** Preempted: its draft slot goes back at once (fed again, the next guess feeds the draft its tokens from the start). */
  suspend(): void {
    this.stream.close();
  }
}
