import source from '../../shaders/softcap.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, type Op, type OpContext, type OpLabel } from './op';

export const softcapKernel: Kernel = { name: 'softcap', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const SOFTCAP_WG = [64, 256] as const;

/** TypeScript reference: x / div (Granite's logits_scaling), then tanh(· / cap) * cap when there is a cap. */
export function softcapRef(x: Float32Array, cap: number | null, div = 1): Float32Array {
  return x.map((v) => (cap === null ? v / div : Math.tanh(v / div / cap) * cap));
}

/**
 * The final logits' own ops, in place on `rows` rows of `n` f32 logits (rows ride on `encode`'s
 * count): divided by `div` (Granite's logits_scaling; default 1), then soft-capped (Gemma 2; null: no cap).
 */
export async function createSoftcapOp(ctx: OpContext, args: { x: GPUBuffer; n: number; cap: number | null; div?: number; wg?: number; label?: OpLabel }): Promise<Op> {
  if (args.cap !== null && !(args.cap > 0)) throw new RangeError(`softcap needs a positive cap, got ${args.cap}`);
  const div = args.div ?? 1;
  if (!(div > 0)) throw new RangeError(`softcap needs a positive divisor, got ${div}`);
  const wg = args.wg ?? 64;
  // Logits are f32 whatever the activations are.
  const pipeline = await ctx.cache.get(softcapKernel, { precision: 'f32', constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n], ['f32', args.cap ?? 0], ['f32', div]])), UNIFORM, 'softcap params');
  // f32 logits read and written in place.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, params]), args.label ?? { role: 'softcap', perSeq: true }, 'softcap', (rows) => 2 * rows * args.n * 4);
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
