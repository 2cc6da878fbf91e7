/**
 * Qwen3.5's gated DeltaNet on the GPU over a ragged step (prefill chunks and one-token decode
 * alike), in two dispatches: the causal conv + SiLU over q, k, v (shaders/causal_conv_silu.wgsl)
 * and the gated delta rule with its gated RMSNorm (shaders/delta_rule.wgsl), each row of the step
 * over its slot's state (f32). Token-sequential within a row; long prefill rows take the chunked form instead (./delta-net-chunked.ts).
 * Their references step model/delta-net.ts, the CPU reference forward pass's own functions.
 */
import convSource from '../../shaders/causal_conv_silu.wgsl';
import windowLib from '../../shaders/lib/conv_window.wgsl';
import runsLib from '../../shaders/lib/verify_runs.wgsl';
import ruleSource from '../../shaders/delta_rule.wgsl';
import ruleLib from '../../shaders/lib/delta_rule_common.wgsl';
import stepRows from '../../shaders/lib/step_rows.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { deltaNetConvDim, type DeltaNetConfig } from '../model/config';
import { deltaNetCore, silu } from '../model/delta-net';
import { shortConvStep } from '../model/short-conv';
import { actBytes, describeDispatch, type OpContext, type OpLabel } from './op';

export const causalConvSiluKernel: Kernel = { name: 'causal_conv_silu', source: windowLib + runsLib + convSource };
export const deltaRuleKernel: Kernel = { name: 'delta_rule', source: stepRows + ruleLib + runsLib + ruleSource };

/** Workgroup sizes the kernels are specialised and tested at (powers of two: delta_rule reduces by halves). */
export const DELTA_NET_WG = [64, 128] as const;
/** Limits of the shaders: conv taps (MAX_TAPS), key and value head dims (MAX_DK, MAX_DV). */
export const DELTA_NET_LIMITS = { taps: 8, headKDim: 256, headVDim: 256 } as const;

/**
 * Rows of a step: row s owns the tokens after row s − 1's last up to lastToken[s], on slot
 * rowSlot[s]. Rows on one slot (a verify run) continue each other's state: after such a row s,
 * when the next row is on its slot too, `rowEnd(s)` takes its checkpoint.
 */
export function eachToken(lastToken: readonly number[], rowSlot: readonly number[], visit: (t: number, s: number) => void, rowEnd?: (s: number) => void): void {
  let t = 0;
  lastToken.forEach((last, s) => {
    for (; t <= last; t++) visit(t, s);
    if (s + 1 < lastToken.length && rowSlot[s + 1] === rowSlot[s]) rowEnd?.(s);
  });
}

/**
 * Reference of causal_conv_silu: x [T, n], w [n, taps], bias [n] (Mamba-2's) or none,
 * states[slot] [(taps − 1)·n] advanced; returns y [T, n]; `checkpoints[r]`: the state after row r
 * of a verify run (eachToken).
 */
export function causalConvSiluRef(x: Float32Array, w: Float32Array, n: number, taps: number, lastToken: readonly number[], rowSlot: readonly number[], states: Float32Array[], bias?: Float32Array, checkpoints?: Float32Array[]): Float32Array {
  const T = lastToken.length ? lastToken[lastToken.length - 1]! + 1 : 0;
  const y = new Float32Array(T * n);
  eachToken(
    lastToken,
    rowSlot,
    (t, s) => {
      const out = y.subarray(t * n, (t + 1) * n);
      shortConvStep(states[rowSlot[s]!]!, x.slice(t * n, (t + 1) * n), w, taps, out);
      for (let c = 0; c < n; c++) out[c] = silu(out[c]! + (bias?.[c] ?? 0));
    },
    // The window alone: a slot's floats after it are another kernel's (delta_rule's S).
    (s) => checkpoints?.[s]?.set(states[rowSlot[s]!]!.subarray(0, (taps - 1) * n)),
  );
  return y;
}

/**
 * Reference of delta_rule: conv [T, convDim] (after SiLU), z [T, nv·dv], b and a [T, nv], vecs
 * (dt_bias [nv], the decay tensor [nv], the norm [dv]), states[slot] [nv·dk·dv] advanced; returns y [T, nv·dv];
 * `checkpoints[r]`: the state after row r of a verify run (eachToken).
 */
export function deltaRuleRef(d: DeltaNetConfig, eps: number, conv: Float32Array, zba: { z: Float32Array; b: Float32Array; a: Float32Array }, vecs: Float32Array, lastToken: readonly number[], rowSlot: readonly number[], states: Float32Array[], checkpoints?: Float32Array[]): Float32Array {
  const { numVHeads: nv, headVDim: dv } = d;
  const C = deltaNetConvDim(d);
  const T = lastToken.length ? lastToken[lastToken.length - 1]! + 1 : 0;
  const y = new Float32Array(T * nv * dv);
  const w = { dtBias: vecs.subarray(0, nv), decay: vecs.subarray(nv, 2 * nv), norm: vecs.subarray(2 * nv, 2 * nv + dv) };
  eachToken(
    lastToken,
    rowSlot,
    (t, s) => {
      const { z, b, a } = zba;
      deltaNetCore(d, eps, w, states[rowSlot[s]!]!, conv.slice(t * C, (t + 1) * C), z.subarray(t * nv * dv, (t + 1) * nv * dv), b.subarray(t * nv, (t + 1) * nv), a.subarray(t * nv, (t + 1) * nv), y.subarray(t * nv * dv, (t + 1) * nv * dv));
    },
    (s) => checkpoints?.[s]?.set(states[rowSlot[s]!]!),
  );
  return y;
}

/** One of the two dispatches: `encode` takes the step's row (sequence) count. */
export interface DeltaNetOp {
  encode(pass: GPUComputePassEncoder, seqs: number): void;
  destroy(): void;
}

