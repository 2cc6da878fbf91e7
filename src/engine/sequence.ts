/**
 * One request's life while it generates, written once for every Backend (the GPU engine and the
 * CPU reference): what it feeds next (prompt chunks, then its last token), the enders (EOS and
 * stop ids, max_tokens clamped to the context), the min_tokens ban, the CPU sampler built with
 * the DRY sequence breakers, the grammar's accept/terminate, logprobs, abort and the finish.
 *
 * A backend only runs steps, feeding each sequence's `work()` through the model and handing back
 * either raw logits (`sampleLogits`) or a token its GPU sampler drew (`record`). The GPU engine's
 * scheduler (./scheduler.ts) batches many sequences into each step and may submit a step before
 * the previous one's draws are recorded (`drawCount`, `ready`); the CPU reference runs one
 * sequence at a time through `runSequence` and its `StepRunner.step`.
 */
import type { SeqImages } from './seq-images';
import { FEED } from '../kernels/feed';
import { needsPenalties } from '../kernels/penalties';
import type { SeqSampling } from '../kernels/sample';
import type { Constraint } from '../structured/spec';
import type { TextTokenizer } from '../text/tokenizer';
import { nextTask, resultFor } from './backend-util';
import { BackendError, GrammarDeadEndError, GrammarRefusedError } from './errors';
import { logprobsOf, TokenSampler } from './logit-processors';
import { proposerFor, type Proposer } from './proposers';
import type { FinishReason, GenerateRequest, GeneratedToken, GenerationResult, SamplingParams } from './types';

/** Greedy draws with every processor off: what a request whose draw is not its output runs with (teacher forcing, embeddings). */
export const GREEDY: Readonly<SamplingParams> = Object.freeze<SamplingParams>({
  temperature: 0, topP: 1, topK: 0, minP: 0, seed: 0, frequencyPenalty: 0, presencePenalty: 0, repetitionPenalty: 1, logitBias: {},
  dry: { multiplier: 0, base: 1.75, allowedLength: 2, sequenceBreakers: [] }, mirostat: { mode: 0, tau: 5, eta: 0.1 }, topLogprobs: 0, logprobs: false,
});

/** What a sequence needs from its backend. */
export interface SequenceEnv {
  /** The tokenizer's end-of-sequence ids (they end generation unless `ignoreEos`). */
  eosIds: readonly number[];
  /** Tokens per sequence: max_tokens is clamped so prompt + output fit. */
  contextLength: number;
  /** Ids that are DRY sequence breakers for a breaker list (`BreakerTable.of`). */
  breakers(list: readonly string[]): (id: number) => boolean;
  /** The model routes tokens to experts (`return_routed_experts` is refused otherwise). */
  moe?: boolean;
  /**
   * Whether a step may verify proposals as rows of their own (speculative decoding; default true).
   * False where a rejected row could not be rolled back: the GPU engine on a model with a recurrent
   * layer whose state keeps no checkpoints (./layer-cache.ts `rollsBack`).
   */
  verifies?: boolean;
}

/**
 * The tokens a sequence feeds in its next step, and whether that step samples a token. With
 * `proposed` (speculative decoding; only on a step that samples) the step verifies them too: each
 * proposed token is a row of its own after `tokens`, fed at the next position, and every row
 * samples (`Sequence.verify`).
 */
export interface SeqStep {
  tokens: readonly number[];
  samples: boolean;
  proposed?: readonly number[];
}

/** A backend's step: runs `batch` (one step for each) and calls `sampleLogits` or `record` on those whose step samples. */
export interface StepRunner {
  step(batch: readonly Sequence[]): Promise<void>;
}

