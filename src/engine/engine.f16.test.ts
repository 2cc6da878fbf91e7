/**
 * The f16 path (f16 activations and KV cache; f32 logits and sampling) against the CPU reference
 * forward pass, on every fixture architecture and file format. Runs where the device offers
 * shader-f16: a real GPU, or Mesa's lavapipe on a CPU (`npm test` runs this file there in its f16
 * step); on SwiftShader, which has no shader-f16, it skips.
 */
import { describe, it } from 'vitest';
import type { Arch } from '../model/arch';
import { testGPU } from '../testing/gpu';
import { useFixtureURLs } from '../testing/fixture-server';
import { expectModelMatchesReference, splittingLimit } from '../testing/engine-check';
import { describeEngineGrid, F16_LOGIT_TOLERANCE } from '../testing/engine-matrix';

/**
 * A sample of formats, each architecture on two or three: f16 activations meet each weight type
 * in its matmul and embedding kernels, which the kernel tests run one type at a time in f16 (at
 * the decode, few-token and prefill specs), and the whole f32 grid runs on SwiftShader
 * (engine-types*.test.ts). What the engine adds in f16 is the same for every type (the f16
 * stream, KV cache and norms around the matmuls): the sample keeps a float type of each kind
 * (F32, F16, BF16 from HF folders), a 32-block type, a K-quant, the mixes and a split model.
 * Each further type costs 35-55 s of lavapipe's compiler in CI's critical f16 step (the 11
 * others took 484 s there). Measured once over the full grid on lavapipe: all 44 cases within
 * 0.037. The later families: engine-families.f16.test.ts.
 */
const FORMATS: Array<[Arch, string[]]> = [
  ['llama', ['hf-F32', 'Q4_0']],
  ['qwen2', ['hf-F16', 'Q4_K', 'Q8_0']],
  ['qwen3', ['hf-BF16', 'Q4_K_M']],
  ['mistral', ['Q8_0', 'Q4_K_M']],
];

describeEngineGrid(FORMATS, 'f16');

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
