/**
 * The mixture-of-experts FFN block of the GPU forward pass (config.moe), kept apart from the dense
 * MLP so each reads plainly: it follows `ReferenceModel.experts` (src/reference/forward.ts).
 * Per step, for the T tokens of the batch:
 *   router logits = x · W_routerᵀ                       (a linear layer, [T, E])
 *   ids, weights  = softmax → top-k (→ renormalise)      (moe_route, [T, k])
 *   gate, up      = W_gate[e] · x, W_up[e] · x           (moe_matvec gather: only the k chosen experts' rows;
 *                                                         a prefill step sorts its slots by expert, moe_sort,
 *                                                         and reads each expert's rows once per 4 of its
 *                                                         slots, moe_grouped)
 *   h             = act(gate) · up                       (swiglu over the T·k expert rows)
 *   out           = Σ_j weight_j · W_down[e_j] · h_j       (moe_matvec combine: the weights in its epilogue)
 *                   + sigmoid(x · w_shexp_gate) · shared MLP(x)   (Qwen2-MoE, in the same epilogue; added
 *                                                         into the residual stream where no post-norm or
 *                                                         scale comes between)
 * The scratch buffers are shared by every layer (layers run one after another); each layer keeps
 * its own ids buffer, the experts it routed each token of the step to.
 */
import { createBuffer, STORAGE } from '../gpu/buffers';
import type { BufferRef } from '../gpu/buffers';
import { MATVEC_MAX_TOKENS } from '../kernels/matmul';
import { createMoeGroupedOp, createMoeMatvecOp, createMoeRouteOp, createMoeSortOp, EMULATED_MOE_SPEC, MOE_SPEC, type MoeMatvecArgs } from '../kernels/moe';
import type { Op, OpContext, OpLabel } from '../kernels/op';
import { createSwigluOp } from '../kernels/swiglu';
import type { MoeConfig, ModelConfig } from '../model/config';
import type { GpuLayerWeights, GpuMatrix } from './gpu-weights';

/**
 * Activations of the MoE block, allocated once for `maxTokens` and shared by the layers. The GLU
 * products and the shared expert's output are f32 at every precision, as the dense MLP's hb and
 * branch output: real models' MLPs have outliers past f16's 65504.
 */
export interface MoeScratch {
  logits: GPUBuffer; // act [maxTokens, experts]
  weights: GPUBuffer; // f32 [maxTokens, k]
  gate: GPUBuffer; // act [maxTokens·k, expertSize]
  up: GPUBuffer; // act [maxTokens·k, expertSize]
  h: GPUBuffer; // f32 [maxTokens·k, expertSize]
  order: GPUBuffer; // u32 [maxTokens·k]: a prefill step's slots sorted by expert (moe_sort)
  offsets: GPUBuffer; // u32 [experts + 1]: each expert's first index in `order`
  /** Qwen2-MoE's shared expert: its MLP's gate, up (act) and act(gate)·up (f32) [maxTokens, sharedSize], output (f32) [maxTokens, hidden], gate logit (act) [maxTokens]. */
  shared?: { gate: GPUBuffer; up: GPUBuffer; h: GPUBuffer; out: GPUBuffer; logit: GPUBuffer };
  buffers: GPUBuffer[];
  /** The buffers above held at f32 in the f16 path (the ops that read or write them say so). */
  f32: GPUBuffer[];
}

export function createMoeScratch(device: GPUDevice, config: ModelConfig, maxTokens: number, act: number): MoeScratch {
  const moe = config.moe!;
  const buffers: GPUBuffer[] = [];
  const buf = (elements: number, label: string, bytesPer = act) => {
    const b = createBuffer(device, elements * bytesPer, STORAGE, label);
    buffers.push(b);
    return b;
  };
  const slots = maxTokens * moe.numExpertsUsed;
  const I = moe.expertIntermediateSize;
  const S = moe.sharedExpertIntermediateSize;
  const h = buf(slots * I, 'moe h', 4);
  const shared =
    S === null
      ? undefined
      : {
          gate: buf(maxTokens * S, 'shared expert gate'),
          up: buf(maxTokens * S, 'shared expert up'),
          h: buf(maxTokens * S, 'shared expert h', 4),
          out: buf(maxTokens * config.hiddenSize, 'shared expert out', 4),
          logit: buf(maxTokens, 'shared expert gate logit'),
        };
  return {
    logits: buf(maxTokens * moe.numExperts, 'moe router logits'),
    weights: buf(slots, 'moe weights', 4),
    gate: buf(slots * I, 'moe gate'),
    up: buf(slots * I, 'moe up'),
    h,
    order: buf(slots, 'moe slots by expert', 4),
    offsets: buf(moe.numExperts + 1, 'moe expert offsets', 4),
    shared,
    buffers,
    f32: shared ? [h, shared.h, shared.out] : [h],
  };
}

