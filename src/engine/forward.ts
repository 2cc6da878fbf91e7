/**
 * The GPU forward pass of the Llama family over a ragged batch; a family's differences are flags
 * of its ModelConfig (norm placement, q/k norm, NoPE layers, sliding windows, embedding, residual
 * and logit scales, GLU activation, attention scale and soft-caps), never its arch name. Norm weights reach the GPU
 * as applied (gpu-weights.ts adds Gemma's 1).
 * Everything is built once at load: run-state buffers, the paged KV cache, pipelines and bind
 * groups. `encode` only records dispatches into the step's single compute pass.
 */
import { createBuffer, STORAGE, UNIFORM, uploadBuffer, type BufferRef } from '../gpu/buffers';
import { createAddOp } from '../kernels/add';
import { createAttentionOp } from '../kernels/attention';
import { createEmbedOp } from '../kernels/embed';
import { createFeedOp } from '../kernels/feed';
import { createKvWriteOp } from '../kernels/kv-write';
import { createLoraOp } from '../kernels/lora';
import { createLinearOp, engineLinearSpecs, MATVEC_MAX_TOKENS, type LinearArgs, type LinearSegment } from '../kernels/matmul';
import { actBytes, type Op, type OpContext, type OpLabel } from '../kernels/op';
import { createRmsNormOp } from '../kernels/rms-norm';
import { createRopeOp, ropeInvFreq } from '../kernels/rope';
import { ropeAttentionFactor } from '../model/rope';
import { createSoftcapOp } from '../kernels/softcap';
import { createSwigluOp } from '../kernels/swiglu';
import { attentionScale, layerIsMoe, layerRope, layerUsesRope, layerWindow, type ModelConfig } from '../model/config';
import { LORA_TARGETS, type LoraTarget } from '../lora/types';
import type { GpuMatrix, GpuWeights, QkvMember } from './gpu-weights';
import { loraMat, type LoraPool } from './lora-pool';
import { LayerCaches, layerCacheKinds } from './layer-cache';
import { createMoeFfnOp, createMoeScratch } from './moe-ffn';
import type { StepBuffers } from './step';

export interface ForwardLimits {
  maxTokens: number; // tokens per step (prefill chunk)
  maxSeqs: number; // sequences per step
  numPages: number; // KV pages in the cache
  pageSize: number; // tokens per page
  maxPagesPerSeq: number;
  /** Tokens per sequence (picks LongRoPE's factor set, model/rope.ts). */
  contextLength: number;
}

/** Activations of one step, allocated once for `maxTokens` (shapes in elements of `act`). */
interface RunState {
  ids: GPUBuffer; // u32 [maxTokens] the step's token ids, resolved by the feed op
  x: GPUBuffer; // f32 [maxTokens, hidden] the residual stream (f32 in the f16 path too: real models' streams exceed 65504)
  xb: GPUBuffer; // [maxTokens, hidden] normed block input
  xb2: GPUBuffer; // f32 [maxTokens, hidden] block output before its post-norm or scaled add (f32 at every precision: Gemma's branches pass 65504)
  qkv: GPUBuffer; // q, k and v below, one buffer: a fused q/k/v projection writes all three
  q: GPUBufferBinding; // [maxTokens, nHeads·headDim] in qkv
  k: GPUBufferBinding; // [maxTokens, nKv·headDim] in qkv
  v: GPUBufferBinding; // [maxTokens, nKv·headDim] in qkv
  qn?: GPUBuffer; // [maxTokens, nHeads·headDim] q after its norm (per head or whole)
  kn?: GPUBuffer; // [maxTokens, nKv·headDim]
  att: GPUBuffer; // [maxTokens, nHeads·headDim] attention output
  gateUp: GPUBuffer; // gate and up below, one buffer: a joined gate/up projection writes both
  gate: GPUBufferBinding; // [maxTokens, intermediate] in gateUp
  up: GPUBufferBinding; // [maxTokens, intermediate] in gateUp
  hb: GPUBuffer; // f32 [maxTokens, intermediate] act(gate)·up (f32 at every precision)
  last: GPUBuffer; // f32 [maxSeqs, hidden] residual rows of each sequence's last token
  lastNormed: GPUBuffer; // f32 [maxSeqs, hidden]
  logits: GPUBuffer; // f32 [maxSeqs, vocab]
  invFreq: GPUBuffer; // f32 [rotaryDim/2]
  invFreqLocal: GPUBuffer; // f32 [rotaryDim/2] of windowed layers with their own base (Gemma 3); else invFreq
}

