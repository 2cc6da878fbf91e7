/**
 * A vec4 buffer copy, used to measure the device's memory bandwidth (bytes read + written / time)
 * so the bench can say how close the decode step comes to it. Not used by the engine.
 */
import source from '../../shaders/copy.wgsl';
import { createBuffer, packParams, STORAGE, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import type { OpContext } from './op';

export const copyKernel: Kernel = { name: 'copy', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const COPY_WG = [64, 256] as const;

/** Bytes per copied word (a vec4<u32>). */
export const COPY_WORD_BYTES = 16;

/** TypeScript reference: the copy is the identity. */
export function copyRef(src: Uint32Array): Uint32Array {
  return src.slice();
}

export interface CopyOp {
  /** Bytes moved by one dispatch: each byte is read once and written once. */
  trafficBytes: number;
  encode(pass: GPUComputePassEncoder): void;
  destroy(): void;
}

/**
 * Copies `bytes` (a multiple of 16) from `src` to `dst`. `maxGroups` caps the grid (default the
 * 1D dispatch limit); words past the grid are reached by the grid-stride loop.
 */
export async function createCopyOp(
  ctx: OpContext,
  args: { src: GPUBuffer; dst: GPUBuffer; bytes: number; wg?: number; maxGroups?: number },
): Promise<CopyOp> {
  const { device } = ctx;
  if (args.bytes <= 0 || args.bytes % COPY_WORD_BYTES !== 0) throw new RangeError(`copy: ${args.bytes} bytes is not a positive multiple of ${COPY_WORD_BYTES}`);
  if (args.src.size < args.bytes || args.dst.size < args.bytes) throw new RangeError(`copy: buffers of ${args.src.size} and ${args.dst.size} bytes cannot hold ${args.bytes}`);
  const wg = args.wg ?? 256;
  const n = args.bytes / COPY_WORD_BYTES;
  const groups = Math.max(1, Math.min(Math.ceil(n / wg), args.maxGroups ?? device.limits.maxComputeWorkgroupsPerDimension));
  const pipeline = await ctx.cache.get(copyKernel, { constants: { WG: wg } });
  const params = uploadBuffer(device, new Uint8Array(packParams([['u32', n], ['u32', groups * wg]])), UNIFORM, 'copy params');
  const bindGroup = bindBuffers(device, pipeline, [args.src, args.dst, params]);
  return {
    trafficBytes: 2 * args.bytes,
    encode(pass) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups);
    },
    destroy: () => params.destroy(),
  };
}

export interface BandwidthResult {
  /** Bytes per copy (the buffer size); traffic is twice that. */
  bytes: number;
  iterations: number;
  /** Best of the repeats, in GB/s (1e9 bytes/s) of read + write traffic. */
  gbPerSecond: number;
  /** Seconds per copy in the best repeat. */
  seconds: number;
  /**
   * The same copies timed on the GPU (a timestamp pair per copy's pass; the fastest copy), in GB/s:
   * the yardstick for per-dispatch timestamps. Absent when `timestamps` was not asked for.
   */
  timestampGBps?: number;
}

/**
 * Measures copy bandwidth: `iterations` copies in one submission, timed on the wall clock from
 * submit to `onSubmittedWorkDone`, best of `repeats` (after one warm-up copy). Wall clock, like the
 * decode timings it is compared with.
 */
export async function measureCopyBandwidth(
  ctx: OpContext,
  opts: { bytes: number; iterations?: number; repeats?: number; wg?: number; timestamps?: boolean },
): Promise<BandwidthResult> {
  const { device } = ctx;
  const bytes = Math.floor(opts.bytes / COPY_WORD_BYTES) * COPY_WORD_BYTES;
  const iterations = opts.iterations ?? 8;
  const repeats = opts.repeats ?? 3;
  const src = createBuffer(device, bytes, STORAGE, 'copy src');
  const dst = createBuffer(device, bytes, STORAGE, 'copy dst');
  const op = await createCopyOp(ctx, { src, dst, bytes, wg: opts.wg });
  const timed = opts.timestamps ? device.createQuerySet({ type: 'timestamp', count: 2 * iterations, label: 'copy timestamps' }) : null;
  /** Wall seconds of `count` copies; `stamp`: each copy's pass writes its timestamps. */
  const run = async (count: number, stamp = false): Promise<number> => {
    const encoder = device.createCommandEncoder();
    // One pass per copy: a barrier between them, as between the dispatches of a decode step.
    for (let i = 0; i < count; i++) {
      const pass = encoder.beginComputePass(
        stamp && timed ? { timestampWrites: { querySet: timed, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } } : undefined,
      );
      op.encode(pass);
      pass.end();
    }
    const t0 = performance.now();
    device.queue.submit([encoder.finish()]);
    await device.queue.onSubmittedWorkDone();
    return (performance.now() - t0) / 1000;
  };
  try {
    await run(1);
    let best = Infinity;
    for (let r = 0; r < repeats; r++) best = Math.min(best, await run(iterations));
    const seconds = best / iterations;
    const result: BandwidthResult = { bytes, iterations, seconds, gbPerSecond: op.trafficBytes / seconds / 1e9 };
    if (timed) {
      await run(iterations, true);
      const ns = await readTimestampPairs(device, timed, iterations);
      const fastest = Math.min(...ns.filter((t) => t > 0));
      result.timestampGBps = Number.isFinite(fastest) ? op.trafficBytes / fastest : NaN;
    }
    return result;
  } finally {
    timed?.destroy();
    op.destroy();
    src.destroy();
    dst.destroy();
  }
}

/** The nanoseconds between each of `pairs` begin/end timestamp pairs of `querySet`. */
async function readTimestampPairs(device: GPUDevice, querySet: GPUQuerySet, pairs: number): Promise<number[]> {
  const resolve = device.createBuffer({ size: 16 * pairs, usage: 0x0200 | 0x0004 /* QUERY_RESOLVE | COPY_SRC */, label: 'copy timestamps resolve' });
  const readback = device.createBuffer({ size: 16 * pairs, usage: 0x0001 | 0x0008 /* MAP_READ | COPY_DST */, label: 'copy timestamps readback' });
  try {
    const encoder = device.createCommandEncoder();
    encoder.resolveQuerySet(querySet, 0, 2 * pairs, resolve, 0);
    encoder.copyBufferToBuffer(resolve, 0, readback, 0, 16 * pairs);
    device.queue.submit([encoder.finish()]);
    await readback.mapAsync(0x0001 /* GPUMapMode.READ */);
    const ticks = new BigUint64Array(readback.getMappedRange());
    return Array.from({ length: pairs }, (_, i) => Number(ticks[2 * i + 1]! - ticks[2 * i]!));
  } finally {
    readback.destroy();
    resolve.destroy();
  }
}
