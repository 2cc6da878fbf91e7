/**
 * The mixture-of-experts FFN block of one layer (config.moe; the dense MLP is ./mlp.ts): it
 * follows `ReferenceModel.experts` (src/reference/forward.ts). Per step, for the T tokens of the batch:
 *   xb            = rmsnorm(x)                          (every step: the routed gathers read the normed copy)
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
 *   x            += out                                 (or out is xb2, then its post-norm or Granite's scale)
 * The scratch buffers are shared by every layer (layers run one after another); each layer keeps
 * its own ids buffer, the experts it routed each token of the step to.
 */
import { MATVEC_MAX_TOKENS } from '../../kernels/matmul';
import { createMoeGroupedOp, createMoeMatvecOp, createMoeRouteOp, createMoeSortOp, EMULATED_MOE_SPEC, MOE_SPEC, type MoeMatvecArgs } from '../../kernels/moe';
import type { Op, OpLabel } from '../../kernels/op';
import { createSwigluOp } from '../../kernels/swiglu';
import type { MoeConfig } from '../../model/config';
import type { GpuLayerWeights, GpuMatrix } from '../gpu-weights';
import { destroyAll, type Block, type BlockBuilder, type RunBuffers } from './block';

/**
 * Activations of the MoE block, allocated once for `maxTokens` and shared by the layers. The GLU
 * products and the shared expert's output are f32 at every precision, as the dense MLP's hb and
 * branch output: real models' MLPs have outliers past f16's 65504.
 */
interface MoeScratch {
  logits: GPUBuffer; // act [maxTokens, experts]
  weights: GPUBuffer; // f32 [maxTokens, k]
  gate: GPUBuffer; // act [maxTokens·k, expertSize]
  up: GPUBuffer; // act [maxTokens·k, expertSize]
  h: GPUBuffer; // f32 [maxTokens·k, expertSize]
  order: GPUBuffer; // u32 [maxTokens·k]: a prefill step's slots sorted by expert (moe_sort)
  offsets: GPUBuffer; // u32 [experts + 1]: each expert's first index in `order`
  /** Qwen2-MoE's shared expert: its MLP's gate, up (act) and act(gate)·up (f32) [maxTokens, sharedSize], output (f32) [maxTokens, hidden], gate logit (act) [maxTokens]. */
  shared?: { gate: GPUBuffer; up: GPUBuffer; h: GPUBuffer; out: GPUBuffer; logit: GPUBuffer };
}

function moeScratch(buffers: RunBuffers, config: BlockBuilder['config'], maxTokens: number): MoeScratch {
  const moe = config.moe!;
  const buf = buffers.make.bind(buffers);
  const slots = maxTokens * moe.numExpertsUsed;
  const I = moe.expertIntermediateSize;
  const S = moe.sharedExpertIntermediateSize;
  const h = buf(slots * I, 'moe h', 'f32');
  const shared =
    S === null
      ? undefined
      : {
          gate: buf(maxTokens * S, 'shared expert gate'),
          up: buf(maxTokens * S, 'shared expert up'),
          h: buf(maxTokens * S, 'shared expert h', 'f32'),
          out: buf(maxTokens * config.hiddenSize, 'shared expert out', 'f32'),
          logit: buf(maxTokens, 'shared expert gate logit'),
        };
  return {
    logits: buf(maxTokens * moe.numExperts, 'moe router logits'),
    weights: buf(slots, 'moe weights', 'f32'),
    gate: buf(slots * I, 'moe gate'),
    up: buf(slots * I, 'moe up'),
    h,
    order: buf(slots, 'moe slots by expert', 'u32'),
    offsets: buf(moe.numExperts + 1, 'moe expert offsets', 'u32'),
    shared,
  };
}

export async function createMoeBlock(b: BlockBuilder, l: number): Promise<Block> {
  const T = b.limits.maxTokens;
  const s = b.once('moe', () => moeScratch(b.buffers, b.config, T));
  const { state } = b;
  const w = b.weights.layers[l]!;
  // ffn input: the rmsnormed stream, written every step (never folded: the routed gathers read x
  // as act, so they need the normed copy, never the f32 stream; every MoE family pre-norms, and an
  // f32 x would be a gather variant no model runs)
  const input = w.ffnNorm ? state.xb : state.x;
  if (b.buffers.isF32(input) && b.ctx.precision === 'f16') throw new RangeError(`the GPU forward pass cannot run layer ${l}: a mixture-of-experts FFN without a norm before it in the f16 path`);
  const ffnNorm = w.ffnNorm && (await b.norm({ label: { role: 'ffn_norm', layer: l }, x: state.x, weight: w.ffnNorm, y: state.xb }));
  // u32 [maxTokens, k]: the experts each token of the step was routed to (read back for return_routed_experts).
  const ids = b.buffers.make(T * b.config.moe!.numExpertsUsed, `routed experts ${l}`, 'u32');
  // The weighted sum into the stream, or into xb2 for its post-norm (OLMo 2, Gemma) or Granite's scale.
  const experts = await createExperts(b, l, w, s, ids, input, b.branchOut(w.postFfnNorm));
  const end = await b.branchEnd(l, 'ffn', w.postFfnNorm);
  return {
    lora: {}, // LoRA of the experts is not run (a MoE layer has no dense gate/up/down to adapt)
    routedIds: ids,
    encode(pass, plan) {
      ffnNorm?.encode(pass, plan.tokens);
      experts.encode(pass, plan.tokens);
      end?.encode(pass, plan.tokens);
    },
    destroy: () => destroyAll([ffnNorm, experts, end]),
  };
}