export class Sequence {
  readonly promptIds: readonly number[];
  readonly sampling: SamplingParams;
  readonly minTokens: number;
  /** The request's seed, or one drawn for it, in the samplers' range 0..2^53. */
  readonly seed: number;
  /** Tokens it may generate: max_tokens, clamped to the context left after the prompt. */
  readonly maxTokens: number;
  readonly enders: ReadonlySet<number>;
  readonly constraint: Constraint | undefined;
  /** The grammar's bitmask words for the next token (allocated once), when there is a grammar. */
  readonly maskBits: Uint32Array | null;
  /** Whether EOS/stop ids are banned before min_tokens: under a grammar the grammar decides where output may end. */
  readonly bansEnds: boolean;
  /** Whether each token comes with its final hidden state (`GeneratedToken.hidden`). */
  readonly wantsHidden: boolean;
  /** Whether each token comes with the experts its row was routed to (`GeneratedToken.routedExperts`). */
  readonly wantsRouted: boolean;
  /** Whether the request asked for speculation (its result then counts proposed and accepted tokens, even if none were). */
  readonly speculates: boolean;
  /** Whether tokens its grammar forces are taken without a draw (`jumpForward`). */
  readonly jumpsForward: boolean;
  /** Prompt tokens whose KV was reused (set by the backend when it first places the sequence). */
  cachedTokens = 0;
  /** Its prompt images (a model with a vision tower): their positions, prefix-cache keys and embeddings. */
  images?: SeqImages;
  /** Speculative decoding's guesser (null: none asked for, or the request cannot speculate: see `canSpeculate`). */
  private readonly proposer: Proposer | null;
  /** Its proposer was closed (`release`): the sequence ended or failed. */
  private proposerClosed = false;
  /** Tokens proposed and verified, and those of them the output took. */
  private readonly speculated = { proposed: 0, accepted: 0 };
  /** Tokens (prompt, then output) whose K/V the backend holds so far, cached or computed. */
  private fed = 0;
  /**
   * Draws submitted and not yet recorded: a GPU engine reads a step's tokens back while the next
   * step runs, so a sequence may be one draw (while a step is planned, two) ahead of its `ids`.
   */
  private drawn = 0;
  /** Whether the last draw stays on the GPU where the next step can feed it (FEED) before it is read back. */
  private drawnOnGpu = false;
  private placed = false;
  /** The prompt, then every token generated: what the KV holds, in order (and its last token still to feed). */
  private readonly ids: number[];
  private readonly sampler: TokenSampler;
  private readonly signal: AbortSignal | undefined;
  /** Tokens recorded and not yet taken: a step's draw, then any its grammar forced after it. */
  private readonly out: GeneratedToken[] = [];
  /** Masks of a verify step's rows after the first (`rowMasks`), allocated as proposals first need them. */
  private readonly verifyMasks: Uint32Array[] = [];
  /** Whether `maskBits` holds the grammar's mask for the next draw already (`nextMask`). */
  private maskFresh = false;
  private result: GenerationResult | null = null;
  private readonly resultOf: ReturnType<typeof resultFor>;

  /**
   * A sequence that scores `ids` (tests, `echo` with logprobs): its first `prompt` ids are
   * prefilled as a prompt, then the rest fed one per step; each step's logits (from position
   * prompt − 1 on) go to `onLogits` (through the CPU path) and the next of `ids` is recorded
   * instead of a draw. `prompt` 1 gives the logits after every id.
   */
  static teacherForced(ids: readonly number[], env: SequenceEnv, onLogits: (logits: Float32Array) => void, adapter?: Sequence['adapter'], prompt = 1): Sequence {
    if (!(prompt >= 1 && prompt <= ids.length)) throw new RangeError(`teacher forcing: a prompt of ${prompt} of ${ids.length} ids`);
    const request: GenerateRequest = { promptIds: ids.slice(0, prompt), maxTokens: ids.length - prompt + 1, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0 };
    const seq = new Sequence(request, { ...env, contextLength: Math.max(env.contextLength, ids.length + 1) }, adapter);
    seq.forced = { ids: ids.slice(prompt - 1), onLogits };
    return seq;
  }

  /** Teacher forcing (see `teacherForced`): logits are read back every step and `ids` recorded. */
  private forced: { ids: readonly number[]; onLogits(logits: Float32Array): void } | null = null;

  /** Whether each step's logits must come back to the CPU (teacher forcing). */
  get wantsLogits(): boolean {
    return this.forced !== null;
  }

