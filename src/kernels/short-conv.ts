import windowLib from '../../shaders/lib/conv_window.wgsl';
import runsLib from '../../shaders/lib/verify_runs.wgsl';
import source from '../../shaders/short_conv.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { shortConvStep } from '../model/short-conv';
import { actBytes, describeDispatch, type OpContext, type OpLabel } from './op';

export const shortConvKernel: Kernel = { name: 'short_conv', source: windowLib + runsLib + source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const SHORT_CONV_WG = [64, 256] as const;
/** The longest kernel shaders/short_conv.wgsl holds (its MAX_TAPS). */
export const SHORT_CONV_MAX_TAPS = 8;

/**
 * TypeScript reference of one step: rows of the step (sequences) own consecutive tokens ending at
 * `lastToken[s]`; each row convolves B ⊙ x of its tokens over its slot's state (`states[slot]`,
 * [(taps − 1) · n], advanced in place) and gates by C. `bcx` is [T, 3n] (B, C, x), `w` [n, taps];
 * returns y [T, n]. The same step function as the CPU reference forward pass. Rows on one slot
 * (a verify run) continue each other's state; `checkpoints[r]` takes the state after such a row r
 * when the next row is on its slot too (shaders/lib/verify_runs.wgsl).
 */
export function shortConvRef(bcx: Float32Array, w: Float32Array, n: number, taps: number, lastToken: readonly number[], rowSlot: readonly number[], states: Float32Array[], checkpoints?: Float32Array[]): Float32Array {
  const T = lastToken.length ? lastToken[lastToken.length - 1]! + 1 : 0;
  const y = new Float32Array(T * n);
  const u = new Float32Array(n);
  const out = new Float32Array(n);
  let t = 0;
  lastToken.forEach((last, s) => {
    for (; t <= last; t++) {
      for (let c = 0; c < n; c++) u[c] = bcx[t * 3 * n + c]! * bcx[t * 3 * n + 2 * n + c]!;
      shortConvStep(states[rowSlot[s]!]!, u, w, taps, out);
      for (let c = 0; c < n; c++) y[t * n + c] = bcx[t * 3 * n + n + c]! * out[c]!;
    }
    if (s + 1 < lastToken.length && rowSlot[s + 1] === rowSlot[s]) checkpoints?.[s]?.set(states[rowSlot[s]!]!);
  });
  return y;
}

/** The short convolution of a step's rows: `encode` takes the step's row (sequence) count. */
export interface ShortConvOp {
  encode(pass: GPUComputePassEncoder, seqs: number): void;
  destroy(): void;
}

/**
 * LFM2's gated short convolution over a ragged step (shaders/short_conv.wgsl): y = C ⊙ conv(B ⊙ x)
 * from in_proj's output `bcx`, each row of the step over its slot's state in `state`, which it
 * advances. One dispatch of (channels, rows), prefill and decode alike. `ckpt`: the state's first
 * checkpoint row (its slot count), where a verify run's rows leave their states (state-rollback.ts).
 */
export async function createShortConvOp(
  ctx: OpContext,
  args: {
    bcx: BufferRef; // [maxTokens, 3n] act
    weight: GPUBuffer; // f32 [n, taps]
    state: GPUBuffer; // f32 [slots + checkpoint rows, taps − 1, n]
    ckpt: number;
    y: BufferRef; // [maxTokens, n] act
    lastToken: BufferRef; // step buffer, [maxSeqs] u32
    rowSlot: BufferRef; // step buffer, [maxSeqs] u32
    counts: BufferRef; // step buffer, uniform { T, S }
    n: number;
    taps: number;
    wg?: number;
    label?: OpLabel;
  },
): Promise<ShortConvOp> {
  if (!(Number.isInteger(args.taps) && args.taps >= 1 && args.taps <= SHORT_CONV_MAX_TAPS)) throw new RangeError(`short_conv takes 1..${SHORT_CONV_MAX_TAPS} taps, got ${args.taps}`);
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(shortConvKernel, { precision: ctx.precision, constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n], ['u32', args.taps], ['u32', args.ckpt]])), UNIFORM, 'short_conv params');
  const act = actBytes(ctx.precision);
  const { n, taps } = args;
  // Reads B, C, x and writes y per token; reads the kernel, and reads and writes each row's state (f32).
  const bindGroup = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.bcx, args.weight, args.state, args.y, args.lastToken, args.rowSlot, args.counts, params]),
    args.label,
    'short_conv',
    (rows, shape) => rows * n * 4 * act + n * taps * 4 + 2 * shape.seqs * (taps - 1) * n * 4,
  );
  const groupsX = Math.ceil(n / wg);
  return {
    destroy: () => params.destroy(),
    encode(pass, seqs) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groupsX, seqs);
    },
  };
}