/** One layer's dispatches in order; norms absent where the config places none (pre- or post-norm). */
interface LayerOps {
  attnNorm?: Op;
  /** One projection writing q, k and v, or one per run of a weight type (engine/gpu-weights.ts). */
  qkv: Op[];
  qNorm?: Op;
  kNorm?: Op;
  /** Absent on NoPE layers. */
  rope?: Op;
  /** NoPE layers only: elsewhere rope writes k and v into the cache. */
  kvWrite?: Op;
  attention: Awaited<ReturnType<typeof createAttentionOp>>;
  o: Op;
  /** Norms the branch xb2 and adds it into the residual stream (one dispatch). */
  postAttnNorm?: Op;
  /** Granite's scaled add of xb2; absent where o or the post-norm adds into the stream itself. */
  attnResidual?: Op;
  ffnNorm?: Op;
  /**
   * The dense MLP (absent on mixture-of-experts layers). Gate and up as one matrix (`gateUp`,
   * storing both) or apart; `glu`, with a joined matrix, forms act(gate)·up in the matvec's
   * epilogue, so the steps it can serve (T ≤ MATVEC_MAX_TOKENS, no LoRA) skip gate/up and swiglu.
   */
  gateUp?: Op;
  gate?: Op;
  up?: Op;
  glu?: Op;
  swiglu?: Op;
  down?: Op;
  /** The mixture-of-experts FFN (config.moe; ./moe-ffn.ts) in place of the dense MLP. */
  moe?: Op;
  postFfnNorm?: Op;
  /** Absent where down, the experts' sum or the post-norm adds into the residual stream itself. */
  ffnResidual?: Op;
}

/** Where an adapted matrix reads its input and writes its output: LoRA's update lands on the same y. */
interface LoraIo {
  x: GPUBuffer;
  y: BufferRef;
  k: number;
  n: number;
  /** x (y) is the residual stream, f32 at every precision. */
  xF32?: boolean;
  yF32?: boolean;
}

/** The LoRA updates of every matrix, made on the first adapter load (./lora-pool.ts). */
interface LoraOps {
  pool: LoraPool;
  /** [layer][target in LORA_TARGETS order]; none for a mixture-of-experts layer's MLP targets. */
  ops: (Op | undefined)[][];
  h: GPUBuffer;
}

export class GpuForward {
  private lora: LoraOps | null = null;

  private constructor(
    readonly config: ModelConfig,
    readonly limits: ForwardLimits,
    readonly state: RunState,
    /** What each layer keeps per sequence between steps (paged K/V today; see ./layer-cache.ts). */
    readonly caches: LayerCaches,
    private readonly feed: Op,
    private readonly embed: Op,
    private readonly layers: LayerOps[],
    private readonly gatherLast: Op,
    private readonly finalNorm: Op,
    private readonly lmHead: Op,
    /** Final logits divided (Granite) and soft-capped (Gemma 2); absent elsewhere. */
    private readonly logitSoftcap: Op | undefined,
    private readonly buffers: GPUBuffer[],
    /** Per layer, each adaptable matrix's input and output (the dense MLP's absent on mixture-of-experts layers). */
    private readonly loraIo: Array<Partial<Record<LoraTarget, LoraIo>>>,
    /**
     * Mixture of experts: u32 [maxTokens, k] per layer, the experts each token of the last step was
     * routed to; null on the model's dense layers (MoeConfig.denseLayers), which route nothing.
     */
    readonly routedIds: readonly (GPUBuffer | null)[] = [],
  ) {}

  /** Bytes of the layers' caches (K and V of every layer). */
  get kvCacheBytes(): number {
    return this.caches.bytes;
  }

