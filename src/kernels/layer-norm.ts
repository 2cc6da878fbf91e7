import source from '../../shaders/layer_norm.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, type Op, type OpContext } from './op';
import type { RowNormArgs } from './rms-norm';

export const layerNormKernel: Kernel = { name: 'layer_norm', source };

/** Workgroup sizes the kernel is specialised and tested at (a power of two: the reduction halves). */
export const LAYER_NORM_WG = [32, 64, 256] as const;

/** TypeScript reference: LayerNorm of each row of `x` ([rows, n]) with weight `w` and bias `b` ([n]), in float64. */
export function layerNormRef(x: Float32Array, w: Float32Array, b: Float32Array, rows: number, n: number, eps: number): Float32Array {
  const y = new Float32Array(rows * n);
  for (let r = 0; r < rows; r++) {
    const row = x.subarray(r * n, (r + 1) * n);
    const mean = row.reduce((s, v) => s + v, 0) / n;
    const variance = row.reduce((s, v) => s + (v - mean) ** 2, 0) / n;
    const scale = 1 / Math.sqrt(variance + eps);
    for (let i = 0; i < n; i++) y[r * n + i] = (row[i]! - mean) * scale * w[i]! + b[i]!;
  }
  return y;
}

/**
 * LayerNorm with a bias of each token's row of `n` elements (an encoder's: BERT's post-norms and
 * embedding norm, SigLIP's pre-norms), from x into y (not in place). The row count rides on the
 * dispatch size, so the uniform is static and `encode` only dispatches.
 */
export async function createLayerNormOp(ctx: OpContext, args: RowNormArgs & { bias: GPUBuffer }): Promise<Op> {
  const f32 = [...(args.xF32 ? ['x_t'] : []), ...(args.yF32 ? ['y_t'] : [])];
  const pipeline = await ctx.cache.get(layerNormKernel, { precision: ctx.precision, f32, constants: { WG: args.wg ?? 64 } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.maxTokens], ['u32', args.n], ['f32', args.eps]])), UNIFORM, 'layer_norm params');
  // Reads x twice (mean, deviations) and once more for the output, writes y; the f32 weight and bias once.
  const bindGroup = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.x, args.weight, args.bias, args.y, params]),
    args.label,
    'norm',
    (rows) => rows * args.n * (3 * elemBytes(ctx.precision, args.xF32) + elemBytes(ctx.precision, args.yF32)) + args.weight.size + args.bias.size,
  );
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(tokens);
    },
  };
}
