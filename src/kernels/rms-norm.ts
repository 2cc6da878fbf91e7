import source from '../../shaders/rms_norm.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';

export const rmsNormKernel: Kernel = { name: 'rms_norm', source };

/** Workgroup sizes the kernel is specialised and tested at (a power of two: the reduction halves). */
export const RMS_NORM_WG = [32, 64, 128, 256] as const;

/** TypeScript reference: RMSNorm of each row of `x` ([rows, n]) with weight `w` ([n]), or row r with w's row r % wRows ([wRows, n]). */
export function rmsNormRef(x: Float32Array, w: Float32Array, rows: number, n: number, eps: number, wRows = 1): Float32Array {
  const y = new Float32Array(rows * n);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < n; i++) ss += x[r * n + i]! ** 2;
    const scale = 1 / Math.sqrt(ss / n + eps);
    const wBase = (r % wRows) * n;
    for (let i = 0; i < n; i++) y[r * n + i] = x[r * n + i]! * scale * w[wBase + i]!;
  }
  return y;
}

/** What a norm over rows takes (RMSNorm, ./layer-norm.ts's LayerNorm). */
export interface RowNormArgs {
  x: BufferRef;
  weight: GPUBuffer;
  y: BufferRef;
  n: number;
  maxTokens: number;
  eps: number;
  wg?: number;
  label?: OpLabel;
  /** x is f32 at every precision (the residual stream, or a branch output before its post-norm). */
  xF32?: boolean;
  /** y is f32 at every precision (the residual stream). */
  yF32?: boolean;
}

/**
 * RMSNorm of `rowsPerToken` rows of `n` elements per token (1 for the residual stream; the head
 * count for qwen3's per-head q/k norm). The row count rides on the dispatch size, so the uniform
 * is static and `encode` only dispatches. `add`: the normed rows are added into y (y += scale ·
 * norm(x)), a post-norm and its residual add in one dispatch.
 */
export async function createRmsNormOp(
  ctx: OpContext,
  args: RowNormArgs & {
    rowsPerToken?: number;
    /** The weight holds one row of `n` per row of a token (a grouped norm: Mamba-2's), not one row shared by all. */
    weightPerRow?: boolean;
    /** Adds scale · the normed rows into y instead of storing them. */
    add?: { scale: number };
  },
): Promise<Op> {
  const rowsPerToken = args.rowsPerToken ?? 1;
  const f32 = [...(args.xF32 ? ['x_t'] : []), ...(args.yF32 ? ['y_t'] : [])];
  const pipeline = await ctx.cache.get(rmsNormKernel, { precision: ctx.precision, f32, constants: { WG: args.wg ?? 64, ...(args.add ? { ADD: 1 } : {}) } });
  const params = uploadBuffer(
    ctx.device,
    new Uint8Array(packParams([['u32', args.maxTokens * rowsPerToken], ['u32', args.n], ['f32', args.eps], ['f32', args.add?.scale ?? 1], ['u32', args.weightPerRow ? rowsPerToken : 1]])),
    UNIFORM,
    'rms_norm params',
  );
  const yBytes = elemBytes(ctx.precision, args.yF32);
  // Reads x, writes y (reads it too with `add`), and reads the f32 weight once.
  const bindGroup = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.x, args.weight, args.y, params]),
    args.label,
    'norm',
    (rows) => rows * rowsPerToken * args.n * (elemBytes(ctx.precision, args.xF32) + (args.add ? 2 : 1) * yBytes) + args.weight.size,
  );
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(tokens * rowsPerToken);
    },
  };
}