/** The experts' dispatches, in order, as one op. */
async function createExperts(b: BlockBuilder, l: number, w: GpuLayerWeights, s: MoeScratch, ids: GPUBuffer, x: GPUBuffer, out: { y: GPUBuffer; addInto: boolean }): Promise<Op> {
  const { ctx, config } = b;
  const moe: MoeConfig = config.moe!;
  const maxTokens = b.limits.maxTokens;
  const counts = b.step.counts;
  const k = moe.numExpertsUsed;
  const spec = ctx.emulated ? EMULATED_MOE_SPEC : MOE_SPEC;
  const at = (role: string): OpLabel => ({ role, layer: l });
  const linear = (role: string, weight: GpuMatrix, x: GPUBuffer, y: GPUBuffer) => b.linear({ label: at(role), weight, x, y });
  const routed = (role: string, m: GpuMatrix | undefined, mode: 'gather' | 'combine', x: GPUBuffer, y: GPUBuffer, epi: Pick<MoeMatvecArgs, 'shared' | 'xF32' | 'yF32' | 'residual'> = {}) =>
    createMoeMatvecOp(
      ctx,
      // A stack larger than one binding is in parts of whole experts (gpu-weights.ts): one dispatch each.
      { weight: m!.parts, dtype: m!.dtype, experts: m!.experts ?? 1, n: m!.rows, k: m!.cols, used: k, mode, x, y, ids, weights: s.weights, counts, maxTokens, label: at(role), ...epi },
      spec,
    );

  const ops: Op[] = [];
  ops.push(await linear('router', w.wRouter!, x, s.logits));
  ops.push(await createMoeRouteOp(ctx, { logits: s.logits, ids, weights: s.weights, counts, experts: moe.numExperts, used: k, norm: moe.normTopkProb, label: at('route') }));
  let shared: { y: GPUBuffer; gate: GPUBuffer; yF32: boolean } | undefined;
  if (s.shared && w.wSharedGateInp) {
    ops.push(await linear('gate_shexp', w.wGateShexp!, x, s.shared.gate));
    ops.push(await linear('up_shexp', w.wUpShexp!, x, s.shared.up));
    ops.push(await createSwigluOp(ctx, { gate: s.shared.gate, up: s.shared.up, out: s.shared.h, outF32: true, n: moe.sharedExpertIntermediateSize!, activation: config.ffnActivation, label: at('swiglu_shexp') }));
    ops.push(await linear('down_shexp', w.wDownShexp!, s.shared.h, s.shared.out));
    ops.push(await linear('gate_inp_shexp', w.wSharedGateInp, x, s.shared.logit));
    shared = { y: s.shared.out, gate: s.shared.logit, yF32: true };
  }
  // Decode-sized steps gather each slot's rows; a prefill groups its slots by expert first.
  const gathers = [await routed('gate_exps', w.wGateExps, 'gather', x, s.gate), await routed('up_exps', w.wUpExps, 'gather', x, s.up)];
  const grouped = (role: string, m: GpuMatrix | undefined, y: GPUBuffer) =>
    createMoeGroupedOp(ctx, { weight: m!.parts, dtype: m!.dtype, experts: m!.experts ?? 1, n: m!.rows, k: m!.cols, used: k, x, y, order: s.order, offsets: s.offsets, maxTokens, label: at(role) }, spec);
  const groupedOps = [
    await createMoeSortOp(ctx, { ids, order: s.order, offsets: s.offsets, counts, experts: moe.numExperts, used: k, maxTokens, label: at('sort') }),
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
  ops.push(await createSwigluOp(ctx, { gate: s.gate, up: s.up, out: s.h, outF32: true, n: moe.expertIntermediateSize * k, activation: config.ffnActivation, label: at('swiglu_exps') }));
  // The weighted sum (and the shared expert) in f32 from the f32 products, into the f32 stream or branch.
  ops.push(await routed('down_exps', w.wDownExps, 'combine', s.h, out.y, { shared, xF32: true, yF32: true, residual: out.addInto }));
  return {
    encode(pass, tokens) {
      for (const op of ops) op.encode(pass, tokens);
    },
    destroy() {
      for (const op of ops) op.destroy();
    },
  };
}
