import source from '../../shaders/add.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, rowGridOp, type Op, type OpContext, type OpLabel } from './op';

export const addKernel: Kernel = { name: 'add', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const ADD_WG = [64, 128, 256] as const;

/** TypeScript reference: x + scale * y elementwise; a shorter y (a bias) repeats over x's rows. */
export function addRef(x: Float32Array, y: Float32Array, scale = 1): Float32Array {
  return x.map((v, i) => v + scale * y[i % y.length]!);
}

/**
 * The residual add `x += scale * y` over `tokens` rows of `n` act elements; `scale` (default 1)
 * is Granite's residual_multiplier. `xF32`: x is the residual stream, f32 at every precision;
 * `yF32`: y is a branch output held at f32 too. `broadcast`: y is one f32 row of n added to every
 * token's, a bias (an encoder's patch embedding or projection run without one).
 */
export async function createAddOp(
  ctx: OpContext,
  args: { x: GPUBuffer; y: GPUBuffer; n: number; scale?: number; wg?: number; label?: OpLabel; xF32?: boolean; yF32?: boolean; broadcast?: boolean },
): Promise<Op> {
  const wg = args.wg ?? 64;
  const f32 = [...(args.xF32 ? ['x_t'] : []), ...(args.yF32 || args.broadcast ? ['y_t'] : [])];
  const pipeline = await ctx.cache.get(addKernel, { precision: ctx.precision, f32, constants: { WG: wg, ...(args.broadcast ? { BROADCAST: 1 } : {}) } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n], ['f32', args.scale ?? 1]])), UNIFORM, 'add params');
  // Reads x and y, writes x.
  const yBytes = (rows: number) => (args.broadcast ? args.n * 4 : rows * args.n * elemBytes(ctx.precision, args.yF32));
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, args.y, params]), args.label, args.broadcast ? 'bias' : 'add', (rows) => rows * args.n * 2 * elemBytes(ctx.precision, args.xF32) + yBytes(rows));
  return rowGridOp(pipeline, bindGroup, params, Math.ceil(args.n / wg));
}
