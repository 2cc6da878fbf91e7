/**
 * Dispatches per decode step (issue #14 part 2): counted from outside, through the engine's
 * profiler hook, on the tiny llama fixture, so a change that unfuses a projection, its epilogue or
 * its folded norm fails here. Where it stands: per layer the fused q/k/v projection (the norm
 * folded), rope (+ the KV cache write), attention (one split at this context, so no combine pass),
 * o (+ the residual add), gate and up as one matrix (the norm folded, act(gate)·up in its
 * epilogue), down (+ the residual add): 6. The step around the layers: feed,
 * embed, the last rows' gather, the head (its norm folded), the sampler.
 */
import { describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { GpuEngine, type StepProfiler } from './engine';
import { generateGreedy } from '../testing/engine-check';

/** Counts the dispatches of each step's passes (a masked step's two command buffers are one step). */
class DispatchCounter implements StepProfiler {
  steps: number[] = [];
  begin(encoder: GPUCommandEncoder, resume?: boolean): GPUComputePassEncoder {
    if (!resume) this.steps.push(0);
    const pass = encoder.beginComputePass();
    const dispatch = pass.dispatchWorkgroups.bind(pass);
    pass.dispatchWorkgroups = (x: number, y?: number, z?: number) => {
      this.steps[this.steps.length - 1]!++;
      dispatch(x, y, z);
    };
    return pass;
  }
  end(): void {}
}

/** The bound this test holds the engine to: per decode layer, and for the rest of the step. */
const PER_LAYER = 6;
const REST = 6;

describe('dispatches per decode step', () => {
  it(`stay within ${PER_LAYER} per layer + ${REST} on the tiny llama fixture (Q4_0)`, async () => {
    const gpu = await testGPU();
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
    const opened = await openModel(paths.gguf.Q4_0!);
    // integerDot: where the device has it, the decode matvecs are matvec_dot's, which must keep
    // the count (each quantises its input in its own prologue, no dispatch of its own).
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f32', integerDot: true });
    try {
      const counter = new DispatchCounter();
      engine.profiler = counter;
      await generateGreedy(engine, [1, 2, 3], 4);
      engine.profiler = null;
      // The first step is the prompt's; the others decode one token each.
      const decode = counter.steps.slice(1);
      expect(decode.length).toBeGreaterThanOrEqual(3);
      const L = opened.config.numLayers;
      for (const n of decode) expect(n, `dispatches per decode step: ${decode.join(', ')}`).toBeLessThanOrEqual(PER_LAYER * L + REST);
    } finally {
      await engine.dispose();
    }
  }, 180_000);
});
