/**
 * selfcheck on the test GPU (SwiftShader in Node; lavapipe for the f16 case): a sample of its
 * kernel and model checks passes, a GPU that computes another model than the reference fails, and a
 * precision the adapter lacks is reported, not skipped. The whole check (about 2 minutes here) is
 * run by the CLI and the pack (tools/gpu-pack.test.ts runs it through the pack's run.sh).
 */
import { describe, expect, it } from 'vitest';
import { GpuEngine } from '../engine/engine';
import { concatChunks } from '../formats/byte-writer';
import { memorySource } from '../formats/source';
import { openModel } from '../model/open';
import { ReferenceModel } from '../reference/forward';
import { compareEngineWithReference } from '../testing/engine-compare';
import { encodeFixtureGGUF } from '../testing/fixtures/encode';
import { makeFixture } from '../testing/fixtures/model';
import { testGPU } from '../testing/gpu';
import { LOGIT_TOLERANCE } from '../testing/tolerances';
import { formatReport } from './format';
import { KERNEL_CHECKS } from './kernel-checks';
import { MODEL_CHECKS } from './model-checks';
import { passes, runSelfCheck } from './run';

const SAMPLE = ['kernel rope', 'kernel rms_norm', 'kernel elementwise', 'kernel short_conv', 'engine qwen3 Q8_0'];

describe('selfcheck', () => {
  it('passes a sample of its kernel and model checks on the test GPU, with errors within the tests\' tolerances', async () => {
    const gpu = await testGPU();
    const seen: string[] = [];
    const r = await runSelfCheck(gpu, { precision: 'f32', only: SAMPLE, onResult: (x) => seen.push(`${x.check} ${x.name}`) });
    expect(r.adapter.description).toBe(gpu.info.description);
    expect(r.adapter.features).toEqual([...gpu.device.features].map(String).sort());
    expect(r.adapter.limits.maxStorageBufferBindingSize).toBe(gpu.device.limits.maxStorageBufferBindingSize);
    // rope (2 layouts), rms_norm, glu ×2, add, softcap, short_conv, and the model.
    expect(r.results.map((x) => `${x.check} ${x.name}`)).toEqual(seen);
    expect(r.results.length).toBe(9);
    for (const x of r.results) expect(x.maxError, `${x.check} ${x.name}`).toBeLessThanOrEqual(x.tolerance);
    expect(r.results.find((x) => x.group === 'model')!.tolerance).toBe(LOGIT_TOLERANCE);
    expect(r.pass).toBe(true);
    expect(formatReport(r)).toMatch(/^PASS: 9 of 9 checks passed/m);
  });

  it('passes in f16 where the adapter has shader-f16 (lavapipe)', async (ctx) => {
    const gpu = await testGPU();
    if (!gpu.info.f16) ctx.skip();
    const r = await runSelfCheck(gpu, { precision: 'f16', only: SAMPLE });
    expect(r.precisions).toEqual(['f16']);
    expect(r.results.length).toBe(9);
    expect(r.results.filter((x) => !x.pass)).toEqual([]);
    expect(r.pass).toBe(true);
  });

  it('reports a precision the adapter cannot run as a failure, not a pass', async (ctx) => {
    const gpu = await testGPU();
    if (gpu.info.f16) ctx.skip();
    const r = await runSelfCheck(gpu, { precision: 'f16' });
    expect(r.unavailable).toEqual(['f16']);
    expect(r.results).toEqual([]);
    expect(r.pass).toBe(false);
  });

  it('fails a GPU that computes something else: the engine running one model, the reference another', async () => {
    const gpu = await testGPU();
    const open = (seed: number) => openModel(memorySource(concatChunks(encodeFixtureGGUF(makeFixture({ arch: 'qwen3', preset: 'tiny', seed }), 'Q8_0')), `qwen3-${seed}.gguf`));
    const [a, b] = await Promise.all([open(0), open(1)]);
    const engine = await GpuEngine.load(a, { gpu, precision: 'f32' });
    try {
      const r = await compareEngineWithReference(engine, await ReferenceModel.load(b), [1, 2, 3, 4, 5, 6, 7, 8], 2, LOGIT_TOLERANCE, { sampled: false });
      expect(r.maxError).toBeGreaterThan(0.1);
      expect(passes({ maxError: r.maxError, tolerance: LOGIT_TOLERANCE })).toBe(false);
    } finally {
      await engine.dispose();
    }
  });

  it('judges NaN, a problem beside the error, and an error at the tolerance', () => {
    expect(passes({ maxError: NaN, tolerance: 1 })).toBe(false);
    expect(passes({ maxError: 0, tolerance: 1, problem: 'greedy token 3 at step 0, the reference 4' })).toBe(false);
    expect(passes({ maxError: 1, tolerance: 1 })).toBe(true);
    expect(passes({ maxError: 1.0001, tolerance: 1 })).toBe(false);
  });

  it('names every check once', () => {
    const names = KERNEL_CHECKS.map((k) => k.name);
    expect(new Set(names).size).toBe(names.length);
    const models = MODEL_CHECKS.map((m) => `${m.arch} ${m.format}`);
    expect(new Set(models).size).toBe(models.length);
    // Every model check that emulators run is a different block kind or path than the others: at least MoE, windows and norms.
    expect(MODEL_CHECKS.filter((m) => m.emulated).map((m) => m.arch)).toEqual(expect.arrayContaining(['llama', 'qwen3', 'gemma2', 'qwen3moe']));
  });
});