  constructor(
    request: GenerateRequest,
    env: SequenceEnv,
    /** The LoRA adapter it runs with (its pool id and the prefix-cache namespace of its pages); absent: the base model. */
    readonly adapter?: { readonly id: number; readonly key: string },
  ) {
    const { promptIds, sampling } = request;
    this.promptIds = promptIds;
    this.ids = [...promptIds];
    this.minTokens = request.minTokens;
    const seed = sampling.seed ?? Math.floor(Math.random() * 2 ** 32);
    // The GPU sampler takes seeds in 0..2^53; negative request seeds map into that range.
    this.seed = ((seed % 2 ** 53) + 2 ** 53) % 2 ** 53;
    this.sampling = { ...sampling, seed: this.seed };
    this.maxTokens = Math.max(0, Math.min(request.maxTokens, env.contextLength - promptIds.length));
    this.enders = new Set([...(request.ignoreEos ? [] : env.eosIds), ...request.stopTokenIds]);
    this.constraint = request.constraint;
    this.maskBits = request.constraint ? new Uint32Array(request.constraint.words) : null;
    this.bansEnds = !request.constraint;
    this.wantsHidden = request.returnHiddenStates ?? false;
    this.wantsRouted = request.returnRoutedExperts ?? false;
    this.jumpsForward = request.constraint !== undefined && (request.jumpForward ?? true) && drawIsForced(sampling) && !this.wantsHidden && !this.wantsRouted;
    this.proposer = env.verifies !== false && canSpeculate(request) ? proposerFor(request.speculation) : null;
    this.speculates = request.speculation !== undefined;
    if (this.wantsRouted && !env.moe)
      throw new BackendError('routed_experts_unavailable', 400, 'return_routed_experts needs a mixture-of-experts model; this model has no experts', 'return_routed_experts');
    // The breaker table decodes the vocabulary once per breaker list: only build it for DRY.
    const isBreaker = sampling.dry.multiplier !== 0 ? env.breakers(sampling.dry.sequenceBreakers) : undefined;
    this.sampler = new TokenSampler(this.sampling, { promptIds, ...(isBreaker ? { isBreaker } : {}) });
    this.signal = request.signal;
    this.resultOf = resultFor(promptIds.length);
  }

  /** Speculative decoding: tokens proposed and verified so far, and those of them the output took. */
  get speculation(): { readonly proposed: number; readonly accepted: number } {
    return this.speculated;
  }

  /** Tokens generated so far. */
  get generated(): number {
    return this.ids.length - this.promptIds.length;
  }

  /** The prompt and the tokens generated so far (read-only view; the prefix cache keys pages by it). */
  get tokens(): readonly number[] {
    return this.ids;
  }

  /** Tokens whose K/V the backend holds (see `reuse`, `advance`, `restart`), a drawn token fed before it is known included. */
  get kvLength(): number {
    return this.fed;
  }

  /** Tokens whose K/V the backend holds and whose ids are known: what the prefix cache may key. */
  get keyedLength(): number {
    return Math.min(this.fed, this.ids.length);
  }

  /** Tokens drawn so far, those not yet read back included: the count the next draw follows. */
  get drawCount(): number {
    return this.generated + this.drawn;
  }

  /**
   * Whether the sequence can take part in the next step: nothing drawn is awaited, or its draw
   * stays on the GPU (the next step feeds it) and it may draw more. A sequence whose draw is read
   * back to the CPU (a grammar to advance, a CPU sampler) waits for that readback.
   */
  get ready(): boolean {
    return this.drawn === 0 || (this.drawnOnGpu && this.drawCount < this.maxTokens);
  }

  /** The result once the sequence ended, else null. */
  get finish(): GenerationResult | null {
    return this.result;
  }

  get aborted(): boolean {
    return this.signal?.aborted ?? false;
  }

  /**
   * The backend holds the K/V of the first `tokens` tokens already (a cached prefix): feeding
   * starts after them. The first placement's count is the request's `cachedTokens`.
   */
  reuse(tokens: number): void {
    if (!this.placed) this.cachedTokens = tokens;
    this.placed = true;
    this.fed = tokens;
  }

  /** The backend dropped this sequence's K/V (preempted): it is fed again from the start (or a cached prefix). Only between steps, with nothing drawn awaited. */
  restart(): void {
    if (this.drawn !== 0) throw new Error('a sequence restarts only once its draws are recorded');
    this.fed = 0;
  }

