/**
 * The head: the last paragraph of `ReferenceModel.forward` (src/reference/forward.ts), over each
 * sequence's last token only. In f32 whatever the activations are: the sampler reads f32 logits.
 *   last      = x[last token of each sequence]   (a gather of f32 residual rows)
 *   normed    = rmsnorm(last)                    (folded into the LM head while it runs the matvec;
 *                                                 written where the hidden states are read back)
 *   logits    = W_out · normed                   (then ÷ logits_scaling (Granite), soft-capped (Gemma 2));
 *                                                 not on an embedding model, which reads `normed` (last-token pooling)
 */
import { createEmbedOp } from '../../kernels/embed';
import { createLinearOp, MATVEC_MAX_TOKENS } from '../../kernels/matmul';
import { createRmsNormOp } from '../../kernels/rms-norm';
import { createSoftcapOp } from '../../kernels/softcap';
import { destroyAll, type Block, type BlockBuilder } from './block';

export interface Head extends Block {
  /** f32 [maxSeqs, hidden] each sequence's final hidden state (after the output norm), where the step asked for them. */
  readonly hidden: GPUBuffer;
  /** f32 [maxSeqs, vocab] each sequence's logits. */
  readonly logits: GPUBuffer;
}

export async function createHead(b: BlockBuilder): Promise<Head> {
  const { config: c, weights, step, buffers } = b;
  const { hiddenSize: H, vocabSize: V } = c;
  const S = b.limits.maxSeqs;
  const f32 = { ...b.ctx, precision: 'f32' as const };
  const last = buffers.make(S * H, 'last', 'f32'); // residual rows of each sequence's last token
  const lastNormed = buffers.make(S * H, 'lastNormed', 'f32');
  const logits = buffers.make(S * V, 'logits', 'f32');

  // last token of each sequence: gather its residual row (f32 at every precision)
  const gatherLast = await createEmbedOp(f32, { tokens: step.lastToken, table: b.state.x, x: last, dtype: 'F32', n: H, vocab: b.limits.maxTokens, label: { role: 'gather_last', perSeq: true } });
  // final rmsnorm
  const finalNorm = await createRmsNormOp(f32, { x: last, weight: weights.outputNorm, y: lastNormed, n: H, maxTokens: S, eps: c.rmsNormEps, label: { role: 'output_norm', perSeq: true } });
  // classifier into logits; the final norm folds in while the step has at most MATVEC_MAX_TOKENS sequences
  const out = weights.output;
  const lmHead = await createLinearOp(
    f32,
    { weight: out.parts, dtype: out.dtype, n: out.rows, k: out.cols, x: lastNormed, y: logits, step: step.seqCount, maxTokens: S, label: { role: 'lm_head', perSeq: true }, norm: { x: last, weight: weights.outputNorm, eps: c.rmsNormEps } },
    b.specs,
  );
  // divided by Granite's logits_scaling, then soft-capped (Gemma 2); absent when neither
  const cap = c.finalLogitSoftcap;
  const div = c.logitsScaling;
  // An embedding model (Qwen3-Embedding) is read at its final norm; its sampler draws from logits never written.
  const pooled = !!c.embedding;
  const scale = cap === null && div === 1 ? undefined : await createSoftcapOp(f32, { x: logits, n: V, cap, div, label: { role: 'logits_scale', perSeq: true } });

  return {
    hidden: lastNormed,
    logits,
    lora: {},
    encode(pass, plan) {
      const { seqs } = plan;
      gatherLast.encode(pass, seqs);
      // An embedding model's step ends at the normed rows (last-token pooling): no logits.
      if (seqs > MATVEC_MAX_TOKENS || plan.hidden || pooled) finalNorm.encode(pass, seqs);
      if (pooled) return;
      lmHead.encode(pass, seqs);
      scale?.encode(pass, seqs);
    },
    destroy: () => destroyAll([gatherLast, finalNorm, lmHead, scale]),
  };
}
