/**
 * Granite 4.0-H's Mamba-2 block of one layer: the Mamba-2 paragraph of `ReferenceModel.forward`
 * (src/reference/forward.ts, `mamba2`; src/model/mamba2.ts), in place of attention.
 *   xb        = rmsnorm(x)                     (input_layernorm; folded into the matvec steps' in_proj)
 *   z, xBC, dt = W_in · xb                     (in_proj's rows, each stored in its region of one buffer)
 *   xBC       = silu(causal_conv(xBC) + bias)  (causal_conv_silu: the slot's window, then S, in its state)
 *   y         = (S·C + D·x) ⊙ silu(z)          (mamba2_scan: per head over the slot's S)
 *               rows of MAMBA2_CHUNK.from tokens or more: the SSD chunked form instead (mamba2_chunk,
 *               then mamba2_chunk_state: ⌈T/Q⌉ state updates for T tokens; ../../kernels/mamba2-chunked.ts)
 *   y         = rmsnorm per group(y)·w         (rms_norm, a weight row per group)
 *   x        += W_out · y                      (or into xb2, then Granite's residual scale)
 * The state lives in the layer's slot-state buffer (../layer-cache.ts): per slot the conv's last
 * kernel − 1 inputs, then each head's headDim × stateSize matrix, zeroed when a sequence takes the
 * slot. Its linears never take the integer dot-product path (issue #29). LoRA adapts in_proj and
 * out_proj (mb_in, mb_out).
 */
import { STORAGE, createBuffer } from '../../gpu/buffers';
import { createCausalConvSiluOp } from '../../kernels/delta-net';
import { createMamba2ScanOp } from '../../kernels/mamba2';
import { createMamba2ChunkOp, MAMBA2_CHUNK } from '../../kernels/mamba2-chunked';
import type { OpLabel } from '../../kernels/op';
import { mamba2ConvDim } from '../../model/config';
import { destroyAll, type Block, type BlockBuilder } from './block';

/** in_proj's LoRA hook points, one per region of its output (z, xBC, dt). */
const IN_PARTS = ['mb_in', 'mb_xbc', 'mb_dt'] as const;

/** The Mamba-2 buffers, made once and shared by its layers (layers run one after another). */
interface Mamba2Scratch {
  proj: GPUBuffer; // in_proj's output: z [maxTokens, inner] at 0, xBC [maxTokens, convDim] at xBytes, dt [maxTokens, heads] at dtBytes
  xBytes: number;
  dtBytes: number;
  conv: GPUBuffer; // [maxTokens, convDim] after the conv and SiLU
  y: GPUBuffer; // [maxTokens, inner] the gated scan output
  yn: GPUBuffer; // [maxTokens, inner] after the grouped norm: out_proj's input
  chunk: GPUBuffer; // f32 [maxTokens, inner]: the chunked form's intra-chunk output
}

