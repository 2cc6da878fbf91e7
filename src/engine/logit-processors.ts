/**
 * Logit processors and the token draw, on the CPU, in plain TypeScript. The CPU reference
 * backend samples with these; the GPU sampler is tested against the final filtering step.
 *
 * Order (as llama.cpp's and vLLM's chains): logit_bias → repetition penalty → frequency and
 * presence penalties → DRY → temperature → top-k / top-p / min-p → draw (the GPU sampler's
 * semantics, via its reference `sampleRef`); mirostat replaces the filtering and draw when enabled.
 */
import { sampleRef, uniform01 } from '../kernels/sample';
import type { SamplingParams } from './types';

export { applyFrequencyPresence, applyLogitBias, applyRepetitionPenalty } from '../kernels/penalties-ref';
import { applyFrequencyPresence, applyLogitBias, applyRepetitionPenalty } from '../kernels/penalties-ref';

export interface DryParams {
  multiplier: number;
  base: number;
  allowedLength: number;
}

/** Longest repeat DRY looks at; also caps the exponent so the penalty stays finite. */
const DRY_MAX_MATCH = 50;

/**
 * DRY ("don't repeat yourself", koboldcpp / llama.cpp semantics): for every earlier place where
 * the text's tail already occurred, the token that followed it there would extend the repeat.
 * With a match of `len` tokens (len ≥ allowedLength), that token's logit drops by
 * multiplier · base^(len − allowedLength). Matches never run across a sequence breaker.
 */
export function applyDry(logits: Float32Array, history: readonly number[], p: DryParams, isBreaker: (id: number) => boolean): void {
  const n = history.length;
  if (p.multiplier === 0 || n < 2 || isBreaker(history[n - 1])) return;
  const longest = new Map<number, number>();
  for (let i = n - 2; i >= 0; i--) {
    // Match length of the text ending at i against the text ending at n-1.
    let len = 0;
    while (len <= i && len < DRY_MAX_MATCH && history[i - len] === history[n - 1 - len] && !isBreaker(history[i - len])) len++;
    if (len < p.allowedLength || len === 0) continue;
    const next = history[i + 1];
    if ((longest.get(next) ?? 0) < len) longest.set(next, len);
  }
  for (const [id, len] of longest) if (id >= 0 && id < logits.length) logits[id] -= p.multiplier * Math.pow(p.base, len - p.allowedLength);
}

// ---------------------------------------------------------------------------------------------
// Seeds. The draw itself uses the GPU sampler's counter-based RNG (`uniform01(seed, step)` in
// src/kernels/sample.ts), so a (seed, step) pair gives the same draw on the CPU and the GPU.

/** A 32-bit avalanche mix (murmur3's finaliser). */
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** A seed derived from (seed, index): the choices of an `n > 1` request each get their own stream. */
export function deriveSeed(seed: number, index: number): number {
  return index === 0 ? seed : mix32(mix32(seed >>> 0) ^ mix32(index + 0x632be5ab));
}

// ---------------------------------------------------------------------------------------------
// Filtering and the draw.

/** A candidate list: ids and their probabilities, sorted by probability, highest first. */
interface Candidates {
  ids: number[];
  probs: number[];
}

/** Softmax of logits / temperature over the finite logits, sorted highest first. */
function sortedSoftmax(logits: Float32Array, temperature: number): Candidates {
  const ids: number[] = [];
  for (let i = 0; i < logits.length; i++) if (logits[i] > -Infinity) ids.push(i);
  ids.sort((a, b) => logits[b] - logits[a] || a - b);
  const max = logits[ids[0]];
  const probs = ids.map((id) => Math.exp((logits[id] - max) / temperature));
  return normalise({ ids, probs });
}

function normalise(c: Candidates): Candidates {
  let sum = 0;
  for (const p of c.probs) sum += p;
  return { ids: c.ids, probs: c.probs.map((p) => p / sum) };
}

function truncate(c: Candidates, keep: number): Candidates {
  return keep >= c.ids.length ? c : normalise({ ids: c.ids.slice(0, keep), probs: c.probs.slice(0, keep) });
}

/** Inverse-CDF draw: the first candidate whose cumulative probability exceeds u. */
function draw(c: Candidates, u: number): number {
  let cum = 0;
  for (let i = 0; i < c.ids.length; i++) {
    cum += c.probs[i];
    if (u < cum) return i;
  }
  return c.ids.length - 1;
}

export function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/**
 * The final step without mirostat: temperature, top-k, top-p, min-p and one draw, exactly as the
 * GPU sampler does it (its TypeScript reference), so CPU and GPU backends agree token for token.
 */
export function filterAndDraw(logits: Float32Array, p: Pick<SamplingParams, 'temperature' | 'topK' | 'topP' | 'minP'>, seed: number, step: number): number {
  if (p.temperature === 0) return argmax(logits);
  const s = { temperature: p.temperature, topK: p.topK, topP: p.topP, minP: p.minP, seed, step, logprobs: false, topLogprobs: 0 };
  return sampleRef(logits, s, uniform01(seed, step)).token;
}

