import { describe, expect, it } from 'vitest';
import type { GPUDescription } from '../gpu/device';
import { formatReport, type BenchReport } from './report';
import { bytesPerDecodedToken, benchPrompt, type ModelBenchResult } from './run';
import { aggregateByKernel, kernelName } from './profiler';
import { benchConstraintSpec, maskOverhead, msPerGeneratedToken } from './structured';
import { defaultPreset, EMULATED_SETTINGS, FULL_SETTINGS, resolveSettings } from './target';

describe('bench arithmetic', () => {
  it('counts the matrices, the KV read at the given context, and one embedding row per decoded token', () => {
    const bytes = bytesPerDecodedToken({ matrixBytes: 1000, layers: 2, kvHeads: 2, headDim: 4, actBytes: 2, context: 10, embeddingRowBytes: 7 });
    // KV: 2 layers × (K and V) × 10 positions × 2 heads × 4 dims × 2 bytes = 640
    expect(bytes).toBe(1000 + 640 + 7);
  });

  it('names kernels by their pipeline label and averages their time per step', () => {
    expect(kernelName('matvec/f32/WG=64,WTYPE=2')).toBe('matvec');
    const steps = [
      { dispatches: [{ kernel: 'matvec/f32/A', ns: 3e6 }, { kernel: 'matvec/f32/B', ns: 1e6 }, { kernel: 'add/f32/', ns: 1e6 }] },
      { dispatches: [{ kernel: 'matvec/f32/A', ns: 5e6 }, { kernel: 'matvec/f32/B', ns: 1e6 }, { kernel: 'add/f32/', ns: 3e6 }] },
    ];
    const byKernel = aggregateByKernel(steps);
    expect(byKernel.map((k) => k.kernel)).toEqual(['matvec', 'add']);
    expect(byKernel[0]).toMatchObject({ calls: 2, ms: 5, share: 10 / 14 });
    expect(byKernel[1]).toMatchObject({ calls: 1, ms: 2, share: 4 / 14 });
    expect(aggregateByKernel([])).toEqual([]);
  });

  it('times decode over the generated tokens after the first, and the mask as the constrained run minus the free one', () => {
    // tokens at 100 (prefill), 150, 200, 250 ms: 3 steps of 50 ms
    expect(msPerGeneratedToken([100, 150, 200, 250])).toBe(50);
    expect(msPerGeneratedToken([100])).toBeNaN();
    expect(maskOverhead(80, 50)).toEqual({ maskMsPerToken: 30, tokensPerSecond: 12.5 });
  });

  it('asks the constrained run for at least one array item per decoded token', () => {
    const spec = benchConstraintSpec(16);
    expect(spec.kind).toBe('json_schema');
    expect(spec.kind === 'json_schema' && JSON.stringify(spec.schema)).toContain('"minItems":17');
  });

  it('makes prompts of the asked length inside the vocabulary, different per salt', () => {
    const a = benchPrompt(50, 97, 0);
    expect(a).toHaveLength(50);
    expect(a.every((id) => id >= 0 && id < 97)).toBe(true);
    expect(benchPrompt(50, 97, 1)).not.toEqual(a);
  });
});

describe('bench settings', () => {
  it('caps the sizes on an emulated adapter and says so, unless the lengths were asked for', () => {
    const capped = resolveSettings(true, {});
    expect(capped.settings).toEqual(EMULATED_SETTINGS);
    expect(capped.notes.join(' ')).toMatch(/capped/);
    const asked = resolveSettings(true, { promptLengths: [128, 1024], decodeTokens: undefined });
    expect(asked.settings.promptLengths).toEqual([128, 1024]);
    expect(asked.settings.decodeTokens).toBe(EMULATED_SETTINGS.decodeTokens);
    expect(asked.notes.join(' ')).not.toMatch(/capped/);
    expect(capped.notes.join(' ')).toMatch(/batching runs shortened: 16-token prompts and 16 tokens per stream .* 512-token repeated prefix/);
    expect(capped.notes.join(' ')).toMatch(/goals .* are for real GPUs/);
    const full = resolveSettings(true, { streamPromptTokens: 128, streamTokens: 64, prefixTokens: 2048 });
    expect(full.settings).toMatchObject({ streams: [1, 2, 4, 8, 16], streamPromptTokens: 128, streamTokens: 64, prefixTokens: 2048 });
    expect(full.notes.join(' ')).not.toMatch(/shortened/);
    expect(resolveSettings(true, { streams: [] }).settings.streams).toEqual([]);
    expect(resolveSettings(false, {})).toEqual({ settings: FULL_SETTINGS, notes: [] });
    expect(FULL_SETTINGS).toMatchObject({ streams: [1, 2, 4, 8, 16], streamPromptTokens: 128, streamTokens: 64, prefixTokens: 2048 });
  });

  it('runs the 1B-shaped fixtures by default on a real GPU and the small preset on an emulated one', () => {
    const gpu = { vendor: 'nvidia', architecture: 'hopper', isFallbackAdapter: false } as GPUDescription;
    expect(defaultPreset(gpu)).toBe('1b');
    expect(defaultPreset({ ...gpu, isFallbackAdapter: true })).toBe('small');
    expect(defaultPreset({ ...gpu, vendor: 'google', architecture: 'swiftshader' })).toBe('small');
    expect(FULL_SETTINGS.promptLengths).toEqual([128, 1024]);
  });
});

