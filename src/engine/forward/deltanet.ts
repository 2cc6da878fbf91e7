/**
 * Qwen3.5's gated DeltaNet block of one layer: the DeltaNet paragraph of `ReferenceModel.forward`
 * (src/reference/forward.ts, `deltaNet`; src/model/delta-net.ts), in place of attention.
 *   xb        = rmsnorm(x)                     (input_layernorm; folded into the matvec steps' projections)
 *   mixed     = W_qkv · xb                     ([T, 2·nk·dk + nv·dv]: q, k, v)
 *   z, b, a   = W_z · xb, W_b · xb, W_a · xb   (regions of one buffer)
 *   conv      = silu(causal_conv(mixed))       (causal_conv_silu: the slot's window, then S, in its state)
 *   y         = delta_rule(conv, z, b, a)      (per value head over the slot's S; gated RMSNorm)
 *               rows of DELTA_CHUNK.from tokens or more: the chunked form instead (delta_chunk, then
 *               delta_chunk_state: ⌈T/C⌉ state updates for T tokens; ../../kernels/delta-net-chunked.ts)
 *   x        += W_out · y
 * The state lives in the layer's slot-state buffer (../layer-cache.ts): per slot the conv's last
 * kernel − 1 inputs, then each value head's dk × dv matrix, zeroed when a sequence takes the slot;
 * a checkpoint row per verify row after the slots (speculative decoding's rollback).
 * Its linears never take the integer dot-product path (issue #29). LoRA adapts its five
 * projections (dn_qkv, dn_z, dn_b, dn_a, dn_out), each update onto its projection's output.
 */
import { STORAGE, createBuffer } from '../../gpu/buffers';
import { createCausalConvSiluOp, createDeltaRuleOp } from '../../kernels/delta-net';
import { createDeltaChunkOp, DELTA_CHUNK, deltaChunkScratch } from '../../kernels/delta-net-chunked';
import type { OpLabel } from '../../kernels/op';
import { deltaNetConvDim } from '../../model/config';
import { destroyAll, type Block, type BlockBuilder } from './block';

/** The projections in the order they run (their LoRA matrices). */
const PROJECTIONS = ['dn_qkv', 'dn_z', 'dn_b', 'dn_a'] as const;

/** The DeltaNet's buffers, made once and shared by its layers (layers run one after another). */
interface DeltaNetScratch {
  mixed: GPUBuffer; // [maxTokens, convDim] the qkv projection
  conv: GPUBuffer; // [maxTokens, convDim] after the conv and SiLU
  zba: GPUBuffer; // z [maxTokens, nv·dv], then b and a [maxTokens, nv], each region where a binding may start
  zBytes: number;
  bBytes: number;
  y: GPUBuffer; // [maxTokens, nv·dv] the gated norm's output
  chunk: GPUBuffer; // f32 the chunked form's W, U, P, F (deltaChunkScratch)
}

