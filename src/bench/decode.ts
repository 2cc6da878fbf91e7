/**
 * Decode at long contexts (issue #14: 1k, 4k and 8k on a real GPU): for each context, one prompt
 * of that many tokens, then greedy decode and sampled decode (temperature 0.7, top-k 40, top-p 0.9)
 * from the same cached prompt, each with its dispatches per token, host ms per step and the GPU's
 * busy share of the wall time (batching.ts's step hooks, one stream); then a few profiled decode
 * steps: GPU time, bytes and GB/s per op (q, k, …, attention, lm_head) against the copy yardstick.
 * On an engine of its own, sized for the longest context.
 */
import { GpuEngine } from '../engine/engine';
import type { SamplingParams } from '../engine/types';
import type { GPUContext } from '../gpu/device';
import type { OpenedModel } from '../model/open';
import { GREEDY } from '../testing/sampling';
import { benchPrompt, consume, levelFigures, StepHooks, type StreamLevelResult } from './batching';
import { aggregateByKernel, aggregateByOp, stepTotals, TimestampProfiler, type KernelTime, type OpTime, type ProfiledStep } from './profiler';

/** The sampled decode: temperature 0.7, top-k 40, top-p 0.9. */
export const SAMPLED: SamplingParams = { ...GREEDY, temperature: 0.7, topK: 40, topP: 0.9 };

/** One decode run's step figures (a 1-stream level of batching.ts, renamed where it helps). */
export type DecodeFigures = Pick<StreamLevelResult, 'tokens' | 'steps' | 'tokensPerSecond' | 'dispatchesPerStep' | 'dispatchesPerToken' | 'hostMsPerStep' | 'submitMsPerStep' | 'stepMs' | 'hostShare' | 'gpuBusyShare'>;

/** Profiled decode steps: their totals per step and the per-op and per-kernel split. */
export interface DecodeProfile {
  steps: number;
  dispatchesPerStep: number;
  /** Summed dispatch GPU ms per step (one timed pass per dispatch). */
  gpuMs: number;
  /** First dispatch's start to last one's end, per step: gpuMs plus the gaps between passes. */
  spanMs: number;
  /** Bytes a step's dispatches must read and write (their declared bytes, summed). */
  bytes: number;
  /** bytes ÷ the GGUF file's tensor bytes: 1 would be reading the weights once and nothing else. */
  bytesPerGgufByte: number;
  /** bytes ÷ gpuMs, GB/s. */
  gbPerSecond: number;
  /** gbPerSecond ÷ the copy yardstick's (null without one). */
  copyShare: number | null;
  ops: OpTime[];
  kernels: KernelTime[];
}

export interface ContextDecodeResult {
  /** Prompt tokens before decoding. */
  context: number;
  greedy: DecodeFigures | null;
  sampled: DecodeFigures | null;
  profile: DecodeProfile | null;
}

export interface DecodeContextSettings {
  decodeContexts: number[];
  decodeTokens: number;
  profileSteps: number;
  prefillChunk: number;
  integerDot?: boolean;
}

/** Totals of profiled steps, per step; the per-op split against `copyGBps`. */
export function summarizeProfile(steps: readonly ProfiledStep[], ggufBytes: number, copyGBps: number | null): DecodeProfile | null {
  if (steps.length === 0) return null;
  const totals = steps.map(stepTotals);
  const mean = (f: (t: (typeof totals)[number]) => number) => totals.reduce((n, t) => n + f(t), 0) / totals.length;
  const ns = mean((t) => t.ns);
  const bytes = mean((t) => t.bytes);
  const gbPerSecond = ns > 0 ? bytes / ns : NaN;
  return {
    steps: steps.length,
    dispatchesPerStep: mean((t) => t.dispatches),
    gpuMs: ns / 1e6,
    spanMs: mean((t) => t.spanNs) / 1e6,
    bytes,
    bytesPerGgufByte: bytes / ggufBytes,
    gbPerSecond,
    copyShare: copyGBps && Number.isFinite(gbPerSecond) ? gbPerSecond / copyGBps : null,
    ops: aggregateByOp(steps, copyGBps),
    kernels: aggregateByKernel(steps),
  };
}

function figures(level: StreamLevelResult | null): DecodeFigures | null {
  if (!level) return null;
  const { tokens, steps, tokensPerSecond, dispatchesPerStep, dispatchesPerToken, hostMsPerStep, submitMsPerStep, stepMs, hostShare, gpuBusyShare } = level;
  return { tokens, steps, tokensPerSecond, dispatchesPerStep, dispatchesPerToken, hostMsPerStep, submitMsPerStep, stepMs, hostShare, gpuBusyShare };
}