describe('the bench report', () => {
  it('prints one row per format, failures included, and the kernel breakdown', () => {
    const model: ModelBenchResult = {
      format: 'Q4_0',
      model: { arch: 'llama', layers: 2, hidden: 8, intermediate: 16, vocab: 10 },
      precision: 'f32',
      loadMs: 1234,
      prefill: [{ promptTokens: 16, ttftMs: 100, tokensPerSecond: 160 }],
      decode: { promptTokens: 16, tokens: 4, tokensPerSecond: 20, msPerToken: 50, meanContext: 18 },
      structured: { constraint: 'json', tokens: 4, finishReason: 'length', tokensPerSecond: 12.5, msPerToken: 80, maskMsPerToken: 30 },
      memory: { peakBytes: 3 * 1024 * 1024, matrixBytes: 1, kvCacheBytes: 1 },
      bandwidth: { copyGBps: 2, bytesPerToken: 1024 * 1024, decodeGBps: 0.02, ratio: 0.01 },
      breakdown: { decode: [{ kernel: 'matvec', calls: 15, ms: 1.5, share: 0.75 }], prefill: [{ kernel: 'matmul', calls: 14, ms: 9, share: 0.9 }], prefillTokens: 16 },
      batching: { error: 'Error: no room' },
    };
    const report: BenchReport = {
      date: '2026-01-01',
      preset: 'tiny',
      arch: 'llama',
      targets: [
        {
          target: 'node',
          adapter: { vendor: 'google', architecture: 'swiftshader', description: 'SwiftShader', isFallbackAdapter: true, f16: false, timestamps: true },
          emulated: true,
          settings: { ...EMULATED_SETTINGS, promptLengths: [16] },
          notes: ['a note'],
          models: [model, { format: 'F16', error: 'Error: boom' }],
        },
      ],
    };
    const text = formatReport(report);
    expect(text).toMatch(/prefill@16 tok\/s/);
    expect(text).toMatch(/JSON tok\/s +mask ms\/token/);
    expect(text).toMatch(/^Q4_0 +1234 +160\.0 +100 +20\.00 +12\.50 +30\.00 +3\.0 +1\.00 +0\.020 +2\.000 +0\.010$/m);
    expect(text).toMatch(/F16 +FAILED: Error: boom/);
    expect(text).toMatch(/^matvec +15 +1\.500 +75\.0/m);
    expect(text).toMatch(/^matmul .*9\.000 +90\.0$/m);
    expect(text).toContain('note: a note');
    expect(text).toContain('node Q4_0: continuous batching FAILED: Error: no room');
    expect(text).not.toMatch(/grammar mask per token/);
  });

  it('prints the CPU mask timing per vocabulary size when the report has it', () => {
    const report: BenchReport = {
      date: '2026-01-01',
      preset: '-',
      arch: '-',
      targets: [],
      maskCost: [{ vocab: 128256, constraint: 'json_schema', tokens: 270, compileMs: 1170.4, meanMs: 0.0812, p50Ms: 0.0165, p95Ms: 0.0262, maxMs: 34.2 }],
    };
    const text = formatReport(report);
    expect(text).toMatch(/grammar mask per token/);
    expect(text).toMatch(/vocab +tokens +compile ms +mask ms\/token +p50 ms +p95 ms +max ms/);
    expect(text).toMatch(/^128256 +270 +1170 +0\.081 +0\.017 +0\.026 +34\.20$/m);
  });
});
