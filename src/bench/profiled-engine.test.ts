/**
 * A profiled run of the real engine (Node only: the fixture is served over HTTP from this process):
 * every dispatch carries its op's label and bytes, and the per-op times add up.
 */
import { describe, expect, it } from 'vitest';
import { GpuEngine } from '../engine/engine';
import { actBytes } from '../kernels/op';
import { gpuBytesPerRow } from '../kernels/weights';
import { openModel } from '../model/open';
import { generateGreedy } from '../testing/engine-check';
import { useFixtureURLs } from '../testing/fixture-server';
import { testGPU } from '../testing/gpu';
import { aggregateByOp, stepTotals, TimestampProfiler, UNLABELLED } from './profiler';

describe('a profiled engine run', () => {
  const urls = useFixtureURLs('llama');

  // f16 needs shader-f16 (lavapipe, not SwiftShader): run it with the lavapipe ICD and `-t f16`.
  it.for(['f32', 'f16'] as const)('labels every dispatch with its op, layer and bytes, and its per-op times add up to the GPU time (%s)', async (precision, ctx) => {
    const gpu = await testGPU();
    if (!gpu.info.timestamps || (precision === 'f16' && !gpu.info.f16)) ctx.skip();
    const opened = await openModel(urls()['Q8_0']!);
    const engine = await GpuEngine.load(opened, { gpu, contextLength: 64, precision });
    const profiler = new TimestampProfiler(gpu.device);
    engine.profiler = profiler;
    try {
      await generateGreedy(engine, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 3);
      const steps = await profiler.collect();
      expect(steps).toHaveLength(3); // the 12-token prompt's step, then two decode steps
      const c = engine.config;
      for (const step of steps) {
        for (const d of step.dispatches) {
          expect(d.role, d.kernel).not.toBe(UNLABELLED);
          expect(d.bytes, `${d.role} ${d.kernel}`).toBeGreaterThan(0);
          expect(Number.isFinite(d.bytes)).toBe(true);
        }
        const byOp = aggregateByOp([step]);
        const t = stepTotals(step);
        // Per-op times sum to the step's dispatch time, which fits in the step's GPU span.
        expect(byOp.reduce((n, o) => n + o.ms, 0) * 1e6).toBeCloseTo(t.ns, 0);
        expect(t.ns).toBeLessThanOrEqual(t.spanNs);
        expect(byOp.reduce((n, o) => n + o.bytes, 0)).toBe(t.bytes);
      }
      const decode = steps[2]!.dispatches;
      // Ops outside the layers: the embedding before them, the head and the sampler after.
      const OUTSIDE = new Set(['feed', 'embed', 'gather_last', 'output_norm', 'lm_head', 'logits_scale', 'sample', 'penalties', 'apply_mask']);
      // Every other dispatch names its layer, and every layer has the same dispatches; a linear
      // layer the forward pass did not label would show as the builder's default role, `linear`.
      const inLayers = decode.filter((d) => !OUTSIDE.has(d.role!));
      expect(inLayers.filter((d) => d.layer === undefined).map((d) => d.role)).toEqual([]);
      expect(decode.filter((d) => d.role === 'linear')).toEqual([]);
      const layerRoles = (l: number) => inLayers.filter((d) => d.layer === l).map((d) => d.role);
      for (let l = 1; l < c.numLayers; l++) expect(layerRoles(l)).toEqual(layerRoles(0));
      expect(decode.filter((d) => d.role === 'lm_head')).toHaveLength(1);
      // No kv_write: on RoPE layers the rope dispatch writes the cache (rope.wgsl's KV).
      for (const role of ['embed', 'o', 'down', 'attention', 'rope', 'sample']) expect(decode.some((d) => d.role === role), role).toBe(true);
      // A decode step's q projection (or a fused q/k/v) reads its weight once, plus one token's input and output rows.
      const q = decode.find((d) => d.layer === 0 && (d.role === 'q' || d.role === 'qkv'))!;
      const wq = opened.tensors.get('blk.0.attn_q.weight')!.info;
      const qRows = (q.role === 'q' ? c.numHeads : c.numHeads + 2 * c.numKvHeads) * c.headDim;
      // Its input is the residual stream (f32 at every precision) where the norm folds into it.
      const xBytes = q.bytes! - qRows * gpuBytesPerRow(wq.dtype, c.hiddenSize) - qRows * actBytes(precision);
      expect([c.hiddenSize * 4, c.hiddenSize * actBytes(precision)]).toContain(xBytes);
      // Decode attention reads the whole context's K and V: 14 keys at the last step (12 + 2).
      const attnKv = 14 * 2 * c.numKvHeads * c.headDim * actBytes(precision);
      const attn = decode.filter((d) => d.role === 'attention' && d.layer === 0);
      expect(attn.reduce((n, d) => n + d.bytes!, 0)).toBeGreaterThan(attnKv);
    } finally {
      engine.profiler = null;
      profiler.destroy();
      await engine.dispose();
    }
  });
});
