/**
 * The WebGPU engine against the CPU reference on models with a sliding window (Mistral's
 * `sliding_window`, Qwen2's `use_sliding_window`): an 8-key window on tiny fixtures, prompts and
 * generations well past it, in the HF and GGUF spellings of the window. The same check as
 * engine.test.ts: teacher-forced logits within LOGIT_TOLERANCE at every step, greedy tokens
 * identical up to the reference's first near-tie.
 */
import { describe, expect, it } from 'vitest';
import type { Arch } from '../model/arch';
import { openModel } from '../model/open';
import { logitsFor, ReferenceModel } from '../reference/forward';
import { maxAbsDiffAll } from '../testing/compare';
import { expectEngineMatchesReference } from '../testing/engine-check';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { GpuEngine } from './engine';

const WINDOW = 8;
/** f32 path, as in engine.test.ts. */
const LOGIT_TOLERANCE = 1e-3;
const STEPS = 24;

interface Case {
  arch: Arch;
  variant: 'hf-F32' | 'Q8_0';
  /** Engine options that move the window across pages and prefill chunks. */
  pageSize?: number;
  prefillChunk?: number;
}

// A 20-token prompt, then decode (split-K attention) to position 43.
const CASES: Case[] = [
  // The GGUF key; 4-token pages, so most of a sequence's pages lie wholly outside the window,
  // and 8-token prefill chunks whose queries see keys the chunk before wrote.
  { arch: 'mistral', variant: 'Q8_0', pageSize: 4, prefillChunk: 8 },
  // config.json's use_sliding_window; the default 16-token pages and one prefill chunk (tiled attention).
  { arch: 'qwen2', variant: 'hf-F32' },
];

async function openFixture(arch: Arch, variant: Case['variant']) {
  const paths = await ensureFixture({ arch, preset: 'tiny', slidingWindow: WINDOW }, { hf: ['F32'], gguf: ['Q8_0'] });
  return openModel(variant === 'hf-F32' ? paths.hf.F32! : paths.gguf.Q8_0!);
}

describe('the GPU engine under a sliding window', () => {
  it.each(CASES.map((c) => [`${c.arch} ${c.variant}`, c] as const))('%s: greedy tokens and logits match the windowed reference', async (_, c) => {
    const gpu = await testGPU();
    const opened = await openFixture(c.arch, c.variant);
    expect(opened.config.slidingWindow).toEqual({ size: WINDOW, layers: [0, 1] });
    const ref = await ReferenceModel.load(opened);
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f32', pageSize: c.pageSize, prefillChunk: c.prefillChunk });
    try {
      const vocab = opened.config.vocabSize;
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 13) % vocab);
      await expectEngineMatchesReference(engine, ref, prompt, STEPS, LOGIT_TOLERANCE);
    } finally {
      await engine.dispose();
    }
  });

  it('is a different model from full attention once the context outgrows the window', async () => {
    // Guards the test above: were the window ignored on both sides, it would still pass.
    const opened = await openFixture('mistral', 'hf-F32');
    const windowed = await ReferenceModel.load(opened);
    const full = await ReferenceModel.load({ ...opened, config: { ...opened.config, slidingWindow: null } });
    const ids = Array.from({ length: WINDOW + 4 }, (_, i) => (i * 31 + 5) % opened.config.vocabSize);
    const a = logitsFor(windowed, ids);
    const b = logitsFor(full, ids);
    expect(maxAbsDiffAll(a.slice(0, WINDOW), b.slice(0, WINDOW))).toBe(0);
    expect(maxAbsDiffAll(a.slice(WINDOW), b.slice(WINDOW))).toBeGreaterThan(100 * LOGIT_TOLERANCE);
  });
});