  /**
   * The backend lost this sequence's K/V and the draws it had not read back (the GPU device was
   * lost, ./recovery.ts): it is fed its prompt and output again from the start, and those draws
   * are drawn again. A draw follows (seed, draws before it) and the grammar moved only on
   * recorded tokens, so they come out as they would have.
   */
  lose(): void {
    this.fed = 0;
    this.drawn = 0;
    this.drawnOnGpu = false;
  }

  /** Tokens still to feed before the next draw: the rest of the prompt (and, after a restart, of the output), else the last token. */
  get pending(): number {
    return this.ids.length + this.drawn - this.fed;
  }

  /**
   * This step's work: the next chunk of at most `chunk` of the tokens not yet fed (the prompt,
   * or the prompt and output again after a restart; normally just the last generated token, or
   * FEED when that token was drawn on the GPU and is not read back yet). Only a chunk that
   * reaches the last token samples. Call `advance` once the step is submitted.
   */
  work(chunk: number, maxProposed = 0): SeqStep {
    if (this.drawn > 0) return { tokens: [FEED], samples: true };
    const tokens = this.ids.slice(this.fed, this.fed + chunk);
    const samples = this.fed + tokens.length === this.ids.length;
    const proposed = samples ? this.proposals(maxProposed) : [];
    return proposed.length ? { tokens, samples, proposed } : { tokens, samples };
  }

  /**
   * What the step that samples next would verify (`work`), at most `max`: proposals only where
   * every one could still be output (max_tokens, hence the context). The same until a token is
   * recorded (a proposer's guess follows the tokens so far).
   */
  proposals(max: number): readonly number[] {
    const room = Math.min(max, this.maxTokens - this.generated - 1);
    const guess = this.proposer && room > 0 ? this.proposer.propose(this.ids, this.generated, room).slice(0, room) : [];
    return this.constraint && guess.length ? guess.slice(0, this.grammarTakes(guess)) : guess;
  }

  /**
   * How many of `guess` the grammar takes in order (a token it refuses ends a proposal: the row's
   * draw, masked, could never equal it); the grammar is walked through them and rolled back.
   */
  private grammarTakes(guess: readonly number[]): number {
    const c = this.constraint!;
    let n = 0;
    while (n < guess.length && !c.isTerminated() && c.accept(guess[n]!)) n++;
    c.rollBack!(n);
    return n;
  }

  /**
   * Under a grammar, the masks of a verify step's rows (`work` with `proposed`, at most maxSeqs
   * rows): row 0's is the grammar's mask now, row i's its mask after the first i proposals, which
   * the grammar accepts for the look and rolls back after. A row past the grammar's end (its
   * draw is never taken: the sequence ends before it) allows everything.
   */
  async rowMasks(proposed: readonly number[]): Promise<readonly Uint32Array[]> {
    const c = this.constraint!;
    const first = await this.nextMask();
    while (this.verifyMasks.length < proposed.length) this.verifyMasks.push(new Uint32Array(c.words));
    let n = 0;
    try {
      for (; n < proposed.length; n++) {
        const bits = this.verifyMasks[n]!;
        if (c.isTerminated() || !c.accept(proposed[n]!)) {
          for (let m = n; m < proposed.length; m++) this.verifyMasks[m]!.fill(0xffffffff);
          break;
        }
        if (c.isTerminated()) bits.fill(0xffffffff);
        else await c.mask(bits);
      }
    } finally {
      c.rollBack!(n);
    }
    return [first, ...this.verifyMasks.slice(0, proposed.length)];
  }

  /** Whether each sampling row's final hidden state is read back: asked for, or its proposer's input (an MTP head). */
  get readsHidden(): boolean {
    return this.wantsHidden || this.proposer?.observe !== undefined;
  }

  /**
   * The rows of `work` whose next token is known already (all but a sampling chunk's last: the
   * prompt's, or the output's fed again), for a proposer that reads them (an MTP head): their
   * positions from `from`, `next` those tokens; null when there are none or no such proposer.
   * Before `advance`; the step runner hands them over with `observeRows` once the step is submitted.
   */
  knownRows(work: SeqStep): { from: number; next: number[] } | null {
    if (!this.proposer?.observeRows || this.drawn > 0) return null;
    const n = Math.min(work.tokens.length, this.ids.length - 1 - this.fed);
    return n > 0 ? { from: this.fed, next: this.ids.slice(this.fed + 1, this.fed + 1 + n) } : null;
  }

