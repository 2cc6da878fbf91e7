/**
 * The attention block of one layer: the first paragraphs of a layer in `ReferenceModel.forward`
 * (src/reference/forward.ts), from "attention input" to the output projection's residual.
 *   xb        = rmsnorm(x)                     (pre-norm; folded into the matvec steps' q/k/v)
 *   q, k, v   = W_qkv · xb (+ biases)          (one projection per run of a weight type, into qkv)
 *   q, k      = rmsnorm per head or whole      (Qwen3, OLMo 2)
 *   q, k      = RoPE(q, k), k and v → cache    (one dispatch; kv_write alone on NoPE layers)
 *   att       = softmax(q·kᵀ · scale) · v      (paged; prefill or decode kernel, windows, soft-cap)
 *   att      *= sigmoid(gate)                  (gated attention, Qwen3.5: q_proj's gate rows)
 *   x        += W_o · att (+ bias)             (or into xb2, then its post-norm or Granite's scale)
 * A family's differences are flags of its ModelConfig, never its arch name.
 */
import { uploadBuffer, STORAGE } from '../../gpu/buffers';
import { createAttentionOp, type AttentionOp } from '../../kernels/attention';
import { createKvWriteOp } from '../../kernels/kv-write';
import type { LinearSegment } from '../../kernels/matmul';
import type { Op, OpLabel } from '../../kernels/op';
import { createRopeOp, ropeInvFreq } from '../../kernels/rope';
import { createSigmoidGateOp } from '../../kernels/sigmoid-gate';
import { attentionScale, layerRope, layerUsesRope, layerWindow } from '../../model/config';
import { ropeAttentionFactor } from '../../model/rope';
import type { QkvMember } from '../gpu-weights';
import { destroyAll, encodeAll, type Block, type BlockBuilder } from './block';

/** Attention's buffers, made once and shared by every attention layer (layers run one after another). */
interface AttentionScratch {
  qkv: GPUBuffer; // q, k and v below, one buffer: a fused q/k/v projection writes all three
  q: GPUBufferBinding; // [maxTokens, nHeads·headDim] in qkv
  gate?: GPUBufferBinding; // [maxTokens, nHeads·headDim] in qkv: gated attention's gate (Qwen3.5)
  k: GPUBufferBinding; // [maxTokens, nKv·headDim] in qkv
  v: GPUBufferBinding; // [maxTokens, nKv·headDim] in qkv
  /** Where each of q, k and v lands in `qkv`, in elements: [maxTokens][its rows] at its region. */
  segment: Record<QkvMember, LinearSegment>;
  qn?: GPUBuffer; // [maxTokens, nHeads·headDim] q after its norm (per head or whole)
  kn?: GPUBuffer; // [maxTokens, nKv·headDim]
  att: GPUBuffer; // [maxTokens, nHeads·headDim] attention output
  invFreq: GPUBuffer; // f32 [rotaryDim/2]
  invFreqLocal: GPUBuffer; // f32 [rotaryDim/2] of windowed layers with their own base (Gemma 3); else invFreq
}

