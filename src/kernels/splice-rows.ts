import source from '../../shaders/splice_rows.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, rowGridOp, type Op, type OpContext, type OpLabel } from './op';

export const spliceRowsKernel: Kernel = { name: 'splice_rows', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const SPLICE_ROWS_WG = [64, 256] as const;

/** A step row that keeps its token embedding. */
export const SPLICE_NONE = 0xffffffff;

/** TypeScript reference: row t of x (n f32) becomes row index[t] of `rows` unless index[t] is SPLICE_NONE. */
export function spliceRowsRef(x: Float32Array, rows: Float32Array, index: Uint32Array, n: number): Float32Array {
  const out = x.slice();
  index.forEach((r, t) => r !== SPLICE_NONE && out.set(rows.subarray(r * n, (r + 1) * n), t * n));
  return out;
}

/**
 * Image embeddings into the f32 stream `x` after the token embedding (an image-token position
 * takes the vision tower's row for it): over `tokens` rows of `n`, row t takes row index[t] of
 * `rows` (f32) unless index[t] is SPLICE_NONE.
 */
export async function createSpliceRowsOp(ctx: OpContext, args: { x: GPUBuffer; rows: GPUBuffer; index: GPUBuffer; n: number; wg?: number; label?: OpLabel }): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(spliceRowsKernel, { precision: 'f32', constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n]])), UNIFORM, 'splice_rows params');
  // Reads each row's index and (at most) a row of `rows`, writes the row of x.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, args.rows, args.index, params]), args.label, 'splice', (rows) => rows * (4 + 2 * args.n * 4));
  return rowGridOp(pipeline, bindGroup, params, Math.ceil(args.n / wg));
}
