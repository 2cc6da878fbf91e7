/**
 * The chunked (SSD) form of Granite 4.0-H's Mamba-2 scan for a ragged step's long rows (prefill), in
 * two dispatches after the conv: the intra-chunk pass (shaders/mamba2_chunk.wgsl: the decay-masked
 * C·Bᵀ applied to dt·x, every chunk of every long row at once) and the state pass
 * (shaders/mamba2_chunk_state.wgsl: each row's chunks in order over its slot's state, the carried
 * state's part of each output, then the gate). Rows shorter than `from` tokens (decode, short
 * prefills) stay with mamba2_scan's recurrence (./mamba2.ts), which skips the long ones. States and
 * the intra-chunk output are f32 at both precisions. The math and its reference: model/mamba2-chunked.ts.
 */
import chunkSource from '../../shaders/mamba2_chunk.wgsl';
import stateSource from '../../shaders/mamba2_chunk_state.wgsl';
import runsLib from '../../shaders/lib/verify_runs.wgsl';
import scanLib from '../../shaders/lib/mamba2_common.wgsl';
import stepRows from '../../shaders/lib/step_rows.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { mamba2ConvDim, type Mamba2Config } from '../model/config';
import { silu } from '../model/delta-net';
import { mamba2ScanChunked } from '../model/mamba2-chunked';
import { MAMBA2_LIMITS, mamba2ScanParams, mamba2ScanRef, type Mamba2ScanArgs } from './mamba2';
import { actBytes, chunkedScanOp, describeDispatch, type ChunkedScanOp, type OpContext } from './op';

export const mamba2ChunkKernel: Kernel = { name: 'mamba2_chunk', source: stepRows + scanLib + chunkSource };
export const mamba2ChunkStateKernel: Kernel = { name: 'mamba2_chunk_state', source: stepRows + scanLib + runsLib + stateSource };

/**
 * When the engine takes the chunked form, and its chunk: rows of `from` tokens or more, in chunks of
 * `size` (≤ 32: mamba2_chunk keeps a size² mask in workgroup memory). The delta rule's numbers
 * (DELTA_CHUNK); no real GPU has timed the crossover for either.
 */
export const MAMBA2_CHUNK = { size: 32, from: 16 } as const;
/** Chunk sizes the kernels are specialised and tested at. */
export const MAMBA2_CHUNK_SIZES = [8, 32] as const;

/**
 * Reference of the chunked step: rows of `from` tokens or more in the chunked form (chunks of
 * `size`), the others as mamba2ScanRef; the arguments and result as mamba2ScanRef's.
 */
export function mamba2ScanChunkedRef(m: Mamba2Config, conv: Float32Array, z: Float32Array, dt: Float32Array, vecs: Float32Array, lastToken: readonly number[], rowSlot: readonly number[], states: Float32Array[], chunk: { size: number; from: number }, checkpoints?: Float32Array[]): Float32Array {
  const H = m.numHeads;
  const inner = H * m.headDim;
  const C = mamba2ConvDim(m);
  const w = { dtBias: vecs.subarray(0, H), decay: vecs.subarray(H, 2 * H), d: vecs.subarray(2 * H, 3 * H) };
  const T = lastToken.length ? lastToken[lastToken.length - 1]! + 1 : 0;
  const y = new Float32Array(T * inner);
  let first = 0;
  lastToken.forEach((last, s) => {
    const n = last + 1 - first;
    const rows = (x: Float32Array, width: number) => x.slice(first * width, (last + 1) * width);
    const state = states[rowSlot[s]!]!;
    if (n < chunk.from) {
      y.set(mamba2ScanRef(m, rows(conv, C), rows(z, inner), rows(dt, H), vecs, [n - 1], [0], [state]), first * inner);
    } else {
      const out = y.subarray(first * inner, (last + 1) * inner);
      mamba2ScanChunked(m, w, state, rows(conv, C), rows(dt, H), out, n, chunk.size);
      for (let i = 0; i < out.length; i++) out[i]! *= silu(z[first * inner + i]!);
    }
    // A verify run's checkpoint (the GPU takes a long first row through mamba2_scan: the same values up to the sums' order).
    if (s + 1 < lastToken.length && rowSlot[s + 1] === rowSlot[s]) checkpoints?.[s]?.set(state);
    first = last + 1;
  });
  return y;
}

/** Both dispatches of the chunked form (./op.ts chunkedScanOp). */
export type Mamba2ChunkOp = ChunkedScanOp;

/**
 * The chunked form for a Mamba-2 of `m` over the rows of `chunk.from` tokens or more, its arguments
 * as createMamba2ScanOp's, and `scratch`: an f32 buffer of maxTokens × heads·headDim floats.
 */
export async function createMamba2ChunkOp(ctx: OpContext, args: Mamba2ScanArgs & { scratch: GPUBuffer; chunk?: { size: number; from: number } }): Promise<Mamba2ChunkOp> {
  const { m } = args;
  const { size, from } = args.chunk ?? MAMBA2_CHUNK;
  if (m.stateSize > MAMBA2_LIMITS.stateSize) throw new RangeError(`mamba2_chunk takes a state size up to ${MAMBA2_LIMITS.stateSize}, got ${m.stateSize}`);
  if (!(Number.isInteger(size) && size >= 1 && size <= 32 && from >= 1)) throw new RangeError(`mamba2_chunk takes chunks of 1..32 tokens from rows of at least one, got ${size} from ${from}`);
  const constants = { WG: args.wg ?? 64, CH: size };
  const [intra, pass2] = await Promise.all([ctx.cache.get(mamba2ChunkKernel, { precision: ctx.precision, constants }), ctx.cache.get(mamba2ChunkStateKernel, { precision: ctx.precision, constants })]);
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams(mamba2ScanParams(m, { ...args, chunkFrom: from }))), UNIFORM, 'mamba2_chunk params');
  const act = actBytes(ctx.precision);
  const H = m.numHeads;
  const inner = H * m.headDim;
  const convDim = mamba2ConvDim(m);
  const intraGroup = describeDispatch(
    bindBuffers(ctx.device, intra, [args.conv, args.zdt, args.vecs, args.scratch, args.lastToken, args.counts, params]),
    args.label && { ...args.label, role: `${args.label.role}_chunk` },
    'mamba2_chunk',
    (rows) => rows * (convDim + H) * act + rows * inner * 4,
  );
  const stateGroup = describeDispatch(
    bindBuffers(ctx.device, pass2, [args.conv, args.zdt, args.vecs, args.state, args.scratch, args.y, args.lastToken, args.rowSlot, args.counts, params]),
    args.label && { ...args.label, role: `${args.label.role}_chunk_state` },
    'mamba2_chunk_state',
    (rows, shape) => rows * (convDim + 2 * inner + H) * act + rows * inner * 4 + 2 * shape.seqs * inner * m.stateSize * 4,
  );
  return chunkedScanOp([intra, intraGroup], [pass2, stateGroup], H, size, params);
}
