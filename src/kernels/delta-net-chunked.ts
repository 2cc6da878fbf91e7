/**
 * The chunked form of Qwen3.5's gated delta rule for a ragged step's long rows (prefill), in two
 * dispatches after the conv: the intra-chunk pass (shaders/delta_chunk.wgsl: decay-masked
 * products and the UT transform's triangular solve, every chunk of every long row at once) and the
 * state pass (shaders/delta_chunk_state.wgsl: each row's chunks in order over its slot's state,
 * then the gated RMSNorm). Rows shorter than `from` tokens (decode, short prefills) stay with
 * delta_rule's recurrence (./delta-net.ts), which skips the long ones; so does a long row that
 * starts a verify run (speculative decoding: the run's rows are checkpointed by delta_rule; the
 * intra-chunk pass still computes its scratch, unread). States, W, U, P and their
 * sums are f32 at both precisions. The math and its reference: model/delta-net-chunked.ts.
 */
import chunkSource from '../../shaders/delta_chunk.wgsl';
import stateSource from '../../shaders/delta_chunk_state.wgsl';
import ruleLib from '../../shaders/lib/delta_rule_common.wgsl';
import stepRows from '../../shaders/lib/step_rows.wgsl';
import runsLib from '../../shaders/lib/verify_runs.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { deltaNetConvDim, type DeltaNetConfig } from '../model/config';
import { deltaNetGatedNorm, deltaNetRuleInputs } from '../model/delta-net';
import { deltaRuleChunked } from '../model/delta-net-chunked';
import { deltaRuleParams, deltaRuleRef, DELTA_NET_LIMITS, type DeltaNetOp, type StepRows } from './delta-net';
import { actBytes, chunkedScanOp, describeDispatch, type ChunkedScanOp, type OpContext, type OpLabel } from './op';

export const deltaChunkKernel: Kernel = { name: 'delta_chunk', source: stepRows + ruleLib + chunkSource };
export const deltaChunkStateKernel: Kernel = { name: 'delta_chunk_state', source: stepRows + ruleLib + runsLib + stateSource };

/**
 * When the engine takes the chunked form, and its chunk: rows of `from` tokens or more, in chunks of
 * `size` (≤ 64, the state pass's MAX_CH; delta_chunk keeps the size × size triangle, packed, in
 * workgroup memory: 2.6 KiB at 32). Below `from` the recurrence's single dispatch is presumed to
 * beat three; no real GPU has timed the crossover.
 */
export const DELTA_CHUNK = { size: 32, from: 16 } as const;
/** Chunk sizes the kernels are specialised and tested at. */
export const DELTA_CHUNK_SIZES = [8, 32] as const;

/** The chunked form's f32 scratch per step of `maxTokens` rows: W, U (then o), P, F regions, in floats. */
export function deltaChunkScratch(d: DeltaNetConfig, maxTokens: number, size: number) {
  const per = maxTokens * d.numVHeads;
  const wOff = 0;
  const uOff = wOff + per * d.headKDim;
  const pOff = uOff + per * d.headVDim;
  const fOff = pOff + per * size;
  return { wOff, uOff, pOff, fOff, floats: fOff + per * 4 };
}

/**
 * Reference of the chunked step: rows of `from` tokens or more in the chunked form (chunks of
 * `size`), the others as deltaRuleRef; the arguments and result as deltaRuleRef's (`checkpoints[r]`:
 * the state after row r of a verify run). A long row that starts a verify run is chunked here; the
 * GPU takes it through the recurrence, the same values up to the sums' order.
 */
export function deltaRuleChunkedRef(
  d: DeltaNetConfig,
  eps: number,
  conv: Float32Array,
  zba: { z: Float32Array; b: Float32Array; a: Float32Array },
  vecs: Float32Array,
  lastToken: readonly number[],
  rowSlot: readonly number[],
  states: Float32Array[],
  chunk: { size: number; from: number },
  checkpoints?: Float32Array[],
): Float32Array {
  const { numKHeads: nk, numVHeads: nv, headKDim: dk, headVDim: dv } = d;
  const C = deltaNetConvDim(d);
  const w = { dtBias: vecs.subarray(0, nv), decay: vecs.subarray(nv, 2 * nv), norm: vecs.subarray(2 * nv, 2 * nv + dv) };
  const T = lastToken.length ? lastToken[lastToken.length - 1]! + 1 : 0;
  const y = new Float32Array(T * nv * dv);
  let first = 0;
  lastToken.forEach((last, s) => {
    const n = last + 1 - first;
    const rows = (x: Float32Array, width: number) => x.slice(first * width, (last + 1) * width);
    if (n < chunk.from) {
      // This row alone through the recurrence (deltaRuleRef on a one-row step of its own tokens).
      const one = deltaRuleRef(d, eps, rows(conv, C), { z: rows(zba.z, nv * dv), b: rows(zba.b, nv), a: rows(zba.a, nv) }, vecs, [n - 1], [0], [states[rowSlot[s]!]!]);
      y.set(one, first * nv * dv);
    } else {
      const [q, k, v] = [new Float32Array(n * nk * dk), new Float32Array(n * nk * dk), new Float32Array(n * nv * dv)];
      const [g, beta] = [new Float32Array(n * nv), new Float32Array(n * nv)];
      for (let t = 0; t < n; t++) {
        const tt = first + t;
        const x = deltaNetRuleInputs(d, eps, w, conv.slice(tt * C, (tt + 1) * C), zba.b.subarray(tt * nv, (tt + 1) * nv), zba.a.subarray(tt * nv, (tt + 1) * nv));
        q.set(x.q, t * nk * dk);
        k.set(x.k, t * nk * dk);
        v.set(x.v, t * nv * dv);
        g.set(x.g, t * nv);
        beta.set(x.beta, t * nv);
      }
      const out = y.subarray(first * nv * dv, (last + 1) * nv * dv);
      deltaRuleChunked(d, states[rowSlot[s]!]!, q, k, v, g, beta, out, n, chunk.size);
      for (let t = 0; t < n; t++) deltaNetGatedNorm(d, eps, w.norm, out.subarray(t * nv * dv, (t + 1) * nv * dv), zba.z.subarray((first + t) * nv * dv, (first + t + 1) * nv * dv));
    }
    if (s + 1 < lastToken.length && rowSlot[s + 1] === rowSlot[s]) checkpoints?.[s]?.set(states[rowSlot[s]!]!);
    first = last + 1;
  });
  return y;
}

