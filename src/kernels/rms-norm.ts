import source from '../../shaders/rms_norm.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { actBytes, describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';

export const rmsNormKernel: Kernel = { name: 'rms_norm', source };

/** Workgroup sizes the kernel is specialised and tested at (a power of two: the reduction halves). */
export const RMS_NORM_WG = [32, 64, 128, 256] as const;

/** TypeScript reference: RMSNorm of each row of `x` ([rows, n]) with weight `w` ([n]). */
export function rmsNormRef(x: Float32Array, w: Float32Array, rows: number, n: number, eps: number): Float32Array {
  const y = new Float32Array(rows * n);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < n; i++) ss += x[r * n + i]! ** 2;
    const scale = 1 / Math.sqrt(ss / n + eps);
    for (let i = 0; i < n; i++) y[r * n + i] = x[r * n + i]! * scale * w[i]!;
  }
  return y;
}

/**
 * RMSNorm of `rowsPerToken` rows of `n` elements per token (1 for the residual stream; the head
 * count for qwen3's per-head q/k norm). The row count rides on the dispatch size, so the uniform
 * is static and `encode` only dispatches.
 */
export async function createRmsNormOp(
  ctx: OpContext,
  args: { x: BufferRef; weight: GPUBuffer; y: BufferRef; n: number; rowsPerToken?: number; maxTokens: number; eps: number; wg?: number; label?: OpLabel; xF32?: boolean },
): Promise<Op> {
  const rowsPerToken = args.rowsPerToken ?? 1;
  // xF32: x is the residual stream, f32 at every precision (y is act).
  const pipeline = await ctx.cache.get(rmsNormKernel, { precision: ctx.precision, f32: args.xF32 ? ['x_t'] : [], constants: { WG: args.wg ?? 64 } });
  const params = uploadBuffer(
    ctx.device,
    new Uint8Array(packParams([['u32', args.maxTokens * rowsPerToken], ['u32', args.n], ['f32', args.eps]])),
    UNIFORM,
    'rms_norm params',
  );
  const act = actBytes(ctx.precision);
  // Reads x, writes y, and reads the f32 weight once.
  const bindGroup = describeDispatch(bindBuffers(ctx.device, pipeline, [args.x, args.weight, args.y, params]), args.label, 'norm', (rows) => rows * rowsPerToken * args.n * (elemBytes(ctx.precision, args.xF32) + act) + args.weight.size);
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(tokens * rowsPerToken);
    },
  };
}
