import source from '../../shaders/softcap.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import type { Op, OpContext } from './op';

export const softcapKernel: Kernel = { name: 'softcap', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const SOFTCAP_WG = [64, 256] as const;

/** TypeScript reference: tanh(x / cap) * cap elementwise. */
export function softcapRef(x: Float32Array, cap: number): Float32Array {
  return x.map((v) => Math.tanh(v / cap) * cap);
}

/** Soft-caps `rows` rows of `n` f32 logits in place (rows ride on `encode`'s count). */
export async function createSoftcapOp(ctx: OpContext, args: { x: GPUBuffer; n: number; cap: number; wg?: number }): Promise<Op> {
  if (!(args.cap > 0)) throw new RangeError(`softcap needs a positive cap, got ${args.cap}`);
  const wg = args.wg ?? 64;
  // Logits are f32 whatever the activations are.
  const pipeline = await ctx.cache.get(softcapKernel, { precision: 'f32', constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n], ['f32', args.cap]])), UNIFORM, 'softcap params');
  const bindGroup = bindBuffers(ctx.device, pipeline, [args.x, params]);
  const groupsX = Math.ceil(args.n / wg);
  return {
    destroy: () => params.destroy(),
    encode(pass, rows) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groupsX, rows);
    },
  };
}