export interface MoeFfnArgs {
  config: ModelConfig;
  weights: GpuLayerWeights;
  scratch: MoeScratch;
  /** u32 [maxTokens, k]: this layer's routed experts, written every step. */
  ids: GPUBuffer;
  x: GPUBuffer; // act [maxTokens, hidden]: the FFN's input
  /** f32 [maxTokens, hidden]: the branch output (a post-norm or Granite's scale follows), or with `residual` the stream itself. */
  out: GPUBuffer;
  /** The weighted sum is added into `out`, the residual stream, as it is stored. */
  residual: boolean;
  counts: BufferRef;
  maxTokens: number;
  /** The layer, for the ops' labels (OpLabel). */
  layer: number;
  /** The dense linear layer builder of the forward pass (router and shared expert; it knows the scratch's f32 buffers). */
  linear: (label: OpLabel, m: GpuMatrix, x: GPUBuffer, y: GPUBuffer) => Promise<Op>;
}

/** The block's dispatches, in order, as one op. */
export async function createMoeFfnOp(ctx: OpContext, a: MoeFfnArgs): Promise<Op> {
  const moe: MoeConfig = a.config.moe!;
  const { weights: w, scratch: s, maxTokens } = a;
  const k = moe.numExpertsUsed;
  const spec = ctx.emulated ? EMULATED_MOE_SPEC : MOE_SPEC;
  const at = (role: string): OpLabel => ({ role, layer: a.layer });
  const routed = (role: string, m: GpuMatrix | undefined, mode: 'gather' | 'combine', x: GPUBuffer, y: GPUBuffer, epi: Pick<MoeMatvecArgs, 'shared' | 'xF32' | 'yF32' | 'residual'> = {}) =>
    createMoeMatvecOp(
      ctx,
      // A stack larger than one binding is in parts of whole experts (gpu-weights.ts): one dispatch each.
      { weight: m!.parts, dtype: m!.dtype, experts: m!.experts ?? 1, n: m!.rows, k: m!.cols, used: k, mode, x, y, ids: a.ids, weights: s.weights, counts: a.counts, maxTokens, label: at(role), ...epi },
      spec,
    );

  const ops: Op[] = [];
  ops.push(await a.linear(at('router'), w.wRouter!, a.x, s.logits));
  ops.push(await createMoeRouteOp(ctx, { logits: s.logits, ids: a.ids, weights: s.weights, counts: a.counts, experts: moe.numExperts, used: k, norm: moe.normTopkProb, label: at('route') }));
  let shared: { y: GPUBuffer; gate: GPUBuffer; yF32: boolean } | undefined;
  if (s.shared && w.wSharedGateInp) {
    ops.push(await a.linear(at('gate_shexp'), w.wGateShexp!, a.x, s.shared.gate));
    ops.push(await a.linear(at('up_shexp'), w.wUpShexp!, a.x, s.shared.up));
    ops.push(await createSwigluOp(ctx, { gate: s.shared.gate, up: s.shared.up, out: s.shared.h, outF32: true, n: moe.sharedExpertIntermediateSize!, activation: a.config.ffnActivation, label: at('swiglu_shexp') }));
    ops.push(await a.linear(at('down_shexp'), w.wDownShexp!, s.shared.h, s.shared.out));
    ops.push(await a.linear(at('gate_inp_shexp'), w.wSharedGateInp, a.x, s.shared.logit));
    shared = { y: s.shared.out, gate: s.shared.logit, yF32: true };
  }
  // Decode-sized steps gather each slot's rows; a prefill groups its slots by expert first.
  const gathers = [await routed('gate_exps', w.wGateExps, 'gather', a.x, s.gate), await routed('up_exps', w.wUpExps, 'gather', a.x, s.up)];
  const grouped = (role: string, m: GpuMatrix | undefined, y: GPUBuffer) =>
    createMoeGroupedOp(ctx, { weight: m!.parts, dtype: m!.dtype, experts: m!.experts ?? 1, n: m!.rows, k: m!.cols, used: k, x: a.x, y, order: s.order, offsets: s.offsets, maxTokens, label: at(role) }, spec);
  const groupedOps = [
    await createMoeSortOp(ctx, { ids: a.ids, order: s.order, offsets: s.offsets, counts: a.counts, experts: moe.numExperts, used: k, maxTokens, label: at('sort') }),
    await grouped('gate_exps', w.wGateExps, s.gate),
    await grouped('up_exps', w.wUpExps, s.up),
  ];
  ops.push({
    encode(pass, tokens) {
      for (const op of tokens > MATVEC_MAX_TOKENS ? groupedOps : gathers) op.encode(pass, tokens);
    },
    destroy() {
      for (const op of [...gathers, ...groupedOps]) op.destroy();
    },
  });
  // [T·k, expertSize] is [T, k·expertSize]: one swiglu row per token covers its k experts.
  ops.push(await createSwigluOp(ctx, { gate: s.gate, up: s.up, out: s.h, outF32: true, n: moe.expertIntermediateSize * k, activation: a.config.ffnActivation, label: at('swiglu_exps') }));
  // The weighted sum (and the shared expert) in f32 from the f32 products, into the f32 stream or branch.
  ops.push(await routed('down_exps', w.wDownExps, 'combine', s.h, a.out, { shared, xF32: true, yF32: true, residual: a.residual }));
  return {
    encode(pass, tokens) {
      for (const op of ops) op.encode(pass, tokens);
    },
    destroy() {
      for (const op of ops) op.destroy();
    },
  };
}