  /** `knownRows`' rows to the proposer: their final hidden states are f32 rows `at`.. of `rows`, written by the step just submitted. */
  observeRows(rows: GPUBuffer, at: number, known: { from: number; next: readonly number[] }): void {
    this.proposer?.observeRows?.(rows, at, known.from, known.next);
  }

  /** Whether its proposer guesses asynchronously (a draft model): the scheduler awaits `prepare` before planning its step. */
  get prepares(): boolean {
    return this.proposer?.prepare !== undefined;
  }

  /**
   * Lets an asynchronous proposer (a draft model) compute its guess for the tokens so far, which
   * `proposals` then returns; at most `max` tokens, within max_tokens as `proposals`.
   */
  async prepare(max: number): Promise<void> {
    const room = Math.min(max, this.maxTokens - this.generated - 1);
    if (this.proposer?.prepare && room > 0 && !this.result) await this.proposer.prepare(this.ids, this.generated, room);
  }

  /**
   * The step that feeds `work` is submitted; `onGpu`: the token it draws stays on the GPU for the
   * next step to feed. A sequence that speculates reads every draw back: its next proposal
   * follows the token drawn.
   */
  advance(work: SeqStep, onGpu = false): void {
    this.fed += work.tokens.length + (work.proposed?.length ?? 0);
    if (work.samples) {
      this.drawn++;
      this.drawnOnGpu = onGpu && !this.proposer;
    }
  }

  /**
   * A verify step's draws (`draws[i]`: the token drawn at row i, after `tokens` and the first i
   * proposals) are recorded in order while each equals the proposal fed after it: the first draw
   * that differs is recorded and ends the run, as does anything that ends the sequence (a stop
   * id, max_tokens). With a proposer whose guesses are certain (a lookup), this is the standard
   * accept/reject rule: the target's draw at a row is accepted with probability p(proposal), and
   * otherwise is a draw from the residual (p without the proposal, renormalised), so the output
   * keeps the target's distribution; and row i draws with the sampler's counter at the output's
   * length, as decoding without speculation does. Afterwards the sequence holds K/V only for the
   * tokens recorded, their last excepted (`kvLength`): the backend rolls its cache back to it.
   */
  verify(draws: readonly GeneratedToken[], proposed: readonly number[]): void {
    this.speculated.proposed += proposed.length;
    for (let i = 0; i < draws.length; i++) {
      const hit = i < proposed.length && draws[i]!.id === proposed[i];
      // Counted before recording: a draw that ends the sequence is in its result's counts.
      if (hit) this.speculated.accepted++;
      this.record(draws[i]!);
      if (this.result || !hit) break;
    }
    this.drawn = 0;
    this.fed = Math.min(this.fed, this.ids.length - 1);
  }

  /** Ids that may not be drawn at the draw after `count` tokens (default: the next one): EOS and stop ids before min_tokens. */
  banned(count = this.drawCount): number[] {
    return count < this.minTokens && this.bansEnds ? [...this.enders] : [];
  }

  /** The GPU sampler's parameters for this step (its RNG counter is the tokens drawn before this one, as the CPU sampler's output length). */
  gpuSampling(): SeqSampling {
    const p = this.sampling;
    return {
      temperature: p.temperature,
      topK: p.topK,
      topP: p.topP,
      minP: p.minP,
      seed: this.seed,
      step: this.drawCount,
      logprobs: p.logprobs,
      topLogprobs: p.logprobs ? p.topLogprobs : 0,
    };
  }

  /**
   * Draws this step's token on the CPU from its logits (raw, after the grammar's mask): every
   * logit processor, then the draw; logprobs are of these logits. `hidden`, `routed`: the hidden
   * state the logits came from and its row's routed experts, when the sequence wants them.
   */
  sampleLogits(logits: Float32Array, hidden?: Float32Array, routed?: number[][]): void {
    if (this.forced) {
      this.forced.onLogits(logits);
      this.record({ id: this.forced.ids[this.generated + 1] ?? 0 });
      return;
    }
    this.record(this.draw(logits, hidden, routed));
  }

