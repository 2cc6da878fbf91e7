/**
 * The GPU sampler: logits [S, V] f32 in, token ids [S] (and logprobs when asked) out, in two
 * dispatches — shaders/sample_partial.wgsl reads each row once across many workgroups (partials
 * and top candidates per vocabulary chunk), shaders/sample.wgsl selects per sequence. This module
 * packs the per-sequence parameters, mirrors the kernels' filtering and RNG in TypeScript
 * (`sampleRef`, `uniform01`), and builds the op.
 */
import selectLib from '../../shaders/lib/sample_select.wgsl';
import partialBody from '../../shaders/sample_partial.wgsl';
import selectBody from '../../shaders/sample.wgsl';
import { bindBuffers, createBuffer, identityRows, packParams, STORAGE, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, type Op, type OpContext, type OpLabel } from './op';

export const samplePartialKernel: Kernel = { name: 'sample_partial', source: selectLib + partialBody };
export const sampleKernel: Kernel = { name: 'sample', source: selectLib + selectBody };

/** Workgroup sizes the kernel is specialised and tested at (powers of two). */
export const SAMPLE_WG = [64, 128, 256] as const;

/** Candidates per vocabulary chunk (MAX_CAND in sample_select.wgsl): top-k up to this skips the row walk. */
export const MAX_SAMPLE_CANDIDATES = 64;
/** u32 words of a chunk's partial (PART_WORDS in the kernels). */
const PART_WORDS = 8;

/** Most top logprobs per token (OpenAI allows 20). */
export const MAX_TOP_LOGPROBS = 20;
/** u32 words per sequence in the logprobs output: chosen logprob, count, 20 × (id, logprob). */
export const LOGPROB_WORDS = 2 + 2 * MAX_TOP_LOGPROBS;
/** u32 words per sequence in the parameters buffer. */
export const SAMPLE_PARAM_WORDS = 10;

/** What the sampler needs for one sequence and one step. */
export interface SeqSampling {
  /** 0 (or less): greedy. */
  temperature: number;
  topK: number; // 0 = off
  topP: number; // 1 = off
  minP: number; // 0 = off
  /** Any non-negative integer up to 2^53; split into two u32 words. */
  seed: number;
  /** RNG counter: the draw is a function of (seed, step) only. */
  step: number;
  logprobs: boolean;
  topLogprobs: number; // 0..20, with logprobs
}

export interface SampledToken {
  token: number;
  logprob?: number;
  top?: Array<{ id: number; logprob: number }>;
}

const f32 = Math.fround;

/** The f32 values the kernel derives from a SeqSampling (packed once, used by the reference too). */
function derived(s: SeqSampling) {
  return {
    invT: s.temperature > 0 ? f32(1 / s.temperature) : 0,
    logMinP: s.minP > 0 ? f32(Math.log(s.minP)) : -Infinity,
    seedLo: s.seed >>> 0,
    seedHi: Math.floor(s.seed / 2 ** 32) >>> 0,
  };
}

/** The `seqs` storage buffer contents for a list of sequences (struct SeqParams in sample.wgsl). */
export function packSamplingParams(list: readonly SeqSampling[], out = new ArrayBuffer(list.length * SAMPLE_PARAM_WORDS * 4)): ArrayBuffer {
  const view = new DataView(out);
  list.forEach((s, i) => {
    if (s.topLogprobs > MAX_TOP_LOGPROBS || s.topLogprobs < 0) {
      throw new RangeError(`topLogprobs must be 0..${MAX_TOP_LOGPROBS}, got ${s.topLogprobs}`);
    }
    const d = derived(s);
    const at = i * SAMPLE_PARAM_WORDS * 4;
    view.setFloat32(at, s.temperature, true);
    view.setFloat32(at + 4, d.invT, true);
    view.setUint32(at + 8, s.topK, true);
    view.setFloat32(at + 12, s.topP, true);
    view.setFloat32(at + 16, d.logMinP, true);
    view.setUint32(at + 20, d.seedLo, true);
    view.setUint32(at + 24, d.seedHi, true);
    view.setUint32(at + 28, s.step >>> 0, true);
    view.setUint32(at + 32, s.logprobs ? 1 : 0, true);
    view.setUint32(at + 36, s.logprobs ? s.topLogprobs : 0, true);
  });
  return out;
}