function attentionScratch(b: BlockBuilder): AttentionScratch {
  const { config: c, buffers, act } = b;
  const { numHeads: nH, numKvHeads: nKv, headDim: D } = c;
  const T = b.limits.maxTokens;
  const { device } = b.ctx;
  const invFreq = buffers.own(uploadBuffer(device, ropeInvFreq({ ...c, freqFactors: b.ropeFreqFactors, contextLength: b.limits.contextLength }), STORAGE, 'rope invFreq'));
  const invFreqLocal = c.ropeLocalTheta === null ? invFreq : buffers.own(uploadBuffer(device, ropeInvFreq({ ...c, ropeTheta: c.ropeLocalTheta, ropeScaling: null }), STORAGE, 'rope invFreq (local)'));
  // q, k and v regions of one buffer, each starting where a binding may; gated attention's gate after v.
  const [qBytes, kvBytes] = [b.region(T * nH * D), b.region(T * nKv * D)];
  const gBytes = c.attnOutputGate ? qBytes : 0;
  const qkv = buffers.make((qBytes + 2 * kvBytes + gBytes) / act, 'qkv');
  const gAt = qBytes + 2 * kvBytes;
  return {
    qkv,
    q: { buffer: qkv, offset: 0, size: T * nH * D * act },
    k: { buffer: qkv, offset: qBytes, size: T * nKv * D * act },
    v: { buffer: qkv, offset: qBytes + kvBytes, size: T * nKv * D * act },
    gate: c.attnOutputGate ? { buffer: qkv, offset: gAt, size: T * nH * D * act } : undefined,
    segment: { q: { rows: nH * D, offset: 0 }, k: { rows: nKv * D, offset: qBytes / act }, v: { rows: nKv * D, offset: (qBytes + kvBytes) / act }, gate: { rows: nH * D, offset: gAt / act } },
    qn: c.qkNorm ? buffers.make(T * nH * D, 'qn') : undefined,
    kn: c.qkNorm ? buffers.make(T * nKv * D, 'kn') : undefined,
    att: buffers.make(T * nH * D, 'att'),
    invFreq,
    invFreqLocal,
  };
}

export async function createAttentionBlock(b: BlockBuilder, l: number): Promise<Block> {
  const s = b.once('attention', () => attentionScratch(b));
  const { config: c, state } = b;
  const { hiddenSize: H, numHeads: nH, numKvHeads: nKv, headDim: D } = c;
  const w = b.weights.layers[l]!;
  const at = (role: string): OpLabel => ({ role, layer: l });

  // attention input: the rmsnormed stream (pre-norm), or the stream itself (post-norm, OLMo 2); the
  // norm op runs for the steps whose projections cannot fold it (StepPlan.foldNorms)
  const input = w.attnNorm ? state.xb : state.x;
  const attnNorm = w.attnNorm && (await b.norm({ label: at('attn_norm'), x: state.x, weight: w.attnNorm, y: state.xb }));

  // qkv matmuls (+ biases): one projection writing q, k and v, or one per run of a weight type (../gpu-weights.ts)
  const qkv = await Promise.all(
    w.qkv.map((part) =>
      b.linear({ label: at(part.members.length === 3 ? 'qkv' : part.members.join('')), weight: part.matrix, x: input, y: s.qkv, bias: part.bias, foldNorm: w.attnNorm, segments: part.members.map((m) => s.segment[m]) }),
    ),
  );

  // q/k rmsnorm before RoPE: per head (Qwen3: rows of headDim) or over the whole projection (OLMo 2)
  const full = c.qkNormScope === 'full';
  const qNorm = w.qNorm && (await b.norm({ label: at('q_norm'), x: s.q, weight: w.qNorm, y: s.qn!, ...(full ? { n: nH * D } : { n: D, rowsPerToken: nH }) }));
  const kNorm = w.kNorm && (await b.norm({ label: at('k_norm'), x: s.k, weight: w.kNorm, y: s.kn!, ...(full ? { n: nKv * D } : { n: D, rowsPerToken: nKv }) }));

  // RoPE on q and k, writing the rotated keys and the values into the cache; NoPE layers write them alone
  const rope = await createRopeOrKvWrite(b, s, l);

  // attention over the paged cache
  const attention = await createAttention(b, s, l);

  // gated attention (Qwen3.5): each head's output times sigmoid(its gate)
  const gate = s.gate && (await createSigmoidGateOp(b.ctx, { x: s.att, g: s.gate, n: nH * D, label: at('attn_gate') }));

  // output projection (+ bias) into the stream, or into xb2 for its post-norm (OLMo 2, Gemma) or Granite's scale
  const out = b.branchOut(w.postAttnNorm);
  const o = await b.linear({ label: at('o'), weight: w.wo, x: s.att, y: out.y, bias: w.bo, addInto: out.addInto });
  const end = await b.branchEnd(l, 'attn', w.postAttnNorm);

  return {
    lora: {
      q: b.loraIo({ rows: nH * D, cols: H }, input, s.q),
      k: b.loraIo({ rows: nKv * D, cols: H }, input, s.k),
      v: b.loraIo({ rows: nKv * D, cols: H }, input, s.v),
      o: b.loraIo(w.wo, s.att, out.y),
      // gated attention: the q adapter's gate rows onto the gates (LoraPool keeps them apart)
      ...(s.gate ? { q_gate: b.loraIo({ rows: nH * D, cols: H }, input, s.gate) } : {}),
    },
    encode(pass, plan) {
      const { tokens, lora } = plan;
      if (!plan.foldNorms) attnNorm?.encode(pass, tokens);
      encodeAll(pass, tokens, qkv);
      lora?.after(pass, tokens, l, 'q');
      lora?.after(pass, tokens, l, 'q_gate');
      lora?.after(pass, tokens, l, 'k');
      lora?.after(pass, tokens, l, 'v');
      encodeAll(pass, tokens, [qNorm, kNorm, rope]);
      attention.encode(pass, tokens, plan.mode, plan.maxKeys);
      gate?.encode(pass, tokens);
      o.encode(pass, tokens);
      lora?.after(pass, tokens, l, 'o');
      end?.encode(pass, tokens);
    },
    destroy: () => destroyAll([attnNorm, ...qkv, qNorm, kNorm, rope, attention, gate, o, end]),
  };
}