  /** A CPU draw from this step's logits (see `sampleLogits`), not recorded: a verify step's row draws (`verify`). */
  draw(logits: Float32Array, hidden?: Float32Array, routed?: number[][]): GeneratedToken {
    const id = this.sampler.sample(logits, this.banned(this.generated));
    const p = this.sampling;
    return { id, ...(p.logprobs ? logprobsOf(logits, id, p.topLogprobs) : {}), ...(hidden ? { hidden } : {}), ...(routed ? { routedExperts: routed } : {}) };
  }

  /**
   * Takes this step's token (drawn on the CPU or by a GPU sampler): the grammar accepts it, and
   * a stop id, the grammar's end or max_tokens ends the sequence.
   */
  record(token: GeneratedToken): void {
    // The proposer's rows (an MTP head) take each token with its row's hidden state, which the output carries only if asked for.
    if (this.proposer?.observe) {
      this.proposer.observe(token.hidden, token.id, this.ids.length - 1);
      if (token.hidden && !this.wantsHidden) {
        const { hidden: _, ...rest } = token;
        token = rest;
      }
    }
    if (this.constraint && !this.constraint.accept(token.id)) {
      // The draw followed this step's mask: an empty mask means the grammar could not go on.
      const param = this.constraint.param ?? null;
      throw this.maskBits!.some((w) => w !== 0) ? new GrammarRefusedError(token.id, param) : new GrammarDeadEndError(this.generated, param);
    }
    this.maskFresh = false;
    this.drawn = Math.max(0, this.drawn - 1);
    this.ids.push(token.id);
    this.out.push(token);
    const n = this.generated;
    if (this.enders.has(token.id)) this.end('stop', token.id);
    else if (this.constraint?.isTerminated()) this.end('stop');
    else if (n >= this.maxTokens) this.end('length');
  }

  /** The tokens recorded at the last step, one per call, each once (null when none is left, e.g. after a prefill chunk). */
  take(): GeneratedToken | null {
    return this.out.shift() ?? null;
  }

  /** The grammar's mask for the next draw, written into `maskBits` once per draw (`jumpForward` may have written it). */
  async nextMask(): Promise<Uint32Array> {
    if (!this.maskFresh) {
      await this.constraint!.mask(this.maskBits!);
      this.maskFresh = true;
    }
    return this.maskBits!;
  }

  /**
   * Jump-forward decoding (as SGLang's, issue #26 point 3), after a draw was recorded: while the
   * grammar's mask allows exactly one token, that token is recorded without a draw. The next
   * step feeds them all with the last draw, as one chunk (`work`), and samples once after them.
   *
   * The output is the one token-by-token decoding gives, under any sampling settings this runs
   * with (see drawIsForced): a draw from logits masked to one finite entry can only give that
   * entry, and the GPU sampler's counter (`gpuSampling().step`) counts forced tokens as draws.
   * Only such tokens are jumped: a forced string that the vocabulary can split several ways
   * (`"name"` as `"`+`name` or `"n`+`ame`) leaves more than one token allowed, and which one the
   * model takes is its draw's to decide, so the jump stops there. The mask it computed last is
   * the next draw's (`nextMask`); xgrammar's jump-forward string gates the look, so a step whose
   * grammar forces no text computes its mask as before, while the GPU runs the forward pass.
   */
  async jumpForward(): Promise<void> {
    if (!this.jumpsForward || this.drawn !== 0) return;
    while (!this.result && this.constraint!.forcesText?.()) {
      const id = onlyAllowed(await this.nextMask());
      if (id < 0) return;
      this.sampler.note(id);
      this.record({ id });
    }
  }

  /** Ends the sequence; the first reason given stands. */
  end(reason: FinishReason, stopTokenId?: number): void {
    if (!this.result) this.release(true);
    this.result ??= { ...this.resultOf(reason, this.generated, this.cachedTokens, stopTokenId), ...(this.speculates ? { speculation: { ...this.speculated } } : {}) };
  }

