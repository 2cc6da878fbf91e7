/**
 * What a GPU engine keeps on one device (./engine.ts), and a draft model too (./draft-engine.ts):
 * the weights, the forward pass, the step buffers and the sampler's ops, built from a spec fixed
 * at load (a new device after a loss gets the same sizes), and freed together.
 */
import type { GPUContext } from '../gpu/device';
import { createBuffer, STORAGE } from '../gpu/buffers';
import type { Precision } from '../gpu/pipelines';
import { createSampleOp, LOGPROB_WORDS, SAMPLE_PARAM_WORDS } from '../kernels/sample';
import { engineOpContext, type OpContext } from '../kernels/op';
import { createPenaltiesOp } from '../kernels/penalties';
import { createApplyMaskOp } from '../kernels/apply-mask';
import type { ModelConfig } from '../model/config';
import type { OpenedModel } from '../model/open';
import type { ProgressEmitter } from '../loader/progress';
import { GpuForward } from './forward/forward';
import { maxWeightPartBytes, uploadWeights, type GpuWeights, type UploadProgress } from './gpu-weights';
import { PrecisionUnsupportedError } from './errors';
import { layerCacheKinds, pageBytes, pagesPerBinding } from './layer-cache';
import type { Sampler } from './step-runner';
import { StepBuffers } from './step';

/** What the engine keeps on one GPU device: made at load, and again on a new device after a loss. */
export interface GpuParts {
  gpu: GPUContext;
  ctx: OpContext;
  weights: GpuWeights;
  forward: GpuForward;
  sampler: Sampler;
  step: StepBuffers;
}

/** What the parts are built from, fixed at load: a new device gets the same sizes (the KV pool's page count among them). */
export interface PartsSpec {
  precision: Precision;
  integerDot: boolean;
  /** `maxSeqs`: rows per step (slots plus the verify rows, engine.ts's VERIFY_ROWS); `slots`: sequences at once (default maxSeqs). */
  limits: { maxTokens: number; maxSeqs: number; slots?: number; numPages: number; pageSize: number; maxPagesPerSeq: number; contextLength: number };
  maxWeightPartBytes?: number;
  /** State snapshots of a hybrid's prefix cache (0: none; EngineOptions.stateSnapshots). */
  snapshots: number;
  /** A draft model's parts (./draft-engine.ts): its draws are greedy on the GPU, so no penalties op. */
  drawsOnly?: boolean;
}

/** Bytes of the model's weights as stored. */
export function weightBytesOf(opened: OpenedModel): number {
  return [...opened.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0);
}

/** Uploads the weights and makes every buffer and pipeline of the engine on `gpu`. */
export async function buildParts(gpu: GPUContext, opened: OpenedModel, spec: PartsSpec, progress: ProgressEmitter, onUpload?: UploadProgress): Promise<GpuParts> {
  if (spec.precision === 'f16' && !gpu.info.f16) throw new PrecisionUnsupportedError();
  const { config } = opened;
  const { limits } = spec;
  const ctx = engineOpContext(gpu, spec.precision, spec.integerDot);
  const weightBytes = weightBytesOf(opened);
  const upload = progress.phase('upload').file('weights', weightBytes);
  let uploaded = 0;
  const weights = await uploadWeights(gpu.device, opened, (name, done, total) => {
    upload.add(done - uploaded);
    uploaded = done;
    onUpload?.(name, done, total);
  }, Math.min(maxWeightPartBytes(gpu.device.limits), spec.maxWeightPartBytes ?? Infinity));
  upload.done();
  const step = new StepBuffers(gpu.device, { ...limits, samplingWords: SAMPLE_PARAM_WORDS });
  const { maxSeqs } = limits;
  // The sampler's token of each slot, which the next step's FEED tokens read, then of each verify row (u32 [2 × maxSeqs], StepBuffers.drawSlot).
  const tokens = createBuffer(gpu.device, 2 * maxSeqs * 4, STORAGE, 'sampled tokens');
  // Compile progress counts layers whose pipelines and bind groups are ready (+ embedding and head).
  const compile = progress.phase('compile').file('kernels', config.numLayers + 2);
  const forward = await GpuForward.create(ctx, config, weights, step, tokens, limits, opened.ropeFreqFactors, () => compile.add(1));
  const params = step.sampling;
  const logprobs = createBuffer(gpu.device, maxSeqs * LOGPROB_WORDS * 4, STORAGE, 'sampled logprobs'); // u32 [maxSeqs, LOGPROB_WORDS] by row
  const { logits } = forward;
  const op = await createSampleOp(ctx, { logits, params, tokens, logprobs, vocab: config.vocabSize, rowSlot: step.drawSlot, maxSeqs });
  // Bias rows, counts and prompt bits per slot (2 × slots × vocab words; a verify row reads its sequence's); they count the sampler's `tokens` (by slot too).
  const penalties = spec.drawsOnly ? undefined : await createPenaltiesOp(ctx, { logits, lastToken: tokens, vocab: config.vocabSize, maxSeqs: limits.slots ?? maxSeqs, rowSlot: step.rowSlot });
  // Structured output's token mask (by row), applied before the penalties and the sampler.
  const mask = await createApplyMaskOp(ctx, { logits, vocab: config.vocabSize, maxSeqs });
  compile.done();
  return { gpu, ctx, weights, forward, step, sampler: { op, params, tokens, logprobs, ...(penalties ? { penalties } : {}), mask } };
}

/** Frees every buffer of the parts (on a lost device too: its objects are dropped). */
export function destroyParts(parts: GpuParts): void {
  parts.forward.destroy();
  parts.weights.destroy();
  parts.step.destroy();
  const { op, tokens, logprobs, penalties, mask } = parts.sampler;
  op.destroy();
  penalties?.destroy();
  mask.destroy();
  for (const b of [tokens, logprobs]) b.destroy();
}

/**
 * Pages in the KV pool. By default the pool gets the weights' size in bytes, between 64 MiB and
 * 2 GiB (a model's KV needs grow with its size; a page has no way to ask how much memory the GPU
 * has), at least one full context and at most a full context for every slot; and every layer's K
 * (and V) buffer must fit one storage binding.
 */
export function kvPoolPages(a: {
  config: ModelConfig;
  precision: Precision;
  pageSize: number;
  contextLength: number;
  maxSeqs: number;
  weightBytes: number;
  limits: Pick<GPUSupportedLimits, 'maxStorageBufferBindingSize' | 'maxBufferSize'>;
  tokens?: number;
}): number {
  const kinds = layerCacheKinds(a.config);
  const act = a.precision === 'f16' ? 2 : 4;
  const bytesPerPage = pageBytes(kinds, a.pageSize, act);
  const perContext = Math.ceil(a.contextLength / a.pageSize);
  const bindingPages = pagesPerBinding(kinds, a.pageSize, act, Math.min(a.limits.maxStorageBufferBindingSize, a.limits.maxBufferSize));
  let pages: number;
  if (a.tokens !== undefined) pages = Math.ceil(a.tokens / a.pageSize);
  else {
    const budget = Math.min(2 * 2 ** 30, Math.max(64 * 2 ** 20, a.weightBytes));
    pages = Math.min(a.maxSeqs * perContext, Math.floor(budget / Math.max(1, bytesPerPage)));
  }
  pages = Math.max(pages, perContext);
  if (pages > bindingPages) {
    if (bindingPages < perContext) throw new RangeError(`one context of ${a.contextLength} tokens needs ${perContext} KV pages per layer buffer; this GPU's binding limit holds ${bindingPages}: lower contextLength`);
    pages = bindingPages;
  }
  return pages;
}