export async function createMamba2Block(b: BlockBuilder, l: number): Promise<Block> {
  const { state, step } = b;
  const m = b.config.mamba2!;
  const T = b.limits.maxTokens;
  const H = m.numHeads;
  const inner = H * m.headDim;
  const convDim = mamba2ConvDim(m);
  const s = b.once('mamba2', (): Mamba2Scratch => {
    const [zBytes, xRegion] = [b.region(T * inner), b.region(T * convDim)];
    return {
      proj: b.buffers.make((zBytes + xRegion + b.region(T * H)) / b.act, 'mb proj'),
      xBytes: zBytes,
      dtBytes: zBytes + xRegion,
      conv: b.buffers.make(T * convDim, 'mb conv'),
      y: b.buffers.make(T * inner, 'mb y'),
      yn: b.buffers.make(T * inner, 'mb yn'),
      chunk: b.buffers.make(T * inner, 'mb chunk', 'f32'),
    };
  });
  const w = b.weights.layers[l]!;
  const at = (role: string): OpLabel => ({ role, layer: l });
  const act = b.act;

  // The conv's taps then its bias (causal_conv_silu's `bias`), and dt_bias, the decay tensor and D
  // (mamba2_scan's `vecs`): f32 buffers copied once.
  const device = b.ctx.device;
  const convW = b.buffers.own(createBuffer(device, convDim * (m.convKernel + 1) * 4, STORAGE, `blk.${l} mb conv`));
  const vecs = b.buffers.own(createBuffer(device, 3 * H * 4, STORAGE, `blk.${l} mb vecs`));
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(w.mbConv!, 0, convW, 0, convDim * m.convKernel * 4);
  enc.copyBufferToBuffer(w.mbConvBias!, 0, convW, convDim * m.convKernel * 4, convDim * 4);
  enc.copyBufferToBuffer(w.mbDtBias!, 0, vecs, 0, H * 4);
  enc.copyBufferToBuffer(w.mbDecay!, 0, vecs, H * 4, H * 4);
  enc.copyBufferToBuffer(w.mbD!, 0, vecs, 2 * H * 4, H * 4);
  device.queue.submit([enc.finish()]);

  const input = w.attnNorm ? state.xb : state.x;
  const norm = w.attnNorm && (await b.norm({ label: at('attn_norm'), x: state.x, weight: w.attnNorm, y: state.xb }));
  // in_proj: z, xBC and dt rows, each into its region of proj ([maxTokens][rows] each)
  const segments = [
    { rows: inner, offset: 0 },
    { rows: convDim, offset: s.xBytes / act },
    { rows: H, offset: s.dtBytes / act },
  ];
  const inProj = await b.linear({ label: at('mb_in'), weight: w.mbIn!, x: input, y: s.proj, foldNorm: w.attnNorm, integerDot: false, segments });
  const sOff = (m.convKernel - 1) * convDim;
  const slotFloats = sOff + inner * m.stateSize;
  const rows = { lastToken: step.lastToken, rowSlot: step.rowSlot, counts: step.counts };
  const slots = { state: b.caches.state(l), stateStride: slotFloats };
  const conv = await createCausalConvSiluOp(b.ctx, { ...rows, ...slots, x: { buffer: s.proj, offset: s.xBytes }, weight: convW, bias: true, ckpt: b.caches.checkpointRow, y: s.conv, n: convDim, taps: m.convKernel, label: at('causal_conv_silu') });
  const scanArgs = { ...rows, ...slots, ckpt: b.caches.checkpointRow, m, conv: s.conv, zdt: s.proj, dtOffset: s.dtBytes / act, vecs, stateOffset: sOff, y: s.y, label: at('mamba2_scan') };
  const scan = await createMamba2ScanOp(b.ctx, { ...scanArgs, chunkFrom: MAMBA2_CHUNK.from });
  const chunked = await createMamba2ChunkOp(b.ctx, { ...scanArgs, scratch: s.chunk, chunk: MAMBA2_CHUNK });
  const groupNorm = await b.norm({ label: at('mb_norm'), x: s.y, weight: w.mbNorm!, y: s.yn, n: inner / m.numGroups, rowsPerToken: m.numGroups, weightPerRow: true });
  const out = b.branchOut(w.postAttnNorm);
  // z's, xBC's and dt's regions of proj, as LoRA's updates see them
  const region = (offset: number, elements: number): GPUBufferBinding => ({ buffer: s.proj, offset, size: elements * act });
  const outProj = await b.linear({ label: at('mb_out'), weight: w.mbOut!, x: s.yn, y: out.y, addInto: out.addInto, integerDot: false });
  const end = await b.branchEnd(l, 'attn', w.postAttnNorm);

  return {
    // in_proj's adapter in its three regions (LoraPool: mb_xbc and mb_dt read B's rows after z's).
    lora: {
      mb_in: b.loraIo({ rows: inner, cols: w.mbIn!.cols }, input, region(0, T * inner)),
      mb_xbc: b.loraIo({ rows: convDim, cols: w.mbIn!.cols }, input, region(s.xBytes, T * convDim)),
      mb_dt: b.loraIo({ rows: H, cols: w.mbIn!.cols }, input, region(s.dtBytes, T * H)),
      mb_out: b.loraIo(w.mbOut!, s.yn, out.y),
    },
    encode(pass, plan) {
      const { tokens, lora } = plan;
      if (!plan.foldNorms) norm?.encode(pass, tokens);
      inProj.encode(pass, tokens);
      for (const t of IN_PARTS) lora?.after(pass, tokens, l, t);
      conv.encode(pass, plan.seqs);
      scan.encode(pass, plan.seqs);
      // Only a prefill step can hold a row of MAMBA2_CHUNK.from tokens.
      if (plan.mode === 'prefill' && tokens >= MAMBA2_CHUNK.from) chunked.encode(pass, tokens, plan.seqs);
      groupNorm.encode(pass, tokens);
      outProj.encode(pass, tokens);
      lora?.after(pass, tokens, l, 'mb_out');
      end?.encode(pass, tokens);
    },
    destroy: () => destroyAll([norm, inProj, conv, scan, chunked, groupNorm, outProj, end]),
  };
}
