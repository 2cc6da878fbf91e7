/**
 * Logit processors on the GPU (shaders/penalties.wgsl): logit_bias, the min_tokens ban,
 * repetition, frequency and presence penalties, applied in place to the f32 logits [S, V] just
 * before the sampler. The per-sequence state (a dense bias row, generated-token counts and a
 * prompt bitset) lives in GPU buffers made once by the op; a request writes it once at its start
 * (`reset`), and each step's dispatch counts the token the sampler produced the step before, so
 * the token loop uploads nothing.
 *
 * The TypeScript reference is the CPU chain itself (src/engine/logit-processors.ts), composed in
 * `penaltiesRef` in the order TokenSampler applies it.
 */
import source from '../../shaders/penalties.wgsl';
import { createBuffer, packParams, STORAGE, UNIFORM, uploadBuffer, writeBuffer, bindBuffers, identityRows, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { applyFrequencyPresence, applyLogitBias, applyRepetitionPenalty } from './penalties-ref';
import { describeDispatch, type Op, type OpContext, type OpLabel } from './op';

export const penaltiesKernel: Kernel = { name: 'penalties', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const PENALTIES_WG = [64, 256] as const;

/** u32 words per sequence in the parameters buffer (struct SeqPenalties). */
export const PENALTY_PARAM_WORDS = 4;

/** `lastToken` value meaning "no token yet" (a request's first step counts nothing). */
export const NO_TOKEN = 0xffffffff;

const HAS_BIAS = 1;
const COUNTS = 2;

/** What one request asks of the processors (the API's names, resolved). */
export interface PenaltySettings {
  /** token id → bias added to its logit; out-of-vocabulary and non-integer ids are ignored. */
  logitBias: Readonly<Record<number, number>>;
  repetitionPenalty: number; // 1 = off
  frequencyPenalty: number; // 0 = off
  presencePenalty: number; // 0 = off
}

/** Whether a request needs the penalties op at all (`banning`: min_tokens suppresses some ids). */
export function needsPenalties(p: PenaltySettings, banning: boolean): boolean {
  return banning || Object.keys(p.logitBias).length > 0 || usesCounts(p);
}

function usesCounts(p: PenaltySettings): boolean {
  return p.repetitionPenalty !== 1 || p.frequencyPenalty !== 0 || p.presencePenalty !== 0;
}

/**
 * Fills `row` ([vocab] f32) with the dense bias: logit_bias entries, −inf at `banned` ids (as the
 * CPU sets them before adding the bias, and −inf + bias = −inf). Returns false when it is all zero.
 */
export function fillBiasRow(row: Float32Array, logitBias: Readonly<Record<number, number>>, banned: readonly number[]): boolean {
  row.fill(0);
  let any = false;
  for (const key in logitBias) {
    const id = Number(key);
    if (!Number.isInteger(id) || id < 0 || id >= row.length) continue;
    row[id] = row[id]! + logitBias[key]!;
    any = true;
  }
  for (const id of banned) {
    if (id < 0 || id >= row.length) continue;
    row[id] = -Infinity;
    any = true;
  }
  return any;
}

/** Sets bit id%32 of word id/32 of `bits` for each prompt id (the rest cleared). */
export function fillPromptBits(bits: Uint32Array, ids: readonly number[]): void {
  bits.fill(0);
  for (const id of ids) if (id >= 0 && id >>> 5 < bits.length) bits[id >>> 5]! |= 1 << (id & 31);
}

/** Writes one sequence's `SeqPenalties` at `seq` in `view`. */
export function packPenaltyParams(view: DataView, seq: number, p: PenaltySettings, hasBias: boolean): void {
  const at = seq * PENALTY_PARAM_WORDS * 4;
  view.setUint32(at, (hasBias ? HAS_BIAS : 0) | (usesCounts(p) ? COUNTS : 0), true);
  view.setFloat32(at + 4, p.repetitionPenalty, true);
  view.setFloat32(at + 8, p.frequencyPenalty, true);
  view.setFloat32(at + 12, p.presencePenalty, true);
}

/**
 * Reference: the CPU chain's processors in TokenSampler's order, on a copy of `logits`:
 * ban → logit_bias → repetition (prompt + generated) → frequency and presence (generated).
 */
export function penaltiesRef(
  logits: Float32Array,
  p: PenaltySettings,
  banned: readonly number[],
  promptIds: readonly number[],
  generated: readonly number[],
): Float32Array {
  const out = logits.slice();
  for (const id of banned) if (id >= 0 && id < out.length) out[id] = -Infinity;
  applyLogitBias(out, p.logitBias);
  applyRepetitionPenalty(out, [...promptIds, ...generated], p.repetitionPenalty);
  applyFrequencyPresence(out, generated, p.frequencyPenalty, p.presencePenalty);
  return out;
}

// ---- Op ----------------------------------------------------------------------------------

export interface PenaltiesOp extends Op {
  /** u32 [maxSeqs, vocab]: each sequence's generated-token counts (read by tests). */
  readonly counts: GPUBuffer;
  /**
   * Starts a request in slot `seq`: its settings, bias row (with `banned` ids at −inf), prompt
   * bitset, counts (zero, or those of `generated` for a sequence placed again after preemption),
   * and `lastToken[seq]` = NO_TOKEN. Once per placement, never per token.
   */
  reset(seq: number, p: PenaltySettings, promptIds: readonly number[], banned: readonly number[], generated?: readonly number[]): void;
  /** Rewrites slot `seq`'s bias row, e.g. without the ban once min_tokens were generated. */
  setBias(seq: number, p: PenaltySettings, banned: readonly number[]): void;
  destroy(): void;
}

/**
 * The processors over `logits` ([maxSeqs, rowStride] f32, the first `vocab` of each row used),
 * counting the ids the sampler wrote to `lastToken` ([maxSeqs] u32 by slot, its `tokens` output)
 * the step before. Row r's state is slot `rowSlot[r]`'s (default: r). Every buffer, and the CPU
 * staging for the bias row and bitset, is made here, at load. `encode(pass, rows)` dispatches
 * over the first `rows` rows; it must run once per sampled step of a request that uses counts,
 * before the sampler, so each sampled token is counted once.
 */
export async function createPenaltiesOp(
  ctx: OpContext,
  args: { logits: GPUBuffer; lastToken: GPUBuffer; vocab: number; maxSeqs: number; rowStride?: number; wg?: number; rowSlot?: BufferRef; label?: OpLabel },
): Promise<PenaltiesOp> {
  const { device } = ctx;
  const { vocab, maxSeqs } = args;
  if (!(vocab >= 1)) throw new RangeError(`the penalties op needs a vocabulary of at least one token, got ${vocab}`);
  const wg = args.wg ?? 256;
  const seenWords = Math.ceil(vocab / 32);
  // Logits are f32 whatever the activation precision: no f16 variant.
  const pipeline = await ctx.cache.get(penaltiesKernel, { constants: { WG: wg } });
  const uniform = uploadBuffer(
    device,
    new Uint8Array(packParams([['u32', vocab], ['u32', args.rowStride ?? vocab], ['u32', seenWords]])),
    UNIFORM,
    'penalties params',
  );
  const params = createBuffer(device, maxSeqs * PENALTY_PARAM_WORDS * 4, STORAGE, 'penalties seqs'); // [maxSeqs] SeqPenalties
  const bias = createBuffer(device, maxSeqs * vocab * 4, STORAGE, 'penalties bias'); // f32 [maxSeqs, vocab]
  const counts = createBuffer(device, maxSeqs * vocab * 4, STORAGE, 'penalties counts'); // u32 [maxSeqs, vocab]
  const seen = createBuffer(device, maxSeqs * seenWords * 4, STORAGE, 'penalties prompt bits'); // u32 [maxSeqs, seenWords]
  const identity = args.rowSlot ? null : identityRows(device, maxSeqs, 'penalties rowSlot');
  // Per sequence: its logits read and written, its bias and counts rows read, its prompt bits read.
  const bindGroup = describeDispatch(
    bindBuffers(device, pipeline, [args.logits, params, bias, counts, seen, args.lastToken, uniform, args.rowSlot ?? identity!]),
    args.label ?? { role: 'penalties', perSeq: true },
    'penalties',
    (rows) => rows * (4 * vocab * 4 + seenWords * 4),
  );
  const cpu = {
    params: new DataView(new ArrayBuffer(PENALTY_PARAM_WORDS * 4)),
    bias: new Float32Array(vocab),
    bits: new Uint32Array(seenWords),
    none: new Uint32Array([NO_TOKEN]),
  };
  const groupsX = Math.ceil(vocab / wg);
  const checkSeq = (seq: number) => {
    if (!(Number.isInteger(seq) && seq >= 0 && seq < maxSeqs)) throw new RangeError(`sequence slot ${seq} is outside 0..${maxSeqs - 1}`);
  };

  const setBias = (seq: number, p: PenaltySettings, banned: readonly number[]) => {
    checkSeq(seq);
    const hasBias = fillBiasRow(cpu.bias, p.logitBias, banned);
    // Without a bias the row is left as it is: the flag keeps the kernel from reading it.
    if (hasBias) writeBuffer(device, bias, seq * vocab * 4, cpu.bias);
    packPenaltyParams(cpu.params, 0, p, hasBias);
    writeBuffer(device, params, seq * PENALTY_PARAM_WORDS * 4, cpu.params);
  };

  return {
    counts,
    reset(seq, p, promptIds, banned, generated = []) {
      setBias(seq, p, banned);
      if (usesCounts(p)) {
        fillPromptBits(cpu.bits, promptIds);
        writeBuffer(device, seen, seq * seenWords * 4, cpu.bits);
        if (generated.length) {
          // A sequence placed again after preemption: its counts so far, from its output.
          const row = new Uint32Array(vocab);
          for (const id of generated) row[id]!++;
          writeBuffer(device, counts, seq * vocab * 4, row);
        } else {
          const encoder = device.createCommandEncoder();
          encoder.clearBuffer(counts, seq * vocab * 4, vocab * 4);
          device.queue.submit([encoder.finish()]);
        }
      }
      writeBuffer(device, args.lastToken, seq * 4, cpu.none);
    },
    setBias,
    encode(pass, seqs) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groupsX, seqs);
    },
    destroy() {
      for (const b of [uniform, params, bias, counts, seen]) b.destroy();
      identity?.destroy();
    },
  };
}