/** RoPE (each head's first rotaryDim dimensions; the local base on Gemma 3's windowed layers) with the cache write, or kv_write alone on NoPE layers. */
function createRopeOrKvWrite(b: BlockBuilder, s: AttentionScratch, l: number): Promise<Op> {
  const { config: c, step } = b;
  const kv = b.caches.paged(l);
  const q = s.qn ?? s.q;
  const k = s.kn ?? s.k;
  const { numHeads: nHeads, numKvHeads: nKv, headDim } = c;
  if (!layerUsesRope(c, l)) {
    return createKvWriteOp(b.ctx, { k, v: s.v, slotMapping: step.slotMapping, kCache: kv.k, vCache: kv.v, nKv, headDim, label: { role: 'kv_write', layer: l } });
  }
  return createRopeOp(b.ctx, {
    q,
    k,
    positions: step.positions,
    invFreq: layerRope(c, l) === 'local' ? s.invFreqLocal : s.invFreq,
    nHeads,
    nKv,
    headDim,
    rotaryDim: c.rotaryDim ?? headDim,
    mscale: ropeAttentionFactor(c),
    style: c.ropeStyle,
    label: { role: 'rope', layer: l },
    // The rotated keys and the values go straight into the cache (no kv_write dispatch).
    kv: { v: s.v, slotMapping: step.slotMapping, kCache: kv.k, vCache: kv.v },
  });
}

/** Each query head over its kv head's keys: a sliding window or full causal, scaled, soft-capped (Gemma 2). */
function createAttention(b: BlockBuilder, s: AttentionScratch, l: number): Promise<AttentionOp> {
  const { config: c, step, limits } = b;
  const kv = b.caches.paged(l);
  return createAttentionOp(b.ctx, {
    q: s.qn ?? s.q,
    kCache: kv.k,
    vCache: kv.v,
    out: s.att,
    positions: step.positions,
    tokenSeq: step.tokenSeq,
    blockTable: step.blockTable,
    lastToken: step.lastToken,
    counts: step.counts,
    nHeads: c.numHeads,
    nKv: c.numKvHeads,
    headDim: c.headDim,
    pageSize: limits.pageSize,
    maxTokens: limits.maxTokens,
    maxSeqs: limits.maxSeqs,
    maxPagesPerSeq: limits.maxPagesPerSeq,
    window: layerWindow(c, l),
    scale: attentionScale(c),
    softcap: c.attnLogitSoftcap,
    label: { role: 'attention', layer: l },
  });
}
