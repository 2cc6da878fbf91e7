/**
 * The f16 path (f16 activations and KV cache; f32 logits and sampling) against the CPU reference
 * forward pass, on every fixture architecture and file format. Runs where the device offers
 * shader-f16: a real GPU, or Mesa's lavapipe on a CPU (`npm test` runs this file there in its f16
 * step); on SwiftShader, which has no shader-f16, it skips.
 */
import { beforeAll, describe, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import type { Arch } from '../model/config';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { testGPU } from '../testing/gpu';
import { useFixtureURLs } from '../testing/fixture-server';
import { expectModelMatchesReference, splittingLimit } from '../testing/engine-check';
import { GpuEngine } from './engine';

/**
 * Every activation is rounded to f16 (relative error 2^-11 ≈ 4.9e-4) after each op of each layer,
 * and the KV cache is f16. Measured on lavapipe: worst logit difference 0.037 (qwen2, Q4_K_M) with
 * logits up to 23 in magnitude; a wrong kernel moves logits by whole units. 0.1 ≈ 0.5% of the
 * largest logit, with ~2.7× headroom over the worst measured case.
 */
const F16_LOGIT_TOLERANCE = 0.1;
const STEPS = 32;
/**
 * Each format on at least one architecture, each architecture on three formats: the f16 kernels'
 * weight types are covered one by one in the kernel tests, and lavapipe compiles slowly (the
 * f32 engine test runs the full 4 × 11 grid on SwiftShader). Measured once over the full grid on
 * lavapipe: all 44 cases within 0.037.
 */
const FORMATS: Record<Arch, string[]> = {
  llama: ['hf-F32', 'F16', 'Q4_0', 'Q5_K', 'IQ4_XS_MIX'],
  qwen2: ['hf-F16', 'BF16', 'Q4_K', 'Q8_0'],
  qwen3: ['hf-BF16', 'Q6_K', 'Q4_K_M', 'Q5_0', 'Q3_K', 'IQ4_NL'],
  mistral: ['F32', 'Q8_0', 'Q4_K_M', 'Q2_K', 'MXFP4'],
  smollm3: ['Q8_0'],
  olmo2: ['hf-BF16'],
  gemma2: ['Q8_0'],
  gemma3: ['Q8_0'],
  granite: ['Q4_K_M'],
  phi3: ['Q4_K_M'],
  qwen2moe: ['Q4_K_M'],
  qwen3moe: ['hf-F16', 'Q8_0'],
  olmoe: ['F16'],
};

describe.each(Object.keys(FORMATS) as Arch[])('the f16 GPU engine on the tiny %s fixture', (arch) => {
  const urls = useFixtureURLs(arch);
  let gpu: GPUContext;
  beforeAll(async () => {
    gpu = await testGPU();
  });

  // The first case compiles every f16 pipeline, which takes a minute or two on lavapipe.
  it.for(FORMATS[arch])('%s: greedy tokens and teacher-forced logits match the reference (f16)', { timeout: 300_000 }, async (variant, { skip }) => {
    skip(!gpu.info.f16, 'the device has no shader-f16');
    await expectModelMatchesReference(gpu, urls()[variant]!, { precision: 'f16', steps: STEPS, tolerance: F16_LOGIT_TOLERANCE, salt: 13 * (arch.length + 1) });
  });
});

describe('the f16 GPU engine with weights split by rows', () => {
  // As src/engine/split.test.ts in f32: the embedding and the FFN in 3 or more parts, q/k/v with
  // their biases (qwen2) in 2; the f16 embed and linear kernels write each part's rows.
  const urls = useFixtureURLs('qwen2');
  it('qwen2 Q8_0: greedy tokens and teacher-forced logits match the reference (f16)', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    const url = urls()['Q8_0']!;
    const engine = { maxWeightPartBytes: await splittingLimit(url) };
    await expectModelMatchesReference(gpu, url, { precision: 'f16', steps: 8, tolerance: F16_LOGIT_TOLERANCE, salt: 5, engine });
  });
});
