import source from '../../shaders/add.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import type { Op, OpContext } from './op';

export const addKernel: Kernel = { name: 'add', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const ADD_WG = [64, 128, 256] as const;

/** TypeScript reference: x + y elementwise. */
export function addRef(x: Float32Array, y: Float32Array): Float32Array {
  return x.map((v, i) => v + y[i]!);
}

/** The residual add `x += y` over `tokens` rows of `n` act elements. */
export async function createAddOp(ctx: OpContext, args: { x: GPUBuffer; y: GPUBuffer; n: number; wg?: number }): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(addKernel, { precision: ctx.precision, constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n]])), UNIFORM, 'add params');
  const bindGroup = bindBuffers(ctx.device, pipeline, [args.x, args.y, params]);
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
