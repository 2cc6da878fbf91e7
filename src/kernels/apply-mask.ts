/**
 * Structured output's token mask on the GPU: logits of tokens the grammar forbids become -inf,
 * before the penalties op and the sampler read them. The bitmask (xgrammar's layout: bit v & 31 of
 * word v >> 5, 1 = allowed) is computed on the CPU each step and written here: vocab / 32 words.
 */
import source from '../../shaders/apply_mask.wgsl';
import { createBuffer, packParams, STORAGE, UNIFORM, uploadBuffer, bindBuffers } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { maskWords } from './mask-ref';
import { describeDispatch, type OpContext, type OpLabel } from './op';

export { applyMaskRef, maskWords } from './mask-ref';

export const applyMaskKernel: Kernel = { name: 'apply_mask', source };

export const APPLY_MASK_WG = [64, 256] as const;

export interface ApplyMaskOp {
  /** Uploads sequence `seq`'s bitmask (maskWords(vocab) words) for the next encode. */
  write(seq: number, mask: Uint32Array): void;
  /** Masks the first `seqs` sequences' logits. */
  encode(pass: GPUComputePassEncoder, seqs: number): void;
  destroy(): void;
}

export async function createApplyMaskOp(ctx: OpContext, args: { logits: GPUBuffer; vocab: number; maxSeqs: number; wg?: number; label?: OpLabel }): Promise<ApplyMaskOp> {
  const wg = args.wg ?? 256;
  const words = maskWords(args.vocab);
  // Logits are f32 whatever the activation precision.
  const pipeline = await ctx.cache.get(applyMaskKernel, { precision: 'f32', constants: { WG: wg } });
  const mask = createBuffer(ctx.device, args.maxSeqs * words * 4, STORAGE, 'token mask');
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.vocab], ['u32', words], ['f32', -Infinity]])), UNIFORM, 'apply_mask params');
  // Per sequence: its logits read and written, its bitmask read.
  const bindGroup = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.logits, mask, params]),
    args.label ?? { role: 'apply_mask', perSeq: true },
    'apply_mask',
    (rows) => rows * (2 * args.vocab * 4 + words * 4),
  );
  const groupsX = Math.ceil(args.vocab / wg);
  return {
    write(seq, bits) {
      if (bits.length !== words) throw new RangeError(`apply_mask: a bitmask of ${bits.length} words; this vocabulary needs ${words}`);
      if (seq < 0 || seq >= args.maxSeqs) throw new RangeError(`apply_mask: sequence ${seq} outside 0..${args.maxSeqs - 1}`);
      ctx.device.queue.writeBuffer(mask, seq * words * 4, bits.buffer, bits.byteOffset, bits.byteLength);
    },
    encode(pass, seqs) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groupsX, seqs);
    },
    destroy() {
      mask.destroy();
      params.destroy();
    },
  };
}