  /**
   * It left the batch: its proposer lets go of what it holds for it (a draft model's KV slot) at
   * once, for good when it ended or failed (`ended`), for now when it is to be fed again
   * (preempted, its device lost: asked again, the proposer starts over). The scheduler calls it on
   * every way out, so a failed sequence frees its draft slot before its consumer reads the error.
   */
  release(ended: boolean): void {
    if (this.proposerClosed) return;
    if (!ended) return this.proposer?.suspend?.();
    this.proposerClosed = true;
    this.proposer?.close?.();
  }

  /**
   * At a step boundary: ends the sequence if it was aborted, or if it may sample nothing more
   * (max_tokens 0: no prefill is run for it). Returns whether it ended.
   */
  checkEnd(): boolean {
    if (this.result) return true;
    if (this.aborted) this.end('abort');
    else if (this.generated >= this.maxTokens) this.end('length');
    return this.result !== null;
  }
}

/**
 * Whether a draw from logits masked to one token must give that token, with nothing else of the
 * sequence's state depending on the draw itself: no logprobs (the token's would come from the
 * forward pass), no mirostat (its running mu moves with every draw), no count-based penalties or
 * DRY (the GPU penalties op counts the tokens its sampler drew, which a forced token never is).
 */
function drawIsForced(p: SamplingParams): boolean {
  return !p.logprobs && p.mirostat.mode === 0 && p.dry.multiplier === 0 && p.repetitionPenalty === 1 && p.frequencyPenalty === 0 && p.presencePenalty === 0;
}

/**
 * Whether a request's draws can be verified several per step. Not: under a grammar that cannot
 * roll back (a row's mask needs the grammar advanced through the proposals before it and rolled
 * back after: `rowMasks`), with a CPU sampler or the GPU penalties op (both keep per-sequence state
 * that each draw moves: history counts, mirostat's mu, the min_tokens ban), or with hidden states
 * or routed experts (read back per sequence, not per row). Such a request decodes as without
 * speculation, with the same output.
 */
function canSpeculate(r: GenerateRequest): boolean {
  const p = r.sampling;
  return (!r.constraint || r.constraint.rollBack !== undefined) && !r.returnHiddenStates && !r.returnRoutedExperts && r.minTokens === 0 && !needsPenalties(p, false) && p.dry.multiplier === 0 && p.mirostat.mode === 0;
}

/** The one id a bitmask allows, or -1 when it allows none or several. */
function onlyAllowed(bits: Uint32Array): number {
  let id = -1;
  for (let w = 0; w < bits.length; w++) {
    const word = bits[w]!;
    if (word === 0) continue;
    if (id >= 0 || (word & (word - 1)) !== 0) return -1;
    id = w * 32 + 31 - Math.clz32(word);
  }
  return id;
}

/**
 * The loop between steps for one sequence: run a step, yield its token, and at each boundary
 * give the event loop a turn (so an abort, e.g. a closed connection, is seen) and check the
 * abort. Before the first step: an already aborted request does no work.
 */
export async function* runSequence(seq: Sequence, runner: StepRunner): AsyncGenerator<GeneratedToken, GenerationResult, void> {
  let first = true;
  while (!seq.checkEnd()) {
    if (!first) {
      await nextTask();
      if (seq.checkEnd()) break;
    }
    first = false;
    await runner.step([seq]);
    for (let token = seq.take(); token; token = seq.take()) yield token;
  }
  return seq.finish!;
}

/**
 * Which token ids contain a DRY sequence breaker, per breaker list: computed once per list by
 * decoding the vocabulary, then a set lookup per id. One per backend (per tokenizer).
 */
export class BreakerTable {
  private readonly sets = new Map<string, Set<number>>();

  constructor(private readonly tokenizer: Pick<TextTokenizer, 'vocabSize' | 'decode'>) {}

  of(list: readonly string[]): (id: number) => boolean {
    const key = JSON.stringify(list);
    let set = this.sets.get(key);
    if (!set) {
      set = new Set();
      if (list.some((b) => b.length > 0)) {
        for (let id = 0; id < this.tokenizer.vocabSize; id++) {
          const text = this.tokenizer.decode([id]);
          if (list.some((b) => b.length > 0 && text.includes(b))) set.add(id);
        }
      }
      this.sets.set(key, set);
    }
    const s = set;
    return (id) => s.has(id);
  }
}
