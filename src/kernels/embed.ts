import dequantLib from '../../shaders/lib/dequant.wgsl';
import body from '../../shaders/embed.wgsl';
import { dequantize } from '../formats/quants';
import { tensorByteLength, type DType } from '../formats/types';
import { packParams, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';
import { gpuBytesPerRow, WTYPE, type WeightPart } from './weights';

export const embedKernel: Kernel = { name: 'embed', source: dequantLib + body };

/** Workgroup sizes the kernel is specialised and tested at (each thread writes 4 columns). */
export const EMBED_WG = [32, 64, 128] as const;

/**
 * The `Params` uniform of embed.wgsl for a [vocab, n] table of `dtype`; for a part of a table split
 * by rows, `part` says which rows its buffer holds.
 */
export function embedParams(dtype: DType, n: number, vocab: number, scale = 1, part = { row0: 0, rows: vocab }): ArrayBuffer {
  if (n % 4 !== 0) throw new RangeError(`embed needs a row length that is a multiple of 4, got ${n}`);
  return packParams([['u32', n], ['u32', gpuBytesPerRow(dtype, n) / 4], ['u32', vocab], ['f32', scale], ['u32', part.row0], ['u32', part.rows]]);
}

/**
 * TypeScript reference: the rows `tokens` of a [vocab, n] table given as ggml bytes of `dtype`,
 * dequantised. Ids past the table are clamped to its last row, as the kernel does.
 */
export function embedRef(dtype: DType, table: Uint8Array, vocab: number, n: number, tokens: ArrayLike<number>, scale = 1): Float32Array {
  const rowBytes = tensorByteLength(dtype, n);
  const x = new Float32Array(tokens.length * n);
  for (let t = 0; t < tokens.length; t++) {
    const row = Math.min(tokens[t]!, vocab - 1);
    dequantize(dtype, table.subarray(row * rowBytes, (row + 1) * rowBytes), n, x.subarray(t * n, (t + 1) * n));
  }
  return scale === 1 ? x : x.map((v) => v * scale);
}

/**
 * Embedding lookup for a step: x[t, :] = scale * table[tokens[t], :] for the first `tokens` ids
 * of the step's `tokens` buffer. `table` is uploaded in the GPU layout (`uploadWeight`), shape
 * [vocab, n], or its row parts (`uploadWeightParts`: one dispatch per part, each writing the
 * tokens it owns); `scale` defaults to 1 (Gemma: sqrt(n)).
 */
export async function createEmbedOp(
  ctx: OpContext,
  args: { tokens: BufferRef; table: GPUBuffer | readonly WeightPart[]; x: GPUBuffer; dtype: DType; n: number; vocab: number; scale?: number; wg?: number; label?: OpLabel; xF32?: boolean },
): Promise<Op> {
  const wg = args.wg ?? 64;
  // xF32: x is the residual stream, f32 at every precision.
  const pipeline = await ctx.cache.get(embedKernel, { precision: ctx.precision, f32: args.xF32 ? ['x_t'] : [], constants: { WG: wg, WTYPE: WTYPE[args.dtype] } });
  const parts = 'length' in args.table ? args.table : [{ buffer: args.table, row0: 0, rows: args.vocab }];
  const params = parts.map((p) => uploadBuffer(ctx.device, new Uint8Array(embedParams(args.dtype, args.n, args.vocab, args.scale, p)), UNIFORM, 'embed params'));
  // Per row: its id, one table row (the table's GPU layout, so the size over the rows) and the act
  // row written. Split, the id and the written row count with the first part's dispatch and the
  // table row is spread over the parts by their size (so the parts add up to the whole).
  const rowBytes = (p: WeightPart, i: number) => (i === 0 ? 4 + args.n * elemBytes(ctx.precision, args.xF32) : 0) + p.buffer.size / args.vocab;
  const bindGroups = parts.map((p, i) =>
    describeDispatch(bindBuffers(ctx.device, pipeline, [args.tokens, p.buffer, args.x, params[i]!]), args.label, 'embed', (rows) => rows * rowBytes(p, i)),
  );
  const groupsX = Math.ceil(args.n / 4 / wg);
  return {
    destroy: () => params.forEach((b) => b.destroy()),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      for (const bindGroup of bindGroups) {
        pass.setBindGroup(0, bindGroup);
        pass.dispatchWorkgroups(groupsX, tokens);
      }
    },
  };
}