  /** Bytes of the run state (activations, logits, RoPE tables). */
  get stateBytes(): number {
    return this.buffers.reduce((n, b) => n + b.size, 0);
  }

  static async create(
    ctx: OpContext,
    config: ModelConfig,
    weights: GpuWeights,
    step: StepBuffers,
    /** u32 [maxSeqs] the sampler's last token of each slot: a step's FEED tokens read it. */
    sampled: GPUBuffer,
    limits: ForwardLimits,
    ropeFreqFactors?: Float32Array,
    /** Called as each part (embedding, every layer, the head) has its pipelines ready. */
    onPart?: () => void,
  ): Promise<GpuForward> {
    const { device, precision } = ctx;
    const { hiddenSize: H, intermediateSize: I, numHeads: nH, numKvHeads: nKv, headDim: D, vocabSize: V } = config;
    const { maxTokens: T, maxSeqs: S } = limits;
    const act = actBytes(precision);
    const owned: GPUBuffer[] = [];
    const buf = (elements: number, label: string, bytesPer = act) => {
      const b = createBuffer(device, elements * bytesPer, STORAGE, label);
      owned.push(b);
      return b;
    };
    const invFreq = uploadBuffer(device, ropeInvFreq({ ...config, freqFactors: ropeFreqFactors, contextLength: limits.contextLength }), STORAGE, 'rope invFreq');
    owned.push(invFreq);
    let invFreqLocal = invFreq;
    if (config.ropeLocalTheta !== null) {
      invFreqLocal = uploadBuffer(device, ropeInvFreq({ ...config, ropeTheta: config.ropeLocalTheta, ropeScaling: null }), STORAGE, 'rope invFreq (local)');
      owned.push(invFreqLocal);
    }
    // q, k and v regions of one buffer, each starting where a binding may.
    const align = device.limits.minStorageBufferOffsetAlignment;
    const region = (elements: number) => Math.ceil((elements * act) / align) * align;
    const [qBytes, kvBytes] = [region(T * nH * D), region(T * nKv * D)];
    const qkv = buf((qBytes + 2 * kvBytes) / act, 'qkv');
    // The dense MLP runs on a dense model's layers and a mixture-of-experts model's dense ones.
    const denseMlp = Array.from({ length: config.numLayers }, (_, l) => !layerIsMoe(config, l)).some(Boolean);
    // The dense MLP's gate and up (mixture-of-experts layers have their own: ./moe-ffn.ts), as
    // two regions of one buffer like q, k and v.
    const gateBytes = denseMlp ? region(T * I) : align;
    const gateUp = buf((2 * gateBytes) / act, 'gate/up');
    const state: RunState = {
      ids: buf(T, 'ids', 4),
      // f32 whatever the precision: the stream of real models exceeds f16's range in a few
      // channels (the ops that read or write it hold their x_t / y_t at f32).
      x: buf(T * H, 'x', 4),
      xb: buf(T * H, 'xb'),
      // f32 too: a branch output before its post-norm (Gemma 2/3, OLMo 2) or Granite's scale
      // is of the stream's size (Gemma's pass f16's range), and is normed or added in f32.
      xb2: buf(T * H, 'xb2', 4),
      qkv,
      q: { buffer: qkv, offset: 0, size: T * nH * D * act },
      k: { buffer: qkv, offset: qBytes, size: T * nKv * D * act },
      v: { buffer: qkv, offset: qBytes + kvBytes, size: T * nKv * D * act },
      qn: config.qkNorm ? buf(T * nH * D, 'qn') : undefined,
      kn: config.qkNorm ? buf(T * nKv * D, 'kn') : undefined,
      att: buf(T * nH * D, 'att'),
      // The dense MLP's (mixture-of-experts layers have their own: ./moe-ffn.ts), on any dense layer.
      gateUp,
      gate: { buffer: gateUp, offset: 0, size: gateBytes },
      up: { buffer: gateUp, offset: gateBytes, size: gateBytes },
      hb: buf(denseMlp ? T * I : 1, 'hb', 4),
      last: buf(S * H, 'last', 4),
      lastNormed: buf(S * H, 'lastNormed', 4),
      logits: buf(S * V, 'logits', 4),
      invFreq,
      invFreqLocal,
    };
    const caches = LayerCaches.create(device, layerCacheKinds(config), { numPages: limits.numPages, pageSize: limits.pageSize, maxSeqs: S, actBytes: act });

    // The logits path runs in f32 whatever the activations are: the sampler reads f32 logits.
    const f32 = { ...ctx, precision: 'f32' as const };

    const specs = engineLinearSpecs(ctx);
    // Mixture of experts: scratch shared by the layers, and each layer's routed expert ids.
    const moe = config.moe;
    const moeScratch = moe ? createMoeScratch(device, config, T, act) : undefined;
    if (moeScratch) owned.push(...moeScratch.buffers);
    const routedIds = moe ? Array.from({ length: config.numLayers }, (_, l) => (layerIsMoe(config, l) ? buf(T * moe.numExpertsUsed, `routed experts ${l}`, 4) : null)) : [];

    // Every op is labelled with its role and layer (OpLabel) for the bench's per-op report.
    // Ops that read or write the residual stream `x` take it as f32 (their other operands act), and
    // so the branch outputs (xb2, the shared expert's) and the GLU products (hb, the experts'):
    // real models' MLPs have outliers past f16's 65504 there too.
    const f32Buffers = new Set<BufferRef>([state.x, state.xb2, state.hb, ...(moeScratch?.f32 ?? [])]);
    const isX = (b: BufferRef | undefined) => b !== undefined && f32Buffers.has(b);
    const linear = (label: OpLabel, m: GpuMatrix, x: GPUBuffer, y: GPUBuffer, bias?: GPUBuffer, norm?: LinearArgs['norm'], residual = false, segments?: LinearSegment[], epi: Pick<LinearArgs, 'pairs' | 'glu'> = {}) =>
      createLinearOp(
        ctx,
        { weight: m.parts, dtype: m.dtype, n: m.rows, k: m.cols, bias, x, y, xF32: isX(x), yF32: isX(y), step: step.counts, maxTokens: T, label, norm: norm && { ...norm, xF32: isX(norm.x) }, residual, segments, ...epi },
        specs,
      );
    const gateUpSegments = [{ rows: I, offset: 0 }, { rows: I, offset: gateBytes / act }];
    // The GLU epilogue needs each (gate, up) row pair in one part of a split matrix.
    const gluFits = (m: GpuMatrix) => m.parts.every((p) => p.row0 % 2 === 0);
    // Where each of q, k and v lands in `qkv`, in elements: [maxTokens][its rows] at its region.
    const qkvSegment = { q: { rows: nH * D, offset: 0 }, k: { rows: nKv * D, offset: qBytes / act }, v: { rows: nKv * D, offset: (qBytes + kvBytes) / act } };
    const segments = (members: QkvMember[]) => members.map((m) => qkvSegment[m]);
    const norm = (label: OpLabel, x: BufferRef, weight: GPUBuffer, y: BufferRef, n = H, rowsPerToken = 1) =>
      createRmsNormOp(ctx, { x, weight, y, n, rowsPerToken, maxTokens: T, eps: config.rmsNormEps, label, xF32: isX(x) });
    // A post-norm (Gemma 2/3, OLMo 2) norms the f32 branch xb2 and adds it into the stream, in f32.
    const postNorm = (label: OpLabel, weight: GPUBuffer) =>
      createRmsNormOp(ctx, { x: state.xb2, xF32: true, weight, y: state.x, yF32: true, add: { scale: config.residualScale }, n: H, maxTokens: T, eps: config.rmsNormEps, label });
    // Granite's residual_multiplier without a post-norm: x += scale · xb2, both f32.
    const scaledAdd = (label: OpLabel) => createAddOp(ctx, { x: state.x, xF32: true, y: state.xb2, yF32: true, n: H, scale: config.residualScale, label });

    // Tokens drawn at the step before are read on the GPU: the CPU never waits for them.
    const feed = await createFeedOp(ctx, { stepTokens: step.tokens, tokenSeq: step.tokenSeq, rowSlot: step.rowSlot, sampled, ids: state.ids, counts: step.counts, label: { role: 'feed' } });
    const embed = await createEmbedOp(ctx, {
      tokens: state.ids,
      table: weights.tokenEmbd.parts,
      x: state.x,
      xF32: true,
      dtype: weights.tokenEmbd.dtype,
      n: H,
      vocab: V,
      scale: config.embeddingScale,
      label: { role: 'embed' },
    });
    onPart?.();

    const layers: LayerOps[] = [];
    const loraIo: Array<Partial<Record<LoraTarget, LoraIo>>> = [];
    for (let l = 0; l < config.numLayers; l++) {
      const w = weights.layers[l]!;
      const kv = caches.paged(l);
      const qRoped = state.qn ?? state.q;
      const kRoped = state.kn ?? state.k;
      // Pre-norm blocks read the normed stream xb; post-norm blocks (OLMo 2) read x itself; both
      // post-norm and sandwich blocks (Gemma) norm their output xb2 as they add it into x.
      const attnIn = w.attnNorm ? state.xb : state.x;
      const ffnIn = w.ffnNorm ? state.xb : state.x;
      // The pre-norms fold into the matvec steps' projections (the norm op runs for prefill only).
      const attnFold = w.attnNorm && { x: state.x, weight: w.attnNorm, eps: config.rmsNormEps };
      const ffnFold = w.ffnNorm && { x: state.x, weight: w.ffnNorm, eps: config.rmsNormEps };
      // Without a post-norm (or Granite's scale of the branch), o and the dense down (or the
      // experts' weighted sum) add their output into the residual stream as they store it; a
      // LoRA update then adds into x too. A post-norm adds its normed xb2 into x itself, and
      // Granite's scaled add reads xb2: either way the branch stays f32 until it is in the stream.
      const oAdds = !w.postAttnNorm && config.residualScale === 1;
      const downAdds = !w.postFfnNorm && config.residualScale === 1;
      // q/k norms per head (Qwen3: rows of headDim) or over the whole projection (OLMo 2).
      const full = config.qkNormScope === 'full';
      const at = (role: string): OpLabel => ({ role, layer: l });
      const io = (m: GpuMatrix, x: GPUBuffer, y: BufferRef): LoraIo => ({ x, y, k: m.cols, n: m.rows, xF32: isX(x), yF32: isX(y) });
      const qkvIo = (rows: number, y: BufferRef): LoraIo => ({ x: attnIn, y, k: H, n: rows, xF32: isX(attnIn) });
      loraIo.push({
        q: qkvIo(nH * D, state.q),
        k: qkvIo(nKv * D, state.k),
        v: qkvIo(nKv * D, state.v),
        o: io(w.wo, state.att, oAdds ? state.x : state.xb2),
        // LoRA of the experts is not run (a MoE layer has no dense gate/up/down to adapt).
        ...(w.wDown && (w.gateUp || (w.wGate && w.wUp))
          ? { gate: { x: ffnIn, y: state.gate, k: H, n: I }, up: { x: ffnIn, y: state.up, k: H, n: I }, down: io(w.wDown, state.hb, downAdds ? state.x : state.xb2) }
          : {}),
      });
      layers.push({
        attnNorm: w.attnNorm ? await norm(at('attn_norm'), state.x, w.attnNorm, state.xb) : undefined,
        qkv: await Promise.all(
          w.qkv.map((part) => linear(at(part.members.length === 3 ? 'qkv' : part.members.join('')), part.matrix, attnIn, qkv, part.bias, attnFold, false, segments(part.members))),
        ),
        qNorm: w.qNorm ? await (full ? norm(at('q_norm'), state.q, w.qNorm, state.qn!, nH * D) : norm(at('q_norm'), state.q, w.qNorm, state.qn!, D, nH)) : undefined,
        kNorm: w.kNorm ? await (full ? norm(at('k_norm'), state.k, w.kNorm, state.kn!, nKv * D) : norm(at('k_norm'), state.k, w.kNorm, state.kn!, D, nKv)) : undefined,
        rope: !layerUsesRope(config, l) ? undefined : await createRopeOp(ctx, {
          q: qRoped,
          k: kRoped,
          positions: step.positions,
          invFreq: layerRope(config, l) === 'local' ? invFreqLocal : invFreq,
          nHeads: nH,
          nKv,
          headDim: D,
          rotaryDim: config.rotaryDim ?? D,
          mscale: ropeAttentionFactor(config),
          style: config.ropeStyle,
          label: at('rope'),
          // The rotated keys and the values go straight into the cache (no kv_write dispatch).
          kv: { v: state.v, slotMapping: step.slotMapping, kCache: kv.k, vCache: kv.v },
        }),
        kvWrite: layerUsesRope(config, l) ? undefined : await createKvWriteOp(ctx, {
          k: kRoped,
          v: state.v,
          slotMapping: step.slotMapping,
          kCache: kv.k,
          vCache: kv.v,
          nKv,
          headDim: D,
          label: at('kv_write'),
        }),
        attention: await createAttentionOp(ctx, {
          q: qRoped,
          kCache: kv.k,
          vCache: kv.v,
          out: state.att,
          positions: step.positions,
          tokenSeq: step.tokenSeq,
          blockTable: step.blockTable,
          lastToken: step.lastToken,
          counts: step.counts,
          nHeads: nH,
          nKv,
          headDim: D,
          pageSize: limits.pageSize,
          maxTokens: T,
          maxSeqs: S,
          maxPagesPerSeq: limits.maxPagesPerSeq,
          window: layerWindow(config, l),
          scale: attentionScale(config),
          softcap: config.attnLogitSoftcap,
          label: at('attention'),
        }),
        o: await (oAdds ? linear(at('o'), w.wo, state.att, state.x, w.bo, undefined, true) : linear(at('o'), w.wo, state.att, state.xb2, w.bo)),
        postAttnNorm: w.postAttnNorm ? await postNorm(at('post_attn_norm'), w.postAttnNorm) : undefined,
        attnResidual: oAdds || w.postAttnNorm ? undefined : await scaledAdd(at('attn_residual')),
        ffnNorm: w.ffnNorm ? await norm(at('ffn_norm'), state.x, w.ffnNorm, state.xb) : undefined,
        ...(w.wDown && (w.gateUp || (w.wGate && w.wUp))
          ? {
              ...(w.gateUp
                ? {
                    gateUp: await linear(at('gate_up'), w.gateUp, ffnIn, gateUp, undefined, ffnFold, false, gateUpSegments, { pairs: true }),
                    glu: gluFits(w.gateUp) ? await linear(at('gate_up'), w.gateUp, ffnIn, state.hb, undefined, ffnFold, false, undefined, { glu: config.ffnActivation }) : undefined,
                  }
                : {
                    gate: await linear(at('gate'), w.wGate!, ffnIn, gateUp, undefined, ffnFold, false, [gateUpSegments[0]!]),
                    up: await linear(at('up'), w.wUp!, ffnIn, gateUp, undefined, ffnFold, false, [gateUpSegments[1]!]),
                  }),
              swiglu: await createSwigluOp(ctx, { gate: gateUp, up: gateUp, upOffset: gateBytes / act, out: state.hb, outF32: true, n: I, activation: config.ffnActivation, label: at('swiglu') }),
              down: await (downAdds ? linear(at('down'), w.wDown, state.hb, state.x, undefined, undefined, true) : linear(at('down'), w.wDown, state.hb, state.xb2)),
            }
          : {
              // The routed gathers read x as act: they need the normed copy, never the f32 stream
              // (every MoE family pre-norms; an f32 x would be a gather variant no model runs).
              moe: await createMoeFfnOp(ctx, {
                config,
                weights: w,
                scratch: moeScratch!,
                ids: routedIds[l]!,
                x: isX(ffnIn) && precision === 'f16' ? unsupported(`layer ${l}: a mixture-of-experts FFN without a norm before it in the f16 path`) : ffnIn,
                out: downAdds ? state.x : state.xb2,
                residual: downAdds,
                counts: step.counts,
                maxTokens: T,
                layer: l,
                linear,
              }),
            }),
        postFfnNorm: w.postFfnNorm ? await postNorm(at('post_ffn_norm'), w.postFfnNorm) : undefined,
        ffnResidual: downAdds || w.postFfnNorm ? undefined : await scaledAdd(at('ffn_residual')),
      });
      onPart?.();
    }

    // Last token of each sequence: gather its residual row (f32 at every precision), norm, logits.
    const gatherLast = await createEmbedOp(f32, {
      tokens: step.lastToken,
      table: state.x,
      x: state.last,
      dtype: 'F32',
      n: H,
      vocab: T,
      label: { role: 'gather_last', perSeq: true },
    });
    const finalNorm = await createRmsNormOp(f32, {
      x: state.last,
      weight: weights.outputNorm,
      y: state.lastNormed,
      n: H,
      maxTokens: S,
      eps: config.rmsNormEps,
      label: { role: 'output_norm', perSeq: true },
    });
    const out = weights.output;
    const lmHead = await createLinearOp(f32, {
      weight: out.parts,
      dtype: out.dtype,
      n: out.rows,
      k: out.cols,
      x: state.lastNormed,
      y: state.logits,
      step: step.seqCount,
      maxTokens: S,
      label: { role: 'lm_head', perSeq: true },
      // The final norm folds in while the step has at most MATVEC_MAX_TOKENS sequences.
      norm: { x: state.last, weight: weights.outputNorm, eps: config.rmsNormEps },
    }, specs);
    // Final logits divided by Granite's logits_scaling, then soft-capped (Gemma 2); absent when neither.
    const cap = config.finalLogitSoftcap;
    const div = config.logitsScaling;
    const logitSoftcap = cap === null && div === 1 ? undefined : await createSoftcapOp(f32, { x: state.logits, n: V, cap, div, label: { role: 'logits_scale', perSeq: true } });
    return new GpuForward(config, limits, state, caches, feed, embed, layers, gatherLast, finalNorm, lmHead, logitSoftcap, owned, loraIo, routedIds);
  }

