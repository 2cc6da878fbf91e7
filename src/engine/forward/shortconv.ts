/**
 * LFM2's gated short convolution block of one layer: the conv branch of a layer in
 * `ReferenceModel.forward` (src/reference/forward.ts, `shortConv`), in place of attention.
 *   xb        = rmsnorm(x)                     (operator_norm; folded into the matvec steps' in_proj)
 *   bcx       = W_in · xb                      ([T, 3·hidden]: B, C, x)
 *   y         = C ⊙ conv(B ⊙ x)                (short_conv: each row of the step over its slot's
 *                                               state, the last kernel − 1 inputs, which it advances)
 *   x        += W_out · y                      (or into xb2, then its post-norm or Granite's scale)
 * The state lives in the layer's slot-state buffer (../layer-cache.ts), zeroed when a sequence takes
 * its slot, with a checkpoint row per verify row (speculative decoding's rollback). Its linears never take the integer dot-product path: the recurrence is not fed
 * quantised activations (issue #29). LoRA adapts in_proj and out_proj (conv_in, conv_out).
 */
import type { OpLabel } from '../../kernels/op';
import { createShortConvOp } from '../../kernels/short-conv';
import { destroyAll, type Block, type BlockBuilder } from './block';

/** The conv block's buffers, made once and shared by every conv layer (layers run one after another). */
interface ShortConvScratch {
  bcx: GPUBuffer; // [maxTokens, 3·hidden] in_proj's output: B, C, x
  y: GPUBuffer; // [maxTokens, hidden] C ⊙ conv(B ⊙ x)
}

export async function createShortConvBlock(b: BlockBuilder, l: number): Promise<Block> {
  const { config: c, state, step } = b;
  const H = c.hiddenSize;
  const T = b.limits.maxTokens;
  const s = b.once('shortconv', (): ShortConvScratch => ({ bcx: b.buffers.make(T * 3 * H, 'bcx'), y: b.buffers.make(T * H, 'conv y') }));
  const w = b.weights.layers[l]!;
  const at = (role: string): OpLabel => ({ role, layer: l });

  // the rmsnormed stream; the norm op runs for the steps whose projection cannot fold it (StepPlan.foldNorms)
  const input = w.attnNorm ? state.xb : state.x;
  const norm = w.attnNorm && (await b.norm({ label: at('attn_norm'), x: state.x, weight: w.attnNorm, y: state.xb }));
  // in_proj: B, C and x rows
  const inProj = await b.linear({ label: at('conv_in'), weight: w.convIn!, x: input, y: s.bcx, foldNorm: w.attnNorm, integerDot: false });
  // the gated causal conv over each row's state
  const conv = await createShortConvOp(b.ctx, {
    bcx: s.bcx,
    weight: w.convKernel!,
    state: b.caches.state(l),
    ckpt: b.caches.checkpointRow,
    y: s.y,
    lastToken: step.lastToken,
    rowSlot: step.rowSlot,
    counts: step.counts,
    n: H,
    taps: c.shortConv!.kernel,
    label: at('short_conv'),
  });
  // out_proj into the stream, or into xb2 for a post-norm or Granite's scale (neither in LFM2)
  const out = b.branchOut(w.postAttnNorm);
  const outProj = await b.linear({ label: at('conv_out'), weight: w.convOut!, x: s.y, y: out.y, addInto: out.addInto, integerDot: false });
  const end = await b.branchEnd(l, 'attn', w.postAttnNorm);

  return {
    lora: { conv_in: b.loraIo(w.convIn!, input, s.bcx), conv_out: b.loraIo(w.convOut!, s.y, out.y) },
    encode(pass, plan) {
      const { tokens, lora } = plan;
      if (!plan.foldNorms) norm?.encode(pass, tokens);
      inProj.encode(pass, tokens);
      lora?.after(pass, tokens, l, 'conv_in');
      conv.encode(pass, plan.seqs);
      outProj.encode(pass, tokens);
      lora?.after(pass, tokens, l, 'conv_out');
      end?.encode(pass, tokens);
    },
    destroy: () => destroyAll([norm, inProj, conv, outProj, end]),
  };
}
