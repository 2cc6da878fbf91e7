/**
 * The model half of `selfcheck`: tiny generated models in the real formats (the tests' fixture
 * generator, encoded in memory and opened through the real loader), one per block kind the families
 * use and a few weight types, run through the engine on this device and compared with the CPU
 * reference forward pass by the engine tests' own rule (testing/engine-compare.ts): teacher-forced
 * logits within the tolerance, greedy tokens through the GPU sampler identical up to a near-tie.
 */
import type { GPUContext } from '../gpu/device';
import type { Precision } from '../gpu/pipelines';
import { GpuEngine } from '../engine/engine';
import { concatChunks } from '../formats/byte-writer';
import { memorySource } from '../formats/source';
import type { Arch } from '../model/arch';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { compareEngineWithReference } from '../testing/engine-compare';
import { encodeFixtureGGUF } from '../testing/fixtures/encode';
import type { GGUFVariant } from '../testing/fixtures/gguf-layout';
import { makeFixture } from '../testing/fixtures/model';
import { F16_LOGIT_TOLERANCE, INTEGER_DOT_LOGIT_TOLERANCE, LOGIT_TOLERANCE } from '../testing/tolerances';
import type { Measured } from './kernel-checks';

export interface ModelCheck {
  arch: Arch;
  format: GGUFVariant;
  /** Run on CPU-emulated adapters too (each model takes seconds there; the weight types are the kernel checks'). */
  emulated: boolean;
  /** What this model adds to the others: the block kind or weight path it checks. */
  covers: string;
}

/** One model per block kind the families use, and the weight types people download most. */
export const MODEL_CHECKS: readonly ModelCheck[] = [
  { arch: 'llama', format: 'Q4_K_M', emulated: true, covers: 'dense attention + SwiGLU MLP, Llama 3 RoPE scaling; Q4_K and Q6_K rows' },
  { arch: 'llama', format: 'Q8_0', emulated: false, covers: 'Q8_0 weights' },
  { arch: 'llama', format: 'Q4_0', emulated: false, covers: 'Q4_0 weights' },
  { arch: 'llama', format: 'F16', emulated: false, covers: 'F16 weights' },
  { arch: 'qwen2', format: 'Q8_0', emulated: false, covers: 'q/k/v biases' },
  { arch: 'qwen3', format: 'Q8_0', emulated: true, covers: 'per-head q/k RMSNorm' },
  { arch: 'gemma2', format: 'Q8_0', emulated: true, covers: 'sandwich norms, GeGLU, logit soft-caps, sliding-window layers' },
  { arch: 'phi3', format: 'Q8_0', emulated: true, covers: 'fused qkv and gate/up tensors, LongRoPE' },
  { arch: 'smollm3', format: 'Q8_0', emulated: false, covers: 'layers without RoPE (NoPE)' },
  { arch: 'granite', format: 'Q8_0', emulated: true, covers: 'embedding, residual, attention and logit multipliers' },
  { arch: 'qwen3moe', format: 'Q4_K_M', emulated: true, covers: 'mixture of experts: routing, expert matvecs' },
  { arch: 'lfm2', format: 'Q8_0', emulated: false, covers: 'gated short convolutions with per-sequence state beside attention (hybrid)' },
];

/** Steps after the 20-token prompt: decode crosses no page boundary here, the engine tests' grid does. */
const STEPS = 8;

/** The logit tolerance of the engine tests for a precision (and the integer dot-product path's). */
export function logitTolerance(precision: Precision, integerDot: boolean): number {
  return integerDot ? INTEGER_DOT_LOGIT_TOLERANCE : precision === 'f16' ? F16_LOGIT_TOLERANCE : LOGIT_TOLERANCE;
}

/** Encodes, loads and compares one model; the engine is disposed whatever happens. */
export async function runModelCheck(gpu: GPUContext, check: ModelCheck, opts: { precision: Precision; integerDot: boolean }): Promise<Measured> {
  const fx = makeFixture({ arch: check.arch, preset: 'tiny' });
  const opened = await openModel(memorySource(concatChunks(encodeFixtureGGUF(fx, check.format)), `${check.arch}-tiny-${check.format}.gguf`));
  const ref = await ReferenceModel.load(opened);
  const engine = await GpuEngine.load(opened, { gpu, precision: opts.precision, integerDot: opts.integerDot });
  const tolerance = logitTolerance(opts.precision, opts.integerDot && gpu.info.integerDot);
  try {
    const vocab = opened.config.vocabSize;
    const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13 * check.arch.length) % vocab);
    const r = await compareEngineWithReference(engine, ref, prompt, STEPS, tolerance);
    const problem = [
      r.logitRows !== r.refLogitRows ? `${r.logitRows} rows of logits, the reference ${r.refLogitRows}` : '',
      r.greedyMismatch ? `greedy token ${r.greedyMismatch.got} at step ${r.greedyMismatch.step}, the reference ${r.greedyMismatch.want}` : '',
    ].filter(Boolean).join('; ');
    const name = `${check.arch} ${check.format}${opts.integerDot ? ' int8 dot' : ''}`;
    return { name, maxError: r.maxError, tolerance, ...(problem ? { problem } : {}) };
  } finally {
    await engine.dispose();
  }
}
