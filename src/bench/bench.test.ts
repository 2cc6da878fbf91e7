import { describe, expect, it } from 'vitest';
import type { GPUDescription } from '../gpu/device';
import { formatReport, type BenchReport } from './report';
import { benchPrompt } from './batching';
import { layerCacheKinds } from '../engine/layer-cache';
import { configFromHF } from '../model/config-hf';
import { makeFixture } from '../testing/fixtures/model';
import { bytesPerDecodedToken, type ModelBenchResult } from './run';
import { aggregateByKernel, aggregateByOp, gbps, kernelName, stepTotals, UNLABELLED, type ProfiledStep } from './profiler';
import { fittingContexts, summarizeProfile } from './decode';
import { formatContexts, formatMtp, formatOps, formatRestart, formatSpeculative, formatToolCall } from './report';
import { benchMtp, edited } from './speculative';
import type { GenerateRequest } from '../engine/types';
import type { GpuEngine } from '../engine/engine';
import { benchConstraintSpec, maskOverhead, msPerGeneratedToken } from './structured';
import { chromiumVerdict, defaultPreset, EMULATED_SETTINGS, FULL_SETTINGS, resolveSettings } from './target';

describe('bench arithmetic', () => {
  it('counts the matrices, the KV read at the given context, and one embedding row per decoded token', () => {
    const attention = { kind: 'paged-kv', kvHeads: 2, headDim: 4 } as const;
    const bytes = bytesPerDecodedToken({ matrixBytes: 1000, caches: [attention, attention], actBytes: 2, context: 10, embeddingRowBytes: 7 });
    // KV: 2 layers × (K and V) × 10 positions × 2 heads × 4 dims × 2 bytes = 640
    expect(bytes).toEqual({ weights: 1007, kv: 640, state: 0, total: 1647 });
  });

  it('counts a hybrid’s recurrent layers by their slot state (read and written), the same at any context', () => {
    const hybrid = layerCacheKinds(configFromHF(makeFixture({ arch: 'lfm2', preset: 'tiny' }).config));
    expect(hybrid.map((k) => k.kind)).toEqual(['slot-state', 'paged-kv', 'slot-state']);
    const at = (context: number) => bytesPerDecodedToken({ matrixBytes: 1000, caches: hybrid, actBytes: 4, context, embeddingRowBytes: 0 });
    // LFM2 tiny: a conv state of (3 − 1) × 256 f32 per conv layer; 2 KV heads of 64 on the attention layer
    expect(at(1024)).toEqual({ weights: 1000, kv: 2 * 1024 * 2 * 64 * 4, state: 2 * 2 * 512 * 4, total: 1000 + 2 * 1024 * 512 + 8192 });
    expect(at(8192).state).toBe(at(1024).state);
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

  it('adds time and bytes up per op role over layers, with GB/s and the share of copy bandwidth', () => {
    // Two steps; q of two layers and the head; times in ns, bytes per dispatch.
    const steps: ProfiledStep[] = [
      {
        dispatches: [
          { kernel: 'matvec/a', role: 'q', layer: 0, bytes: 4e6, ns: 2e6 },
          { kernel: 'matvec/a', role: 'q', layer: 1, bytes: 4e6, ns: 2e6 },
          { kernel: 'matvec/b', role: 'lm_head', bytes: 10e6, ns: 4e6 },
        ],
        spanNs: 9e6,
      },
      {
        dispatches: [
          { kernel: 'matvec/a', role: 'q', layer: 0, bytes: 4e6, ns: 1e6 },
          { kernel: 'matvec/a', role: 'q', layer: 1, bytes: 4e6, ns: 3e6 },
          { kernel: 'matvec/b', role: 'lm_head', bytes: 10e6, ns: 4e6 },
          { kernel: 'add/x', ns: 0 },
        ],
      },
    ];
    const ops = aggregateByOp(steps, 4);
    expect(ops.map((o) => o.role)).toEqual(['q', 'lm_head', UNLABELLED]);
    // q: 8 MB in 4 ms per step = 2 GB/s, half of the 4 GB/s copy; 8 of 16 ms in all.
    expect(ops[0]).toEqual({ role: 'q', calls: 2, ms: 4, bytes: 8e6, gbPerSecond: 2, share: 0.5, copyShare: 0.5 });
    expect(ops[1]).toEqual({ role: 'lm_head', calls: 1, ms: 4, bytes: 10e6, gbPerSecond: 2.5, share: 0.5, copyShare: 0.625 });
    // No time: no rate and no share of copy, rather than Infinity.
    expect(ops[2]).toMatchObject({ calls: 0.5, ms: 0, bytes: 0, share: 0, copyShare: null });
    expect(ops[2]!.gbPerSecond).toBeNaN();
    expect(aggregateByOp(steps)[0]!.copyShare).toBeNull();
    expect(gbps(3e9, 1e9)).toBe(3);
    expect(stepTotals(steps[0]!)).toEqual({ dispatches: 3, ns: 8e6, spanNs: 9e6, bytes: 18e6 });
    // Without a span the summed time stands in for it.
    expect(stepTotals(steps[1]!).spanNs).toBe(8e6);

    const p = summarizeProfile(steps, 9e6, 4)!;
    expect(p).toMatchObject({ steps: 2, dispatchesPerStep: 3.5, gpuMs: 8, spanMs: 8.5, bytes: 18e6, bytesPerGgufByte: 2, gbPerSecond: 2.25, copyShare: 0.5625 });
    expect(summarizeProfile([], 1, null)).toBeNull();
  });

  it('keeps only the decode contexts that fit the model with their decoded tokens', () => {
    expect(fittingContexts([1024, 4096, 8192], 4096, 64)).toEqual({ contexts: [1024], dropped: [4096, 8192] });
    expect(fittingContexts([1024, 4096], 131072, 64)).toEqual({ contexts: [1024, 4096], dropped: [] });
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
    expect(capped.notes.join(' ')).toMatch(/decode at 128 and 512 tokens of context only/);
    expect(resolveSettings(true, { decodeContexts: [1024] }).notes.join(' ')).not.toMatch(/of context only/);
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

describe('the Chromium target', () => {
  const real = { vendor: 'nvidia', architecture: 'hopper', description: 'H100', isFallbackAdapter: false } as GPUDescription;
  const swift = { vendor: 'google', architecture: 'swiftshader', description: 'SwiftShader', isFallbackAdapter: true } as GPUDescription;
  it('is skipped with the reason when its adapter is emulated and Node has a GPU; an error under WEBGPU_LLM_REAL_GPU', () => {
    expect(chromiumVerdict(real, real, false)).toEqual({ run: true });
    expect(chromiumVerdict(swift, swift, false)).toEqual({ run: true });
    const v = chromiumVerdict(swift, real, false);
    expect(v.run).toBe(false);
    expect(!v.run && v.reason).toMatch(/Chromium's adapter is CPU-emulated .*swiftshader.* while Node's is not .*hopper/);
    expect(() => chromiumVerdict(swift, swift, true)).toThrow(/WEBGPU_LLM_REAL_GPU/);
    expect(chromiumVerdict(real, swift, true)).toEqual({ run: true });
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

  it('prints the per-op table and decode at each context', () => {
    const m = { bandwidth: { copyTimestampGBps: 4 } } as ModelBenchResult;
    const ops = formatOps('node Q4_0', m, [{ role: 'q', calls: 2, ms: 4, bytes: 8 * 1024 * 1024, gbPerSecond: 2.1, share: 0.5, copyShare: 0.525 }], null, 16).join('\n');
    expect(ops).toMatch(/copy kernel's 4\.00 GB\/s \(timestamps\)/);
    expect(ops).toMatch(/^q +2 +4\.000 +50\.0 +8\.000 +2\.10 +52\.5$/m);
    const figures = { tokens: 15, steps: 15, tokensPerSecond: 20, dispatchesPerStep: 38, dispatchesPerToken: 35.5, hostMsPerStep: 1.5, submitMsPerStep: 0.5, stepMs: 50, hostShare: 0.03, gpuBusyShare: 0.9 };
    const ctx = formatContexts('node Q4_0', {
      results: [{ context: 1024, greedy: figures, sampled: { ...figures, tokensPerSecond: 19 }, profile: null }],
      dropped: [4096, 8192],
    }).join('\n');
    expect(ctx).toMatch(/^1024 +20\.00 +19\.00 +38\.0 +1\.500 +50\.00 +3\.0 +90\.0 +- +- +- +- +-$/m);
    expect(ctx).toMatch(/not run .*: 4096, 8192/);
    expect(formatContexts('x', { error: 'Error: boom' })).toEqual(['x: decode at long contexts FAILED: Error: boom']);
  });

  it('prints the forced tool call token by token, with jump-forward and unconstrained, and flags changed tokens', () => {
    const run = { tokens: 40, steps: 40, tokensPerStep: 1, msPerToken: 90, finishReason: 'stop' };
    const b = { constraint: 'tool', tokenByToken: run, jumpForward: { ...run, steps: 14, tokensPerStep: 39 / 13, msPerToken: 35.25 }, free: { ...run, msPerToken: 30, finishReason: 'length' }, identical: true };
    const text = formatToolCall('node Q8_0', b).join('\n');
    expect(text).toMatch(/^token by token +40 +40 +1\.00 +90\.0 +stop$/m);
    expect(text).toMatch(/^jump-forward +40 +14 +3\.00 +35\.3 +stop$/m);
    expect(text).toMatch(/^unconstrained +40 +40 +1\.00 +30\.0 +length$/m);
    expect(text).not.toMatch(/CHANGED/);
    expect(formatToolCall('x', { ...b, identical: false })[0]).toMatch(/JUMP-FORWARD CHANGED THE TOKENS/);
  });

  it('prints speculative decoding per proposer with its ratios to no speculation, and flags changed tokens', () => {
    const none = { tokens: 33, steps: 33, tokensPerStep: 1, msPerToken: 20, proposed: 0, accepted: 0 };
    const b = { none, copy: { ...none, steps: 3, tokensPerStep: 16, msPerToken: 5, proposed: 30, accepted: 30 }, edited: { ...none, steps: 9, tokensPerStep: 4, msPerToken: 8, proposed: 40, accepted: 24 }, ngram: none, identical: true };
    const text = formatSpeculative('node Q8_0', b, false).join('\n');
    expect(text).toMatch(/^none +33 +33 +1\.00 +1\.00 +50\.0 +1\.00 +0 +0$/m);
    expect(text).toMatch(/^prediction = output +33 +3 +16\.00 +16\.00 +200\.0 +4\.00 +30 +30$/m);
    expect(text).toMatch(/^prediction, 1\/16 edited +33 +9 +4\.00 +4\.00 +125\.0 +2\.50 +40 +24$/m);
    expect(text).not.toMatch(/CHANGED|emulated/);
    expect(formatSpeculative('x', { ...b, identical: false }, true)[0]).toMatch(/emulated GPU.*SPECULATION CHANGED THE TOKENS/);
    expect(edited([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 100)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 10, 10]);
    // A draft model's row, with its own steps.
    const drafted = formatSpeculative('x', { ...b, draft: { ...none, steps: 9, tokensPerStep: 4, msPerToken: 10, proposed: 32, accepted: 24, draftSteps: 32, draftTokens: 4 } }, false).join('\n');
    expect(drafted).toMatch(/^draft = itself \(k 4\) +33 +9 +4\.00 +4\.00 +100\.0 +2\.00 +32 +24 +32$/m);
    expect(text).not.toMatch(/draft/);
    // An older report (no mtp field) prints no MTP row; one with it, the row and what its figure means.
    expect(text).not.toMatch(/MTP/);
    const mtp = { ...none, steps: 32, tokensPerStep: 1, msPerToken: 26, proposed: 31, accepted: 0, k: 1, headMsPerStep: 4.5, headBytesPerGuess: 3 * 2 ** 20 };
    const withHead = formatSpeculative('x', { ...b, mtp }, false).join('\n');
    expect(withHead).toMatch(/^MTP head \(k 1\) +33 +32 +1\.00 +1\.00 +38\.5 +0\.77 +31 +0$/m);
    expect(withHead).toMatch(/0 of 31 guesses taken\. The fixture's head has random weights.*acceptance needs a real checkpoint.*overhead: 4\.50 ms a step \(one run, 1 guess\), 3\.000 MiB of weights read per guess/);
    const hybrid = formatMtp('qwen35 small Q8_0', { none, mtp, identical: false }, true).join('\n');
    expect(hybrid).toMatch(/emulated GPU.*SPECULATION CHANGED THE TOKENS/);
    expect(hybrid).toMatch(/^MTP head \(k 1\) +33 +32 /m);
    expect(hybrid).toMatch(/random weights/);
  });

  it('runs the MTP head without and with speculation, times the head on a slot it gives back, and compares the tokens', async () => {
    const asked: GenerateRequest[] = [];
    const runs: number[][] = [];
    const freed: number[] = [];
    let steps = 0;
    let changed = false;
    const engine = {
      config: { hiddenSize: 4, vocabSize: 50 },
      get kvStats() {
        return { steps };
      },
      mtpHead: {
        bytesPerGuess: 1234,
        drafter: { acquire: () => 3, release: (slot: number) => void freed.push(slot), head: { run: async (slot: number, hidden: Float32Array, next: number[], k: number) => (runs.push([slot, hidden.length, k]), [next[0]!]) } },
      },
      // 5 tokens in 5 steps; with speculation, 4 guesses and none taken; `changed`: the speculative run's last token differs.
      async *generate(r: GenerateRequest) {
        asked.push(r);
        for (let i = 0; i < r.maxTokens; i++) {
          steps++;
          yield { id: changed && r.speculation && i === r.maxTokens - 1 ? 9 : i, text: '' };
        }
        return { finishReason: 'length', ...(r.speculation ? { speculation: { proposed: r.maxTokens - 1, accepted: 0 } } : {}) };
      },
    } as unknown as Parameters<typeof benchMtp>[0];
    const b = (await benchMtp(engine, [1, 2, 3], 5, 2))!;
    // A warm-up with the head, then none, then the head (k as given).
    expect(asked.map((r) => r.speculation)).toEqual([{ mtp: { k: 2 } }, undefined, { mtp: { k: 2 } }]);
    expect(b.none).toMatchObject({ tokens: 5, steps: 5, tokensPerStep: 1, proposed: 0, accepted: 0 });
    expect(b.mtp).toMatchObject({ tokens: 5, steps: 5, proposed: 4, accepted: 0, k: 2, headBytesPerGuess: 1234 });
    expect(b.mtp.headMsPerStep).toBeGreaterThanOrEqual(0);
    expect(b.identical).toBe(true);
    // One warm-up run and 8 timed, one row each of the hidden size and k guesses, on the slot acquired, released after.
    expect(runs).toHaveLength(9);
    expect(runs.every(([slot, n, k]) => slot === 3 && n === 4 && k === 2)).toBe(true);
    expect(freed).toEqual([3]);
    changed = true;
    expect((await benchMtp(engine, [1], 5))!.identical).toBe(false);
    expect(await benchMtp({ ...engine, mtpHead: undefined } as typeof engine, [1], 5)).toBeUndefined();
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

describe('the KV persistence line', () => {
  it('gives TTFT after a restart over cold, and says when the first token differs or the part failed', () => {
    const r = { promptTokens: 2048, coldMs: 1000, restartMs: 150, ratio: 0.15, cachedTokens: 2032, identical: true };
    expect(formatRestart('gpu Q4_0', r)).toBe('gpu Q4_0: 2048-token prompt, first token cold 1000 ms, after a restart 150 ms (2032 tokens from storage): ratio 0.150 (goal ≤ 0.2)');
    expect(formatRestart('gpu Q4_0', { ...r, identical: false })).toMatch(/THE FIRST TOKEN DIFFERS$/);
    expect(formatRestart('gpu Q4_0', { error: 'Error: disk' })).toBe('gpu Q4_0: KV persistence FAILED Error: disk');
  });
});
