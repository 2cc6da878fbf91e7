import source from '../../shaders/kv_write.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { actBytes, describeDispatch, type Op, type OpContext, type OpLabel } from './op';

export const kvWriteKernel: Kernel = { name: 'kv_write', source };

/** Workgroup sizes the kernel is tested at. */
export const KV_WRITE_WG = [32, 64] as const;

/**
 * TypeScript reference: writes each new token's row (`rowLen` = nKv·headDim elements of `x`) into
 * `cache` ([numPages·PAGE, rowLen]) at its slot.
 */
export function kvWriteRef(cache: Float32Array, x: Float32Array, slotMapping: ArrayLike<number>, rowLen: number): Float32Array {
  for (let t = 0; t < slotMapping.length; t++) {
    cache.set(x.subarray(t * rowLen, (t + 1) * rowLen), slotMapping[t]! * rowLen);
  }
  return cache;
}

/** Copies this step's k and v into one layer's paged K and V caches at `slotMapping`. */
export async function createKvWriteOp(
  ctx: OpContext,
  args: {
    k: BufferRef; // [maxTokens, nKv, headDim] act
    v: BufferRef;
    slotMapping: BufferRef; // step buffer, [maxTokens] u32
    kCache: GPUBuffer; // [numPages, PAGE, nKv, headDim] act
    vCache: GPUBuffer;
    nKv: number;
    headDim: number;
    wg?: number;
    label?: OpLabel;
  },
): Promise<Op> {
  if (args.headDim % 4 !== 0) throw new RangeError(`kv_write copies vec4s: headDim must be a multiple of 4, got ${args.headDim}`);
  const wg = args.wg ?? 64;
  const rowVec4s = (args.nKv * args.headDim) / 4;
  const pipeline = await ctx.cache.get(kvWriteKernel, { precision: ctx.precision, constants: { WG: wg } });
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', rowVec4s]])), UNIFORM, 'kv_write params');
  const act = actBytes(ctx.precision);
  // Reads k and v, writes them into the caches.
  const bindGroup = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.k, args.v, args.slotMapping, args.kCache, args.vCache, params]),
    args.label,
    'kv_write',
    (rows) => 4 * rows * args.nKv * args.headDim * act,
  );
  const x = Math.ceil(rowVec4s / wg);
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(x, tokens);
    },
  };
}
