import source from '../../shaders/add.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';

export const addKernel: Kernel = { name: 'add', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const ADD_WG = [64, 128, 256] as const;

/** TypeScript reference: x + scale * y elementwise. */
export function addRef(x: Float32Array, y: Float32Array, scale = 1): Float32Array {
  return x.map((v, i) => v + scale * y[i]!);
}

/**
 * The residual add `x += scale * y` over `tokens` rows of `n` act elements; `scale` (default 1)
 * is Granite's residual_multiplier. `xF32`: x is the residual stream, f32 at every precision;
 * `yF32`: y is a branch output held at f32 too.
 */
export async function createAddOp(ctx: OpContext, args: { x: GPUBuffer; y: GPUBuffer; n: number; scale?: number; wg?: number; label?: OpLabel; xF32?: boolean; yF32?: boolean }): Promise<Op> {
  const wg = args.wg ?? 64;
  const f32 = [...(args.xF32 ? ['x_t'] : []), ...(args.yF32 ? ['y_t'] : [])];
  const pipeline = await ctx.cache.get(addKernel, { precision: ctx.precision, f32, constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n], ['f32', args.scale ?? 1]])), UNIFORM, 'add params');
  // Reads x and y, writes x.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, args.y, params]), args.label, 'add', (rows) => rows * args.n * (2 * elemBytes(ctx.precision, args.xF32) + elemBytes(ctx.precision, args.yF32)));
  const groupsX = Math.ceil(args.n / wg);
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groupsX, tokens);
    },
  };
}