/** Reads the kernel's outputs for `seqs` sequences. */
export function unpackSampled(tokens: Uint32Array, logprobs: Uint32Array | undefined, list: readonly SeqSampling[]): SampledToken[] {
  const lp = logprobs && new Float32Array(logprobs.buffer, logprobs.byteOffset, logprobs.length);
  return list.map((s, i) => {
    const result: SampledToken = { token: tokens[i]! };
    if (s.logprobs && logprobs && lp) {
      const at = i * LOGPROB_WORDS;
      result.logprob = lp[at]!;
      result.top = [];
      for (let j = 0; j < logprobs[at + 1]!; j++) result.top.push({ id: logprobs[at + 2 + 2 * j]!, logprob: lp[at + 3 + 2 * j]! });
    }
    return result;
  });
}

// ---- The kernel's RNG and key order, ported exactly -------------------------------------

/** PCG hash (Jarzynski & Olano 2020), as `pcg` in sample.wgsl. */
export function pcg(x: number): number {
  const state = (Math.imul(x >>> 0, 747796405) + 2891336453) >>> 0;
  const word = Math.imul(((state >>> ((state >>> 28) + 4)) ^ state) >>> 0, 277803737) >>> 0;
  return ((word >>> 22) ^ word) >>> 0;
}

/** The kernel's draw for (seed, step): 24 random bits as a float in [0, 1). */
export function uniform01(seed: number, step: number): number {
  const { seedLo, seedHi } = derived({ seed } as SeqSampling);
  return (pcg(seedLo ^ pcg(seedHi ^ pcg(step >>> 0))) >>> 8) / 16777216;
}

const keyBits = new Uint32Array(1);
const keyFloat = new Float32Array(keyBits.buffer);

/** f32 → u32 with the same order (-0 sorts below +0), as `keyOf` in sample.wgsl. */
export function keyOf(v: number): number {
  keyFloat[0] = v;
  const b = keyBits[0]!;
  return b & 0x80000000 ? ~b >>> 0 : (b | 0x80000000) >>> 0;
}

// ---- Reference ---------------------------------------------------------------------------

/**
 * TypeScript reference of the kernel for one sequence: the same thresholds (on f32 keys, ties at
 * a threshold kept), the same min-p arithmetic in f32, masses and sums in f64, and the draw `u`
 * (pass `uniform01(seed, step)` to reproduce the kernel's). Logprobs are the log-softmax of the
 * raw logits; the top list is ordered by logit, ties by lowest id.
 */
export function sampleRef(logits: Float32Array, s: SeqSampling, u: number): SampledToken & { kept: number[] } {
  const V = logits.length;
  const keys = Array.from(logits, keyOf);
  let argmax = 0;
  for (let i = 1; i < V; i++) if (keys[i]! > keys[argmax]!) argmax = i;
  const lmax = logits[argmax]!;
  const { invT, logMinP } = derived(s);

  let token = argmax;
  let kept = [argmax];
  if (s.temperature > 0) {
    let tau = 0;
    if (logMinP > -Infinity) tau = keyOf(f32(lmax + f32(f32(s.temperature) * logMinP)));
    const byKey = (t: number) => keys.map((k, i) => [k, i] as const).filter(([k]) => k >= t).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    if (s.topK > 0) {
      const order = byKey(tau);
      if (order.length > s.topK) tau = Math.max(tau, order[s.topK - 1]![0]);
    }
    const mass = (i: number) => Math.exp(f32(f32(logits[i]! - lmax) * invT));
    if (s.topP < 1) {
      const order = byKey(tau);
      const target = f32(s.topP) * order.reduce((z, [, i]) => z + mass(i), 0);
      let cum = 0;
      for (const [k, i] of order) {
        cum += mass(i);
        if (cum >= target) {
          tau = Math.max(tau, k);
          break;
        }
      }
    }
    kept = [];
    for (let i = 0; i < V; i++) if (keys[i]! >= tau) kept.push(i);
    const z = kept.reduce((acc, i) => acc + mass(i), 0);
    const target = u * z;
    let cum = 0;
    token = kept[kept.length - 1]!;
    for (const i of kept) {
      cum += mass(i);
      if (cum > target) {
        token = i;
        break;
      }
    }
  }

  const result: SampledToken & { kept: number[] } = { token, kept };
  if (s.logprobs) {
    const lse = Math.log(Array.from(logits).reduce((acc, l) => acc + Math.exp(l - lmax), 0)) + lmax;
    result.logprob = logits[token]! - lse;
    const n = Math.min(s.topLogprobs, V);
    result.top = keys
      .map((k, i) => [k, i] as const)
      .sort((a, b) => b[0] - a[0] || a[1] - b[1])
      .slice(0, n)
      .map(([, i]) => ({ id: i, logprob: logits[i]! - lse }));
  }
  return result;
}