export async function createDeltaNetBlock(b: BlockBuilder, l: number): Promise<Block> {
  const { config: c, state, step } = b;
  const d = c.deltaNet!;
  const T = b.limits.maxTokens;
  const C = deltaNetConvDim(d);
  const vDim = d.numVHeads * d.headVDim;
  const s = b.once('deltanet', (): DeltaNetScratch => {
    const [zBytes, bBytes] = [b.region(T * vDim), b.region(T * d.numVHeads)];
    return { mixed: b.buffers.make(T * C, 'dn mixed'), conv: b.buffers.make(T * C, 'dn conv'), zba: b.buffers.make((zBytes + 2 * bBytes) / b.act, 'dn zba'), zBytes, bBytes, y: b.buffers.make(T * vDim, 'dn y'), chunk: b.buffers.make(deltaChunkScratch(d, T, DELTA_CHUNK.size).floats, 'dn chunk', 'f32') };
  });
  const w = b.weights.layers[l]!;
  const at = (role: string): OpLabel => ({ role, layer: l });
  const act = b.act;

  // dt_bias, the decay tensor and the output norm as one f32 buffer (delta_rule's `vecs`), copied once
  const vecs = b.buffers.own(createBuffer(b.ctx.device, (2 * d.numVHeads + d.headVDim) * 4, STORAGE, `blk.${l} dn vecs`));
  const enc = b.ctx.device.createCommandEncoder();
  enc.copyBufferToBuffer(w.dnDtBias!, 0, vecs, 0, d.numVHeads * 4);
  enc.copyBufferToBuffer(w.dnDecay!, 0, vecs, d.numVHeads * 4, d.numVHeads * 4);
  enc.copyBufferToBuffer(w.dnNorm!, 0, vecs, 2 * d.numVHeads * 4, d.headVDim * 4);
  b.ctx.device.queue.submit([enc.finish()]);

  const input = w.attnNorm ? state.xb : state.x;
  const norm = w.attnNorm && (await b.norm({ label: at('attn_norm'), x: state.x, weight: w.attnNorm, y: state.xb }));
  // z, b and a land in their regions of zba ([maxTokens][rows] each)
  const proj = (role: string, weight: NonNullable<typeof w.dnQkv>, y: GPUBuffer, offset?: number) =>
    b.linear({ label: at(role), weight, x: input, y, foldNorm: w.attnNorm, integerDot: false, ...(offset === undefined ? {} : { segments: [{ rows: weight.rows, offset: offset / act }] }) });
  // z's, b's and a's regions of zba, as LoRA's updates see them
  const region = (offset: number, elements: number): GPUBufferBinding => ({ buffer: s.zba, offset, size: elements * act });
  const projections = [
    await proj('dn_qkv', w.dnQkv!, s.mixed),
    await proj('dn_z', w.dnZ!, s.zba, 0),
    await proj('dn_b', w.dnBeta!, s.zba, s.zBytes),
    await proj('dn_a', w.dnAlpha!, s.zba, s.zBytes + s.bBytes),
  ];
  const slotFloats = (d.convKernel - 1) * C + d.numVHeads * d.headKDim * d.headVDim;
  const rows = { lastToken: step.lastToken, rowSlot: step.rowSlot, counts: step.counts };
  const conv = await createCausalConvSiluOp(b.ctx, { ...rows, x: s.mixed, weight: w.dnConv!, state: b.caches.state(l), ckpt: b.caches.checkpointRow, stateStride: slotFloats, y: s.conv, n: C, taps: d.convKernel, label: at('causal_conv_silu') });
  const ruleArgs = {
    ...rows,
    d,
    eps: c.rmsNormEps,
    conv: s.conv,
    zba: s.zba,
    bOffset: s.zBytes / act,
    aOffset: (s.zBytes + s.bBytes) / act,
    vecs,
    state: b.caches.state(l),
    ckpt: b.caches.checkpointRow,
    stateStride: slotFloats,
    stateOffset: (d.convKernel - 1) * C,
    y: s.y,
    label: at('delta_rule'),
  };
  const rule = await createDeltaRuleOp(b.ctx, { ...ruleArgs, chunkFrom: DELTA_CHUNK.from });
  const chunked = await createDeltaChunkOp(b.ctx, { ...ruleArgs, scratch: s.chunk, maxTokens: T, chunk: DELTA_CHUNK });
  const out = b.branchOut(w.postAttnNorm);
  const outProj = await b.linear({ label: at('dn_out'), weight: w.dnOut!, x: s.y, y: out.y, addInto: out.addInto, integerDot: false });
  const end = await b.branchEnd(l, 'attn', w.postAttnNorm);

  return {
    lora: {
      dn_qkv: b.loraIo(w.dnQkv!, input, s.mixed),
      dn_z: b.loraIo(w.dnZ!, input, region(0, T * vDim)),
      dn_b: b.loraIo(w.dnBeta!, input, region(s.zBytes, T * d.numVHeads)),
      dn_a: b.loraIo(w.dnAlpha!, input, region(s.zBytes + s.bBytes, T * d.numVHeads)),
      dn_out: b.loraIo(w.dnOut!, s.y, out.y),
    },
    encode(pass, plan) {
      const { tokens, lora } = plan;
      if (!plan.foldNorms) norm?.encode(pass, tokens);
      projections.forEach((p, i) => {
        p.encode(pass, tokens);
        lora?.after(pass, tokens, l, PROJECTIONS[i]!);
      });
      conv.encode(pass, plan.seqs);
      rule.encode(pass, plan.seqs);
      // Only a prefill step can hold a row of DELTA_CHUNK.from tokens.
      if (plan.mode === 'prefill' && plan.tokens >= DELTA_CHUNK.from) chunked.encode(pass, plan.tokens, plan.seqs);
      outProj.encode(pass, tokens);
      lora?.after(pass, tokens, l, 'dn_out');
      end?.encode(pass, tokens);
    },
    destroy: () => destroyAll([norm, ...projections, conv, rule, chunked, outProj, end]),
  };
}