  /**
   * Makes the LoRA update op of every matrix over `pool` (once, on the first adapter load: its two
   * pipelines and the bind groups; later loads only write the pool). Each adds its rows' adapter's
   * scale·B·A·x onto the base matrix's output, before anything reads it (q/k norms, RoPE, the GLU,
   * the residual add), so the base weights are never modified.
   */
  async enableLora(ctx: OpContext, pool: LoraPool, step: StepBuffers): Promise<void> {
    if (this.lora) return;
    const maxRank = pool.limits.maxRank;
    const h = createBuffer(ctx.device, this.limits.maxTokens * maxRank * 4, STORAGE, 'lora h');
    const ops = await Promise.all(
      this.loraIo.map((targets, l) =>
        Promise.all(
          LORA_TARGETS.map((t) => {
            const io = targets[t];
            return io
              ? createLoraOp(ctx, { ...io, label: { role: t, layer: l }, mat: loraMat(l, t), numMats: pool.numMats, maxRank, weights: pool.weights, entries: pool.entries, tokenSeq: step.tokenSeq, seqAdapter: step.seqAdapter, h })
              : undefined;
          }),
        ),
      ),
    );
    this.lora = { pool, ops, h };
  }

  /** Records the LoRA update of layer `l`'s `target` when a loaded adapter adapts it (a step with adapters only). */
  private adapt(lora: LoraOps | null, pass: GPUComputePassEncoder, l: number, target: LoraTarget, tokens: number): void {
    if (lora && lora.pool.adapts(loraMat(l, target))) lora.ops[l]![LORA_TARGETS.indexOf(target)]?.encode(pass, tokens);
  }

