import source from '../../shaders/sigmoid_gate.wgsl';
import { bindBuffers, packParams, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { actBytes, describeDispatch, type Op, type OpContext, type OpLabel } from './op';

export const sigmoidGateKernel: Kernel = { name: 'sigmoid_gate', source };

/** TypeScript reference: x ⊙ sigmoid(g). */
export function sigmoidGateRef(x: Float32Array, g: Float32Array): Float32Array {
  return x.map((v, i) => v / (1 + Math.exp(-g[i]!)));
}

/** Gated attention's output gate, in place on `x` ([tokens, n] act; tokens ride on `encode`'s count): x ⊙ sigmoid(g). */
export async function createSigmoidGateOp(ctx: OpContext, args: { x: BufferRef; g: BufferRef; n: number; wg?: number; label?: OpLabel }): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(sigmoidGateKernel, { precision: ctx.precision, constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.n]])), UNIFORM, 'sigmoid_gate params');
  const act = actBytes(ctx.precision);
  const group = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, args.g, params]), args.label, 'sigmoid_gate', (rows) => 3 * rows * args.n * act);
  const groupsX = Math.ceil(args.n / wg);
  return {
    destroy: () => params.destroy(),
    encode(pass, rows) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(groupsX, rows);
    },
  };
}
