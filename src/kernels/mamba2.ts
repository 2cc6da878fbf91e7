/**
 * Granite 4.0-H's Mamba-2 scan on the GPU over a ragged step (prefill chunks and one-token decode
 * alike), after causal_conv_silu with its bias (./delta-net.ts): shaders/mamba2_scan.wgsl, each
 * row of the step over its slot's state (f32), token by token; rows of `chunkFrom` tokens or more
 * are left to the SSD chunked form (./mamba2-chunked.ts). Its reference steps model/mamba2.ts's mamba2Scan, the CPU reference forward pass's own
 * function, then the gate; the grouped RMSNorm after it is rms_norm's (weightPerRow).
 */
import runsLib from '../../shaders/lib/verify_runs.wgsl';
import scanSource from '../../shaders/mamba2_scan.wgsl';
import scanLib from '../../shaders/lib/mamba2_common.wgsl';
import stepRows from '../../shaders/lib/step_rows.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { mamba2ConvDim, type Mamba2Config } from '../model/config';
import { silu } from '../model/delta-net';
import { mamba2Scan } from '../model/mamba2';
import { eachToken, type DeltaNetOp, type StepRows } from './delta-net';
import { actBytes, describeDispatch, type OpContext, type OpLabel } from './op';

export const mamba2ScanKernel: Kernel = { name: 'mamba2_scan', source: stepRows + scanLib + runsLib + scanSource };

/** Workgroup sizes the scan is specialised and tested at (no reduction: any size serves). */
export const MAMBA2_WG = [32, 64] as const;
/** Limit of the shader: the state size (MAX_STATE; Granite 4.0-H: 128, transformers' default 256). */
export const MAMBA2_LIMITS = { stateSize: 256 } as const;

/**
 * Reference of mamba2_scan: conv [T, convDim] (x, B, C after the conv and SiLU), z [T, heads·P],
 * dt [T, heads], vecs (dt_bias, the decay tensor, D [heads] each), states[slot] [heads·P·N]
 * advanced; returns y = (S·C + D·x) ⊙ SiLU(z) [T, heads·P]; `checkpoints[r]`: the state after
 * row r of a verify run (eachToken).
 */
export function mamba2ScanRef(m: Mamba2Config, conv: Float32Array, z: Float32Array, dt: Float32Array, vecs: Float32Array, lastToken: readonly number[], rowSlot: readonly number[], states: Float32Array[], checkpoints?: Float32Array[]): Float32Array {
  const H = m.numHeads;
  const inner = H * m.headDim;
  const C = mamba2ConvDim(m);
  const T = lastToken.length ? lastToken[lastToken.length - 1]! + 1 : 0;
  const y = new Float32Array(T * inner);
  const w = { dtBias: vecs.subarray(0, H), decay: vecs.subarray(H, 2 * H), d: vecs.subarray(2 * H, 3 * H) };
  eachToken(
    lastToken,
    rowSlot,
    (t, s) => {
      const out = y.subarray(t * inner, (t + 1) * inner);
      mamba2Scan(m, w, states[rowSlot[s]!]!, conv.slice(t * C, (t + 1) * C), dt.subarray(t * H, (t + 1) * H), out);
      for (let i = 0; i < inner; i++) out[i]! *= silu(z[t * inner + i]!);
    },
    (s) => checkpoints?.[s]?.set(states[rowSlot[s]!]!),
  );
  return y;
}

/** The scan's arguments, the chunked form's too (./mamba2-chunked.ts). */
export type Mamba2ScanArgs = StepRows & { m: Mamba2Config; conv: BufferRef; zdt: BufferRef; dtOffset: number; vecs: GPUBuffer; state: GPUBuffer; stateStride?: number; stateOffset?: number; y: BufferRef; wg?: number; label?: OpLabel };

/** The Params fields of shaders/lib/mamba2_common.wgsl, in its order. */
export function mamba2ScanParams(m: Mamba2Config, args: { dtOffset: number; stateStride?: number; stateOffset?: number; chunkFrom?: number; ckpt?: number }): Array<['u32', number]> {
  return [
    ['u32', m.numHeads],
    ['u32', m.numGroups],
    ['u32', m.headDim],
    ['u32', m.stateSize],
    ['u32', m.aStored === 'neg' ? 1 : 0],
    ['u32', args.dtOffset],
    ['u32', args.stateStride ?? m.numHeads * m.headDim * m.stateSize],
    ['u32', args.stateOffset ?? 0],
    ['u32', args.chunkFrom ?? 0],
    ['u32', args.ckpt ?? 0],
  ];
}

/**
 * mamba2_scan for a Mamba-2 of `m`: one workgroup per (head, row), rows of `chunkFrom` tokens or more
 * skipped. `zdt` holds z [T, heads·P] at 0
 * and dt [T, heads] at `dtOffset` (elements); `vecs` dt_bias, the decay tensor and D (f32); each
 * slot of `state` is `stateStride` floats (default heads·P·N) with S at `stateOffset` (default 0);
 * `ckpt`: the first checkpoint row (the slot count), where a verify run's rows leave their S.
 */
export async function createMamba2ScanOp(
  ctx: OpContext,
  args: Mamba2ScanArgs & { chunkFrom?: number; ckpt: number },
): Promise<DeltaNetOp> {
  const { m } = args;
  if (m.stateSize > MAMBA2_LIMITS.stateSize) throw new RangeError(`mamba2_scan takes a state size up to ${MAMBA2_LIMITS.stateSize}, got ${m.stateSize}`);
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(mamba2ScanKernel, { precision: ctx.precision, constants: { WG: wg } });
  const inner = m.numHeads * m.headDim;
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams(mamba2ScanParams(m, args))), UNIFORM, 'mamba2_scan params');
  const act = actBytes(ctx.precision);
  const group = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.conv, args.zdt, args.vecs, args.state, args.y, args.lastToken, args.rowSlot, args.counts, params]),
    args.label,
    'mamba2_scan',
    (rows, shape) => rows * (mamba2ConvDim(m) + 2 * inner + m.numHeads) * act + 2 * shape.seqs * inner * m.stateSize * 4,
  );
  return {
    destroy: () => params.destroy(),
    encode(pass, seqs) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(m.numHeads, seqs);
    },
  };
}