/** Both dispatches of the chunked form: `encode` takes the step's row and sequence counts. */
export type DeltaChunkOp = ChunkedScanOp;

/**
 * The chunked form for a DeltaNet of `d` over the rows of `chunk.from` tokens or more, its arguments
 * as createDeltaRuleOp's, and `scratch`: an f32 buffer of deltaChunkScratch(d, maxTokens, size).floats.
 */
export async function createDeltaChunkOp(
  ctx: OpContext,
  args: StepRows & {
    d: DeltaNetConfig;
    eps: number;
    conv: BufferRef;
    zba: BufferRef;
    bOffset: number;
    aOffset: number;
    vecs: GPUBuffer;
    state: GPUBuffer;
    stateStride?: number;
    stateOffset?: number;
    y: BufferRef;
    scratch: GPUBuffer;
    maxTokens: number;
    chunk?: { size: number; from: number };
    wg?: number;
    label?: OpLabel;
  },
): Promise<DeltaChunkOp> {
  const { d, maxTokens } = args;
  const { size, from } = args.chunk ?? DELTA_CHUNK;
  if (d.headKDim > DELTA_NET_LIMITS.headKDim || d.headVDim > DELTA_NET_LIMITS.headVDim)
    throw new RangeError(`delta_chunk takes head dims up to ${DELTA_NET_LIMITS.headKDim} (keys) and ${DELTA_NET_LIMITS.headVDim} (values), got ${d.headKDim} and ${d.headVDim}`);
  if (!(Number.isInteger(size) && size >= 1 && size <= 64 && from >= 1)) throw new RangeError(`delta_chunk takes chunks of 1..64 tokens from rows of at least one, got ${size} from ${from}`);
  const wg = args.wg ?? 64;
  const constants = { WG: wg, CH: size };
  const [intra, pass2] = await Promise.all([ctx.cache.get(deltaChunkKernel, { precision: ctx.precision, constants }), ctx.cache.get(deltaChunkStateKernel, { precision: ctx.precision, constants })]);
  const sc = deltaChunkScratch(d, maxTokens, size);
  const fields = [...deltaRuleParams(d, { ...args, chunkFrom: from }), ['u32', sc.wOff], ['u32', sc.uOff], ['u32', sc.pOff], ['u32', sc.fOff]] as Array<['u32' | 'f32', number]>;
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams(fields)), UNIFORM, 'delta_chunk params');
  const act = actBytes(ctx.precision);
  const { numVHeads: nv, headKDim: dk, headVDim: dv } = d;
  const scratchRow = nv * (dk + dv + size + 4) * 4;
  const intraGroup = describeDispatch(
    bindBuffers(ctx.device, intra, [args.conv, args.zba, args.vecs, args.scratch, args.lastToken, args.counts, params]),
    args.label && { ...args.label, role: `${args.label.role}_chunk` },
    'delta_chunk',
    (rows) => rows * (deltaNetConvDim(d) + 2 * nv) * act + rows * scratchRow,
  );
  const stateGroup = describeDispatch(
    bindBuffers(ctx.device, pass2, [args.conv, args.zba, args.vecs, args.state, args.scratch, args.y, args.lastToken, args.rowSlot, args.counts, params]),
    args.label && { ...args.label, role: `${args.label.role}_chunk_state` },
    'delta_chunk_state',
    (rows, shape) => rows * (2 * nv * dk + 2 * nv * dv) * act + rows * (scratchRow + nv * dv * 4) + 2 * shape.seqs * nv * dk * dv * 4,
  );
  return chunkedScanOp([intra, intraGroup], [pass2, stateGroup], nv, size, params);
}