/** The step's row bookkeeping both kernels read (the step buffers the short conv reads too). */
export interface StepRows {
  lastToken: BufferRef; // [maxSeqs] u32
  rowSlot: BufferRef; // [maxSeqs] u32
  counts: BufferRef; // uniform { T, S }
}

/**
 * causal_conv_silu over `n` channels: x [maxTokens, n] act → y [maxTokens, n] act; state f32, each
 * slot `stateStride` floats (default (taps − 1)·n) starting with its window [taps − 1, n].
 * `bias`: the weight buffer holds the bias [n] after the taps [n, taps] (Mamba-2's conv). `ckpt`:
 * the first checkpoint row (the slot count), where a verify run's rows leave their windows.
 */
export async function createCausalConvSiluOp(
  ctx: OpContext,
  args: StepRows & { x: BufferRef; weight: GPUBuffer; bias?: boolean; state: GPUBuffer; ckpt: number; y: BufferRef; n: number; taps: number; stateStride?: number; wg?: number; label?: OpLabel },
): Promise<DeltaNetOp> {
  const { n, taps } = args;
  if (!(Number.isInteger(taps) && taps >= 1 && taps <= DELTA_NET_LIMITS.taps)) throw new RangeError(`causal_conv_silu takes 1..${DELTA_NET_LIMITS.taps} taps, got ${taps}`);
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(causalConvSiluKernel, { precision: ctx.precision, constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', n], ['u32', taps], ['u32', args.stateStride ?? (taps - 1) * n], ['u32', args.bias ? 1 : 0], ['u32', args.ckpt]])), UNIFORM, 'causal_conv_silu params');
  const act = actBytes(ctx.precision);
  const group = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.x, args.weight, args.state, args.y, args.lastToken, args.rowSlot, args.counts, params]),
    args.label,
    'causal_conv_silu',
    (rows, shape) => 2 * rows * n * act + n * (taps + (args.bias ? 1 : 0)) * 4 + 2 * shape.seqs * (taps - 1) * n * 4,
  );
  const groupsX = Math.ceil(n / wg);
  return {
    destroy: () => params.destroy(),
    encode(pass, seqs) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(groupsX, seqs);
    },
  };
}

/** The Params fields (shaders/lib/delta_rule_common.wgsl) up to ckpt; the chunked form's scratch offsets follow. */
export function deltaRuleParams(
  d: DeltaNetConfig,
  args: { eps: number; bOffset: number; aOffset: number; stateStride?: number; stateOffset?: number; chunkFrom?: number; ckpt?: number },
): Array<['u32' | 'f32', number]> {
  return [
    ['u32', d.numKHeads],
    ['u32', d.numVHeads],
    ['u32', d.headKDim],
    ['u32', d.headVDim],
    ['u32', d.vHeadOrder === 'tiled' ? 1 : 0],
    ['u32', d.aStored === 'neg' ? 1 : 0],
    ['f32', args.eps],
    ['u32', args.bOffset],
    ['u32', args.aOffset],
    ['u32', args.stateStride ?? d.numVHeads * d.headKDim * d.headVDim],
    ['u32', args.stateOffset ?? 0],
    ['u32', args.chunkFrom ?? 0],
    ['u32', args.ckpt ?? 0],
  ];
}

/**
 * delta_rule for a DeltaNet of `d`: one workgroup per (value head, row); rows of `chunkFrom` tokens
 * or more (0: none) left to the chunked form (./delta-net-chunked.ts). `zba` holds z [T, nv·dv]
 * at 0 and b, a [T, nv] at `bOffset`, `aOffset` (elements); each slot of `state` is `stateStride`
 * floats (default nv·dk·dv) with S at `stateOffset` (default 0); `ckpt`: the first checkpoint row
 * (the slot count), where a verify run's rows leave their S (a run's rows all take this form).
 */
export async function createDeltaRuleOp(
  ctx: OpContext,
  args: StepRows & { d: DeltaNetConfig; eps: number; conv: BufferRef; zba: BufferRef; bOffset: number; aOffset: number; vecs: GPUBuffer; state: GPUBuffer; ckpt: number; stateStride?: number; stateOffset?: number; y: BufferRef; wg?: number; label?: OpLabel; chunkFrom?: number },
): Promise<DeltaNetOp> {
  const { d } = args;
  if (d.headKDim > DELTA_NET_LIMITS.headKDim || d.headVDim > DELTA_NET_LIMITS.headVDim)
    throw new RangeError(`delta_rule takes head dims up to ${DELTA_NET_LIMITS.headKDim} (keys) and ${DELTA_NET_LIMITS.headVDim} (values), got ${d.headKDim} and ${d.headVDim}`);
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(deltaRuleKernel, { precision: ctx.precision, constants: { WG: wg } });
  // The chunked form's scratch offsets unused here.
  const fields: Array<['u32' | 'f32', number]> = [...deltaRuleParams(d, args), ['u32', 0], ['u32', 0], ['u32', 0], ['u32', 0]];
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams(fields)), UNIFORM, 'delta_rule params');
  const act = actBytes(ctx.precision);
  const vDim = d.numVHeads * d.headVDim;
  const group = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.conv, args.zba, args.vecs, args.state, args.y, args.lastToken, args.rowSlot, args.counts, params]),
    args.label,
    'delta_rule',
    (rows, shape) => rows * (deltaNetConvDim(d) + 2 * vDim + 2 * d.numVHeads) * act + 2 * shape.seqs * vDim * d.headKDim * 4,
  );
  return {
    destroy: () => params.destroy(),
    encode(pass, seqs) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(d.numVHeads, seqs);
    },
  };
}
