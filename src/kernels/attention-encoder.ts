import source from '../../shaders/attn_encoder.wgsl';
import { packParams, UNIFORM, uploadBuffer, bindBuffers, type BufferRef } from '../gpu/buffers';
import type { Kernel } from '../gpu/pipelines';
import { describeDispatch, elemBytes, type Op, type OpContext, type OpLabel } from './op';

export const encoderAttentionKernel: Kernel = { name: 'attn_encoder', source };

/** Workgroup sizes the kernel is specialised and tested at (a power of two: the reductions halve). */
export const ENCODER_ATTENTION_WG = [32, 64] as const;

/** The shader's MAX_OUTS: each thread owns at most this many of a head's output columns. */
const MAX_OUTS = 4;

/**
 * Bidirectional (encoder) attention over this step's own rows: each token attends to every token
 * of its sequence (BERT, SigLIP), no KV cache and no causal mask. q is [T, nHeads, headDim], k and
 * v [T, nKv, headDim], out like q; `lastToken` and `counts` are the step's (each sequence's last
 * token, `{T, S}`), its tokens grouped by sequence in order. The reference is `attentionRef` with
 * `causal: false` (./attention-ref.ts), and its `halfWindow` for the symmetric window.
 */
export async function createEncoderAttentionOp(
  ctx: OpContext,
  args: {
    q: BufferRef;
    k: BufferRef;
    v: BufferRef;
    out: BufferRef;
    lastToken: BufferRef;
    counts: BufferRef;
    nHeads: number;
    nKv: number;
    headDim: number;
    /** What q·k is multiplied by; default 1/sqrt(headDim). */
    scale?: number;
    /** A symmetric sliding window: keys at most this many positions away on either side (EmbeddingGemma's local layers: floor(window / 2)). 0/absent: all. */
    halfWindow?: number;
    wg?: number;
    label?: OpLabel;
  },
): Promise<Op> {
  const wg = args.wg ?? 64;
  if (args.headDim > MAX_OUTS * wg) throw new RangeError(`encoder attention: head dim ${args.headDim} exceeds ${MAX_OUTS} columns per thread at WG=${wg}`);
  if (args.nHeads % args.nKv !== 0) throw new RangeError(`encoder attention: ${args.nKv} KV heads do not divide ${args.nHeads} query heads`);
  const pipeline = await ctx.cache.get(encoderAttentionKernel, { precision: ctx.precision, constants: { WG: wg, HEAD_DIM: args.headDim } });
  const scale = args.scale ?? 1 / Math.sqrt(args.headDim);
  const params = uploadBuffer(ctx.device, new Uint8Array(packParams([['u32', args.nHeads], ['u32', args.nKv], ['f32', scale], ['u32', args.halfWindow ?? 0]])), UNIFORM, 'attn_encoder params');
  const act = elemBytes(ctx.precision);
  // Bytes as if each workgroup read its sequence's K and V once (a lower bound: the step's T² reads come from cache).
  const bindGroup = describeDispatch(
    bindBuffers(ctx.device, pipeline, [args.q, args.k, args.v, args.lastToken, args.counts, args.out, params]),
    args.label,
    'attention',
    (tokens) => tokens * (2 * args.nHeads + 2 * args.nKv) * args.headDim * act,
  );
  return {
    destroy: () => params.destroy(),
    encode(pass, tokens) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(tokens, args.nHeads);
    },
  };
}
