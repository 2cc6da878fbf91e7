import source from '../../shaders/feed.wgsl';
import { bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, type Op, type OpContext, type OpLabel } from './op';

export const feedKernel: Kernel = { name: 'feed', source };

/** Workgroup sizes the kernel is specialised and tested at. */
export const FEED_WG = [32, 64, 128] as const;

/** A step token meaning "the token the sampler drew for this row's sequence at the previous step". */
export const FEED = 0xffffffff;

/** TypeScript reference: each step token, with FEED replaced by its sequence's last sampled token. */
export function feedRef(stepTokens: ArrayLike<number>, tokenSeq: ArrayLike<number>, rowSlot: ArrayLike<number>, sampled: ArrayLike<number>): Uint32Array {
  return Uint32Array.from({ length: stepTokens.length }, (_, t) => (stepTokens[t] === FEED ? sampled[rowSlot[tokenSeq[t]!]!]! : stepTokens[t]!));
}

/**
 * Resolves a step's token ids into `ids` (u32 [maxTokens]): what the CPU wrote, except FEED,
 * which takes the token the sampler left at the row's slot in `sampled`. `counts` is the step's
 * uniform (T at offset 0); `encode(pass, tokens)` covers the step's T tokens.
 */
export async function createFeedOp(
  ctx: OpContext,
  args: { stepTokens: BufferRef; tokenSeq: BufferRef; rowSlot: BufferRef; sampled: BufferRef; ids: GPUBuffer; counts: BufferRef; wg?: number; label?: OpLabel },
): Promise<Op> {
  const wg = args.wg ?? 64;
  const pipeline = await ctx.cache.get(feedKernel, { constants: { WG: wg } });
  // Per token: its step id, sequence, the row's slot and sampled token read, its id written (u32s).
  const bindGroup = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.stepTokens, args.tokenSeq, args.rowSlot, args.sampled, args.ids, args.counts]),
    args.label,
    'feed',
    (rows) => 5 * 4 * rows,
  );
  return {
    destroy: () => {},
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(Math.ceil(tokens / wg));
    },
  };
}
