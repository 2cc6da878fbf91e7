/**
 * The f16 path against the CPU reference on the families added after the first four, one or two
 * formats each (engine.f16.test.ts has the rule, the tolerance and the first four). Runs where the
 * device offers shader-f16 (lavapipe in `npm test`'s f16 step); skips on SwiftShader.
 */
import { describe, it } from 'vitest';
import type { Arch } from '../model/arch';
import { expectModelMatchesReference } from '../testing/engine-check';
import { describeEngineGrid, F16_LOGIT_TOLERANCE, SHORT_STEPS, STEPS } from '../testing/engine-matrix';
import { useFixtureURLs } from '../testing/fixture-server';
import { testGPU } from '../testing/gpu';

// SmolLM3 (NoPE layers) and OLMo 2 (norms after the sublayers) add nothing f16-specific: their
// f32 cases run on SwiftShader and in Chromium, their kernels in f16 in the kernel tests; the two
// took 67 s of lavapipe in CI's f16 step. Kept: the families whose activations f16 could overflow
// (Gemma's scaled embeddings and soft-caps, Granite's multipliers), MoE, and each recurrent kind.
const FORMATS: Array<[Arch, string[]]> = [
  ['gemma2', ['Q8_0']],
  ['gemma3', ['Q8_0']],
  ['granite', ['Q4_K_M']],
  ['phi3', ['Q4_K_M']],
  ['qwen2moe', ['Q4_K_M']],
  ['qwen3moe', ['hf-F16', 'Q8_0']],
  ['olmoe', ['F16']],
  // Gated short convolutions: f16 in_proj output and conv output, the state and its sums in f32.
  ['lfm2', ['Q8_0']],
  // The DeltaNet: f16 projections, conv output and y; its states and sums in f32.
  ['qwen35', ['Q8_0']],
];

describeEngineGrid(FORMATS, 'f16');

describe('the f16 GPU engine on a mixture of experts with a dense layer (qwen3moe, layer 0 dense)', () => {
  const urls = useFixtureURLs('qwen3moe', { options: { leadingDense: 1 }, which: { hf: ['F32'], gguf: ['Q8_0'] } });

  it('Q8_0: greedy tokens and teacher-forced logits match the reference (f16)', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    await expectModelMatchesReference(gpu, urls().Q8_0!, { precision: 'f16', steps: STEPS, tolerance: F16_LOGIT_TOLERANCE, salt: 17 });
  });
});

describe('the f16 GPU engine on Granite 4.0-H (Mamba-2 on layers 0 and 2)', () => {
  // f16 in_proj output, conv output and y; the conv window, the scan state and their sums in f32.
  const urls = useFixtureURLs('granite', { options: { hybrid: { mambaGroups: 1 } }, which: { hf: [], gguf: ['Q8_0'] } });

  it('Q8_0: greedy tokens and teacher-forced logits match the reference (f16)', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    await expectModelMatchesReference(gpu, urls().Q8_0!, { precision: 'f16', steps: SHORT_STEPS, tolerance: F16_LOGIT_TOLERANCE, salt: 29, sampled: false });
  });
});