/**
 * Mirostat (llama.cpp semantics), which steers the surprise (−log2 p) of drawn tokens towards
 * `tau`. `mu` starts at 2·tau and learns with rate `eta` from each draw's observed surprise.
 * v1 estimates the Zipf exponent from the top 100 probabilities and derives a top-k from it;
 * v2 keeps the tokens whose surprise is at most mu.
 */
export class Mirostat {
  private mu: number;

  constructor(
    private readonly mode: 1 | 2,
    private readonly tau: number,
    private readonly eta: number,
  ) {
    this.mu = 2 * tau;
  }

  sample(logits: Float32Array, temperature: number, u: number): number {
    let c = sortedSoftmax(logits, temperature || 1);
    if (this.mode === 1) c = truncate(c, this.v1TopK(c));
    else {
      let keep = 1;
      while (keep < c.probs.length && -Math.log2(c.probs[keep]) <= this.mu) keep++;
      c = truncate(c, keep);
    }
    const i = draw(c, u);
    const surprise = -Math.log2(c.probs[i]);
    this.mu -= this.eta * (surprise - this.tau);
    return c.ids[i];
  }

  private v1TopK(c: Candidates): number {
    const m = Math.min(100, c.probs.length);
    let num = 0;
    let den = 0;
    for (let i = 0; i < m - 1; i++) {
      const t = Math.log((i + 2) / (i + 1));
      const b = Math.log(c.probs[i] / c.probs[i + 1]);
      num += t * b;
      den += t * t;
    }
    const sHat = den > 0 ? num / den : 1;
    const eps = sHat - 1;
    const n = c.probs.length;
    const k = Math.pow((eps * Math.pow(2, this.mu)) / (1 - Math.pow(n, -eps)), 1 / sHat);
    return Number.isFinite(k) ? Math.max(1, Math.min(n, Math.round(k))) : n;
  }
}

// ---------------------------------------------------------------------------------------------
// The whole chain for one sequence.

export interface SamplerContext {
  /** The prompt's ids (for the repetition penalty and DRY). */
  promptIds: readonly number[];
  /** Ids that are DRY sequence breakers. */
  isBreaker?: (id: number) => boolean;
}

/**
 * One sequence's sampler: keeps the generated ids and mirostat's state, and turns each step's
 * raw logits into the next token. `sample` does not modify `logits`.
 */
export class TokenSampler {
  private readonly generated: number[] = [];
  private readonly mirostat: Mirostat | null;
  private readonly seed: number;

  constructor(
    private readonly p: SamplingParams,
    private readonly ctx: SamplerContext,
  ) {
    this.mirostat = p.mirostat.mode ? new Mirostat(p.mirostat.mode, p.mirostat.tau, p.mirostat.eta) : null;
    // The GPU sampler takes seeds in 0..2^53; negative request seeds map into that range.
    const seed = p.seed ?? Math.floor(Math.random() * 2 ** 32);
    this.seed = ((seed % 2 ** 53) + 2 ** 53) % 2 ** 53;
  }

  /** Picks the next id; `banned` ids (EOS before min_tokens) can never be drawn. */
  sample(raw: Float32Array, banned: readonly number[] = []): number {
    const p = this.p;
    const logits = raw.slice();
    for (const id of banned) if (id >= 0 && id < logits.length) logits[id] = -Infinity;
    applyLogitBias(logits, p.logitBias);
    if (p.repetitionPenalty !== 1) applyRepetitionPenalty(logits, [...this.ctx.promptIds, ...this.generated], p.repetitionPenalty);
    applyFrequencyPresence(logits, this.generated, p.frequencyPenalty, p.presencePenalty);
    if (p.dry.multiplier !== 0) applyDry(logits, [...this.ctx.promptIds, ...this.generated], p.dry, this.ctx.isBreaker ?? (() => false));
    const step = this.generated.length;
    const id =
      this.mirostat && p.temperature > 0
        ? this.mirostat.sample(logits, p.temperature, uniform01(this.seed, step))
        : filterAndDraw(logits, p, this.seed, step);
    this.generated.push(id);
    return id;
  }

  /** A token taken without a draw (jump-forward): it joins the history the penalties and the draw counter read. */
  note(id: number): void {
    this.generated.push(id);
  }
}

/** log-softmax of raw logits: the logprob of `id` and the `top` most likely alternatives. */
export function logprobsOf(logits: Float32Array, id: number, top: number): { logprob: number; top: { id: number; logprob: number }[] } {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const lse = max + Math.log(sum);
  const best: number[] = [];
  if (top > 0) {
    // Keep a small sorted list: top ≤ 20, so this is O(vocab · top) at worst and usually O(vocab).
    for (let i = 0; i < logits.length; i++) {
      if (best.length === top && logits[i] <= logits[best[best.length - 1]]) continue;
      let at = best.length;
      while (at > 0 && logits[best[at - 1]] < logits[i]) at--;
      best.splice(at, 0, i);
      if (best.length > top) best.pop();
    }
  }
  return { logprob: logits[id] - lse, top: best.map((i) => ({ id: i, logprob: logits[i] - lse })) };
}