// ---- Op ----------------------------------------------------------------------------------

/**
 * Samples one token per sequence from `logits` ([maxSeqs, rowStride] f32, the first `vocab` of
 * each row used). `params` holds `packSamplingParams` for up to maxSeqs sequences and is written
 * each step; `tokens` ([slots] u32) receives row r's token at `rowSlot[r]` (its sequence's slot;
 * default: r) and `logprobs` [S, LOGPROB_WORDS] u32 (floats as bits), by row.
 * `encode(pass, seqs)` dispatches ceil(vocab / chunk) × seqs workgroups for the wide pass, then
 * one per sequence. `maxSeqs` (default: the slots of `tokens`) sizes the scratch; `chunk` (ids per
 * wide workgroup, default 8 per thread) is a test hook. Logits must not be NaN.
 */
export async function createSampleOp(
  ctx: OpContext,
  args: {
    logits: GPUBuffer;
    params: BufferRef;
    tokens: GPUBuffer;
    logprobs: GPUBuffer;
    vocab: number;
    rowStride?: number;
    wg?: number;
    rowSlot?: BufferRef;
    maxSeqs?: number;
    chunk?: number;
    label?: OpLabel;
  },
): Promise<Op> {
  const wg = args.wg ?? 256;
  if (!Number.isInteger(Math.log2(wg))) throw new RangeError(`the sampler's workgroup size must be a power of two, got ${wg}`);
  if (!(args.vocab >= 1)) throw new RangeError(`the sampler needs a vocabulary of at least one token, got ${args.vocab}`);
  const chunk = args.chunk ?? wg * 8;
  if (!(Number.isInteger(chunk) && chunk >= 1)) throw new RangeError(`the sampler's chunk must be a positive integer, got ${chunk}`);
  const chunks = Math.ceil(args.vocab / chunk);
  const maxSeqs = args.maxSeqs ?? args.tokens.size / 4;
  // Logits stay f32 whatever the activation precision: no f16 variant.
  const [partial, select] = await Promise.all([
    ctx.cache.get(samplePartialKernel, { constants: { WG: wg } }),
    ctx.cache.get(sampleKernel, { constants: { WG: wg } }),
  ]);
  const uniform = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.vocab], ['u32', args.rowStride ?? args.vocab], ['u32', chunk], ['u32', chunks]])), UNIFORM, 'sample params');
  // Scratch between the two dispatches, sized once for maxSeqs rows.
  const part = createBuffer(ctx.device, maxSeqs * chunks * PART_WORDS * 4, STORAGE, 'sample partials');
  const cand = createBuffer(ctx.device, maxSeqs * chunks * MAX_SAMPLE_CANDIDATES * 2 * 4, STORAGE, 'sample candidates');
  // Without a row → slot map, row r writes tokens[r].
  const identity = args.rowSlot ? null : identityRows(ctx.device, args.tokens.size / 4, 'sample rowSlot');
  const label = args.label ?? { role: 'sample', perSeq: true };
  // The wide pass reads a row of f32 logits per sequence; the select its partials (and, for
  // top-k above the candidates or ties that overflow them, the row again: not counted here).
  const partialGroup = describeDispatch(
    bindBuffers(ctx.device, partial, [args.logits, args.params, uniform, part, cand]),
    label,
    'sample',
    (rows) => rows * args.vocab * 4,
  );
  const selectGroup = describeDispatch(
    bindBuffers(ctx.device, select, [args.logits, args.params, args.tokens, args.logprobs, uniform, args.rowSlot ?? identity!, part, cand]),
    label,
    'sample',
    (rows) => rows * chunks * PART_WORDS * 4,
  );
  return {
    destroy: () => {
      uniform.destroy();
      part.destroy();
      cand.destroy();
      identity?.destroy();
    },
    encode(pass, seqs) {
      pass.setPipeline(partial);
      pass.setBindGroup(0, partialGroup);
      pass.dispatchWorkgroups(chunks, seqs);
      pass.setPipeline(select);
      pass.setBindGroup(0, selectGroup);
      pass.dispatchWorkgroups(seqs);
    },
  };
}