  /**
   * Records one forward step of `tokens` tokens from `seqs` sequences; logits land in `state.logits`.
   * `adapted`: some row runs a LoRA adapter (its id is in the step's seqAdapter). `hidden`: the
   * step's final hidden states are read back (`state.lastNormed`, return_hidden_states), so the
   * final norm writes them even where it folds into the LM head. `maxKeys`: the longest context in
   * the step (keys after it), so that attention runs a single split where that is enough.
   */
  encode(pass: GPUComputePassEncoder, tokens: number, seqs: number, adapted = false, hidden = false, maxKeys?: number): void {
    const mode = tokens > seqs ? 'prefill' : 'decode';
    // Steps the matvec kernels take fold the pre-norms into the projections after them; a LoRA
    // update reads the normed input, so adapted steps still write it.
    const unfolded = tokens > MATVEC_MAX_TOKENS || adapted;
    const lora = adapted ? this.lora : null;
    this.feed.encode(pass, tokens);
    this.embed.encode(pass, tokens);
    for (const [l, layer] of this.layers.entries()) {
      // attention block
      if (unfolded) layer.attnNorm?.encode(pass, tokens);
      for (const op of layer.qkv) op.encode(pass, tokens);
      this.adapt(lora, pass, l, 'q', tokens);
      this.adapt(lora, pass, l, 'k', tokens);
      this.adapt(lora, pass, l, 'v', tokens);
      layer.qNorm?.encode(pass, tokens);
      layer.kNorm?.encode(pass, tokens);
      layer.rope?.encode(pass, tokens);
      layer.kvWrite?.encode(pass, tokens);
      layer.attention.encode(pass, tokens, mode, maxKeys);
      layer.o.encode(pass, tokens);
      this.adapt(lora, pass, l, 'o', tokens);
      layer.postAttnNorm?.encode(pass, tokens);
      layer.attnResidual?.encode(pass, tokens);
      // feed-forward block
      // The mixture-of-experts FFN reads the normed input, folded or not.
      if (unfolded || layer.moe) layer.ffnNorm?.encode(pass, tokens);
      // An adapter that updates this layer's gate or up must run between them and the activation.
      const adaptsGlu = lora !== null && (lora.pool.adapts(loraMat(l, 'gate')) || lora.pool.adapts(loraMat(l, 'up')));
      if (layer.glu && tokens <= MATVEC_MAX_TOKENS && !adaptsGlu) {
        // act(gate)·up straight from the joined matrix: no LoRA update sits between them.
        layer.glu.encode(pass, tokens);
      } else {
        layer.gateUp?.encode(pass, tokens);
        layer.gate?.encode(pass, tokens);
        this.adapt(lora, pass, l, 'gate', tokens);
        layer.up?.encode(pass, tokens);
        this.adapt(lora, pass, l, 'up', tokens);
        layer.swiglu?.encode(pass, tokens);
      }
      layer.down?.encode(pass, tokens);
      this.adapt(lora, pass, l, 'down', tokens);
      layer.moe?.encode(pass, tokens);
      layer.postFfnNorm?.encode(pass, tokens);
      layer.ffnResidual?.encode(pass, tokens);
    }
    // logits of each sequence's last token
    this.gatherLast.encode(pass, seqs);
    if (seqs > MATVEC_MAX_TOKENS || hidden) this.finalNorm.encode(pass, seqs);
    this.lmHead.encode(pass, seqs);
    this.logitSoftcap?.encode(pass, seqs);
  }

  /** Frees every op's own buffers, then the run state's. */
  destroy(): void {
    const ops: Op[] = [this.feed, this.embed, this.gatherLast, this.finalNorm, this.lmHead, ...(this.logitSoftcap ? [this.logitSoftcap] : [])];
    for (const layer of this.layers) for (const op of Object.values(layer).flat() as (Op | undefined)[]) if (op) ops.push(op);
    if (this.lora) for (const op of this.lora.ops.flat()) if (op) ops.push(op);
    for (const op of ops) op.destroy();
    for (const b of this.buffers) b.destroy();
    if (this.lora) {
      this.lora.h.destroy();
      this.lora.pool.destroy();
    }
    this.caches.destroy();
  }
}

/** Refuses at load a layout the forward pass cannot run (an expression, for use in arguments). */
function unsupported(what: string): never {
  throw new RangeError(`the GPU forward pass cannot run ${what}`);
}
