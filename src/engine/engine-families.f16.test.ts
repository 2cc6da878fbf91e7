/**
 * The f16 path against the CPU reference on the families added after the first four, one or two
 * formats each (engine.f16.test.ts has the rule, the tolerance and the first four). Runs where the
 * device offers shader-f16 (lavapipe in `npm test`'s f16 step); skips on SwiftShader.
 */
import { describe, expect, it } from 'vitest';
import type { Arch } from '../model/arch';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { MtpReference } from '../reference/mtp';
import { maxAbsDiffAll, top2Margin } from '../testing/compare';
import { expectModelMatchesReference } from '../testing/engine-check';
import { describeEngineGrid, F16_LOGIT_TOLERANCE, SHORT_STEPS, STEPS } from '../testing/engine-matrix';
import { useFixtureURLs } from '../testing/fixture-server';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { drainGeneration, greedyRequest } from '../testing/sampling';
import { stableGreedy } from '../testing/stable-greedy';
import { GpuEngine } from './engine';
import { uploadWeights } from './gpu-weights';
import { GpuMtpHead } from './mtp-head';

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

// After the grid's qwen35 case, in the same process: the fixture's trunk is that case's (the head's
// tensors come after it), so the engine's f16 pipelines are compiled already and only the head's
// f32 input side (embedding, its two norms, fc's halves) and its sampler compile here.
describe("the f16 GPU engine with Qwen3.5's MTP head (speculative {type: \"mtp\", k: 3})", () => {
  it('Q8_0: the same greedy output as without it and as the reference, 3 guesses a step; the head\'s chained logits within the f16 tolerance of the reference (f16)', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    const opened = await openModel((await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!);
    const V = opened.config.vocabSize;
    const trunk = await ReferenceModel.load(opened);

    // The head alone at f16 (its layer's activations f16, its input side f32): 4 rows fed, then
    // from row 4 chains of 1, 2 and 3 guesses, the last pass's logits against the reference's chain.
    const ids = Array.from({ length: 6 }, (_, i) => (i * 7919 + 41) % V);
    const hidden = ids.map((id, t) => (trunk.forward(id, t), trunk.hidden));
    const rows = (from: number, to: number) => Float32Array.from(hidden.slice(from, to).flatMap((h) => [...h]));
    const headRef = await MtpReference.load(opened);
    ids.slice(1, 5).forEach((next, t) => headRef.forward(hidden[t]!, next, t));
    const chain = headRef.chain(hidden[4]!, ids[5]!, 4, 3);
    const weights = await uploadWeights(gpu.device, opened);
    const head = await GpuMtpHead.create(gpu, opened, weights, { precision: 'f16', limits: { maxTokens: 8, maxSeqs: 1, numPages: 4, pageSize: 16, maxPagesPerSeq: 4, contextLength: 64, maxGuesses: 3 } });
    try {
      await head.run(0, rows(0, 4), ids.slice(1, 5), 0);
      for (let k = 1; k <= 3; k++) {
        head.truncate(0, 4);
        const guesses = await head.run(0, rows(4, 5), [ids[5]!], k);
        expect(guesses.length).toBe(k);
        expect(maxAbsDiffAll([await head.lastLogits()], [chain.logits[k - 1]!]), `guess ${k}`).toBeLessThan(F16_LOGIT_TOLERANCE);
        // The guesses equal the reference's while its top-2 margins exceed twice the tolerance.
        const close = chain.logits.slice(0, k).findIndex((l) => top2Margin(l) < 2 * F16_LOGIT_TOLERANCE);
        const sure = close < 0 ? k : close;
        expect(guesses.slice(0, sure)).toEqual(chain.ids.slice(0, sure));
      }
    } finally {
      head.destroy();
      weights.destroy();
    }

    // The engine (the grid's limits, so its pipelines): 8 greedy tokens, each step also verifying
    // 3 guesses while max_tokens leaves room (as engine-hybrid.test.ts counts them: 15, none taken
    // from the random head). The prompt's 8 reference steps have no near-tie at the f16 tolerance.
    const e = await GpuEngine.load(opened, { gpu, precision: 'f16', mtp: true });
    try {
      const p = Array.from({ length: 9 }, (_, i) => (i * 31 + 5) % V);
      const want = stableGreedy(trunk, p, 8, F16_LOGIT_TOLERANCE);
      expect(want.length).toBe(8);
      const plain = await drainGeneration(e.generate(greedyRequest(p, 8)));
      const spec = await drainGeneration(e.generate(greedyRequest(p, 8, {}, { speculation: { mtp: { k: 3 } } })));
      expect(plain.ids).toEqual(want);
      expect(spec.ids).toEqual(want);
      expect(spec.result.speculation).toEqual({ proposed: 15, accepted: 0 });
    } finally {
      await e.dispose();
    }
  });
});
