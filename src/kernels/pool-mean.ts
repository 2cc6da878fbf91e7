import source from '../../shaders/pool_mean.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, rowGridOp, type Op, type OpContext, type OpLabel } from './op';

export const poolMeanKernel: Kernel = { name: 'pool_mean', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const POOL_MEAN_WG = [64, 256] as const;

/** TypeScript reference: the mean of each sequence's rows of x ([T, n]), sequence s ending at token lastToken[s]; [S, n]. */
export function poolMeanRef(x: Float32Array, n: number, lastToken: readonly number[]): Float32Array {
  const y = new Float32Array(lastToken.length * n);
  lastToken.forEach((last, s) => {
    const first = s === 0 ? 0 : lastToken[s - 1]! + 1;
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (let t = first; t <= last; t++) sum += x[t * n + i]!;
      y[s * n + i] = sum / (last + 1 - first);
    }
  });
  return y;
}

/**
 * Mean pooling of a step's sequences: y (f32 [maxSeqs, n]) gets the mean of each sequence's rows
 * of x (its tokens grouped by sequence in order, `lastToken` the step's), for `encode(pass, seqs)`.
 * An encoder's embedding (BERT, EmbeddingGemma) before its projections and L2.
 */
export async function createPoolMeanOp(ctx: OpContext, args: { x: BufferRef; lastToken: BufferRef; y: BufferRef; n: number; wg?: number; label?: OpLabel; xF32?: boolean }): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(poolMeanKernel, { precision: ctx.precision, f32: args.xF32 ? ['x_t'] : [], constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n]])), UNIFORM, 'pool_mean params');
  // Per sequence: its rows read (counted as one row each: the step's tokens are not known here), one f32 row written.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, args.lastToken, args.y, params]), args.label, 'pool', (seqs) => seqs * args.n * (elemBytes(ctx.precision, args.xF32) + 4));
  return rowGridOp(pipeline, bindGroup, params, Math.ceil(args.n / wg));
}
