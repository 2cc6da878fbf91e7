/**
 * What every proposer of speculative decoding is to a sequence (./sequence.ts): the kinds and the
 * table that makes one from a request are in ./proposers.ts. Its own file so that a proposer in a
 * file of its own (./mtp-proposer.ts) implements it without importing that table.
 */

export interface Proposer {
  /**
   * Up to `max` tokens guessed to follow `ids` (the prompt, then `generated` output tokens); []
   * when it has no guess.
   */
  propose(ids: readonly number[], generated: number, max: number): number[];
  /**
   * A proposer that guesses asynchronously (a draft model) computes its guess for `ids` here,
   * before the step is planned; `propose` then hands it out (and [] for ids it has not prepared).
   */
  prepare?(ids: readonly number[], generated: number, max: number): Promise<void>;
  /** The sequence ended or failed: a proposer that holds something for it (a draft model's KV) lets it go. */
  close?(): void;
  /**
   * The sequence left the batch to be fed again later (preempted, or its device lost): a proposer
   * may let go of what it holds for it now (a draft model's KV slot) and start over when asked again.
   */
  suspend?(): void;
  /**
   * A proposer that reads the target's hidden states (an MTP head) gets each recorded token with
   * the hidden state of the row that drew it (undefined: none was drawn), `row` that row's position.
   */
  observe?(hidden: Float32Array | undefined, id: number, row: number): void;
  /**
   * And the rows of a step whose next token was known as it was fed (a prompt's, or the output's
   * fed again after a preemption): positions `from`.. with `next` their next tokens, their final
   * hidden states f32 rows `at`.. of `rows` on the GPU, written by the step just submitted and
   * overwritten by the next one.
   */
  observeRows?(rows: GPUBuffer, at: number, from: number, next: readonly number[]): void;
}