/** The decode contexts that fit the model (longer ones are dropped, and said so in `dropped`). */
export function fittingContexts(asked: readonly number[], maxContext: number, decodeTokens: number): { contexts: number[]; dropped: number[] } {
  const fits = (n: number) => n + decodeTokens + 1 <= maxContext;
  return { contexts: asked.filter(fits), dropped: asked.filter((n) => !fits(n)) };
}

export async function benchDecodeContexts(
  gpu: GPUContext,
  opened: OpenedModel,
  format: string,
  s: DecodeContextSettings,
  yardstick: { copyGBps: number | null; ggufBytes: number },
  log: (line: string) => void = () => {},
): Promise<{ results: ContextDecodeResult[]; dropped: number[] }> {
  const { contexts, dropped } = fittingContexts(s.decodeContexts, opened.config.maxPositionEmbeddings, s.decodeTokens);
  for (const n of dropped) log(`${format}: decode at ${n} tokens of context skipped: the model's context is ${opened.config.maxPositionEmbeddings}`);
  if (contexts.length === 0) return { results: [], dropped };
  const contextLength = Math.max(...contexts) + s.decodeTokens + 8;
  const engine = await GpuEngine.load(opened, { gpu, contextLength, prefillChunk: s.prefillChunk, integerDot: s.integerDot, maxBatch: 1 });
  const timestamps = gpu.info.timestamps && gpu.device.features.has('timestamp-query');
  const hooks = new StepHooks(engine, gpu.device, timestamps);
  const vocab = engine.config.vocabSize;
  const request = (ids: number[], maxTokens: number, sampling: SamplingParams) => ({ promptIds: ids, maxTokens, sampling, stopTokenIds: [], ignoreEos: true, minTokens: 0, cachePrompt: true, seed: 1 });
  /** One decode of `tokens` after `ids` (prefilled by an earlier run: cached), with the hooks recording. */
  const run = async (ids: number[], sampling: SamplingParams) => {
    const stop = hooks.start();
    let arrivals;
    try {
      arrivals = (await consume(engine, hooks, request(ids, s.decodeTokens, sampling), performance.now())).arrivals;
    } finally {
      stop();
    }
    await hooks.collectGpuTimes();
    return figures(levelFigures([arrivals], hooks.steps));
  };
  try {
    // Warm-up: decode and sampled steps compile their pipelines on first use on some drivers.
    await consume(engine, hooks, request(benchPrompt(8, vocab, 700), 3, SAMPLED), performance.now());
    const results: ContextDecodeResult[] = [];
    for (const [i, n] of contexts.entries()) {
      const ids = benchPrompt(n, vocab, 710 + i);
      // The prompt once, so the timed runs start from the prefix cache and time decode alone.
      const t0 = performance.now();
      await consume(engine, hooks, request(ids, 1, GREEDY), t0);
      log(`${format}: ${n}-token context prefilled in ${(performance.now() - t0).toFixed(0)} ms`);
      const greedy = await run(ids, GREEDY);
      const sampled = await run(ids, SAMPLED);
      let profile: DecodeProfile | null = null;
      if (timestamps) {
        const profiler = new TimestampProfiler(gpu.device);
        engine.profiler = profiler;
        try {
          await consume(engine, hooks, request(ids, s.profileSteps + 1, GREEDY), performance.now());
          const [, ...decodeSteps] = await profiler.collect(); // the first step is the cached prompt's last token
          profile = summarizeProfile(decodeSteps, yardstick.ggufBytes, yardstick.copyGBps);
        } finally {
          engine.profiler = null;
          profiler.destroy();
        }
      }
      results.push({ context: n, greedy, sampled, profile });
      const f = (x: number | undefined, d = 1) => (x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d));
      log(
        `${format}: decode at ${n}: greedy ${f(greedy?.tokensPerSecond)} tok/s, sampled ${f(sampled?.tokensPerSecond)} tok/s, ` +
          `${f(greedy?.dispatchesPerStep)} dispatches/step (one token each), host ${f(greedy?.hostMsPerStep, 2)} ms/step` +
          (profile ? `, ${f(profile.bytesPerGgufByte, 3)}× the GGUF's bytes per token at ${f(profile.gbPerSecond, 2)} GB/s` : ''),
      );
    }
    return { results, dropped };
  } finally {
    await engine.dispose();
  }
}
