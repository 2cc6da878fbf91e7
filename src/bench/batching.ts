/**
 * Continuous batching in the bench: aggregate decode throughput at 1, 2, 4, 8, 16 concurrent
 * streams, time to first token of a repeated long prefix (the prefix cache), and what one step
 * costs: dispatches per decoded token, host milliseconds to record and submit a step, and the
 * GPU's busy share of the wall time (from timestamp queries, when granted).
 *
 * Measurement hooks, all from outside the engine: `submit` is wrapped on the engine instance
 * (the scheduler calls it once per step), `device.queue.submit` is wrapped while a level runs,
 * and a `StepProfiler` hands the engine its real compute pass (one per command buffer, as
 * without a profiler) with two timestamp writes and a dispatch counter added.
 */
import type { GPUContext } from '../gpu/device';
import { GpuEngine, type StepProfiler } from '../engine/engine';
import type { BatchItem } from '../engine/scheduler';
import type { GenerateRequest, GenerationResult } from '../engine/types';
import type { OpenedModel } from '../model/open';
import { GREEDY } from '../testing/sampling';

/** What the batching part of the bench runs (part of BenchSettings). */
export interface BatchingSettings {
  /** Concurrent streams per level, e.g. [1, 2, 4, 8, 16]; empty: no throughput levels. */
  streams: number[];
  /** Prompt tokens of every stream (equal lengths, different prompts). */
  streamPromptTokens: number;
  /** Tokens each stream generates (greedy, EOS ignored). */
  streamTokens: number;
  /** The repeated prefix's length before clamping to the context (0: no prefix test). */
  prefixTokens: number;
  /** Prompt tokens per prefill step (as the other runs). */
  prefillChunk: number;
  integerDot?: boolean;
}

/** Tokens request B adds after A's prompt. */
export const PREFIX_EXTRA_TOKENS = 8;

/** The goals, for real GPUs (on an emulated adapter the figures are only reported). */
export const BATCHING_GOALS = {
  /** Aggregate decode tokens/s at 8 streams ÷ at 1 stream, at least. */
  aggregateRatioAt8: 6,
  /** TTFT of B (shares A's prefix) ÷ TTFT of A, at most. */
  prefixTtftRatio: 0.1,
  /** Host ms to record and submit a step ÷ wall ms per step, at most (the worst level). */
  hostShare: 0.05,
} as const;

export interface StreamLevelResult {
  streams: number;
  /** Tokens in the decode window: those of the steps after the one that gave the last stream its first token. */
  tokens: number;
  /** Steps in the decode window. */
  steps: number;
  /** Wall ms of the window: from the tokens of that step to the last token. */
  windowMs: number;
  /** tokens ÷ windowMs: aggregate decode tokens/s over all streams. */
  tokensPerSecond: number;
  /** tokensPerSecond ÷ that of the 1-stream level (null without one). */
  ratio: number | null;
  /** Dispatches recorded per window step, and per token of the window. */
  dispatchesPerStep: number;
  dispatchesPerToken: number;
  /** Mean wall ms from the step's start (submit entered) to the return of its last queue.submit: CPU work of writing, recording and submitting. */
  hostMsPerStep: number;
  /** The part of hostMsPerStep spent inside queue.submit calls (the driver's; the rest is the engine's JS and WebGPU encoding calls). */
  submitMsPerStep: number;
  /** windowMs ÷ steps: the wall time of a step, from one step's tokens to the next's. */
  stepMs: number;
  /** hostMsPerStep ÷ stepMs. */
  hostShare: number;
  /** Mean wall ms per step outside submit (the scheduler's bookkeeping, token delivery, the task yield between steps). */
  gapMs: number;
  /** Sum of the window steps' GPU pass times (timestamp queries) ÷ windowMs; null without timestamp-query or with an unusable reading. */
  gpuBusyShare: number | null;
  /** Sequences preempted during the level (KV pool full). */
  preemptions: number;
}

export interface PrefixResult {
  /** A's prompt: the asked length clamped to the context and rounded down to whole KV pages. */
  promptTokens: number;
  /** B = A's prompt + this many other tokens. */
  extraTokens: number;
  ttftAMs: number;
  ttftBMs: number;
  /** ttftBMs ÷ ttftAMs. */
  ratio: number;
  /** B's GenerationResult.cachedTokens. */
  cachedTokens: number;
}

export interface GoalCheck {
  goal: number;
  value: number | null;
  /** null when the value was not measured. */
  met: boolean | null;
}

export interface BatchingResult {
  contextLength: number;
  maxBatch: number;
  pageSize: number;
  streamPromptTokens: number;
  streamTokens: number;
  levels: StreamLevelResult[];
  prefix: PrefixResult | null;
  goals: { aggregateRatioAt8: GoalCheck; prefixTtftRatio: GoalCheck; hostShare: GoalCheck };
}

// ---------------------------------------------------------------------------------------------
// The arithmetic (pure).

/** A token as its consumer saw it: wall time, and the number of the step that produced it. */
export interface Arrival {
  at: number;
  step: number;
}

/** One step as the hooks saw it (times in ms, same clock as the arrivals). */
export interface StepRecord {
  /** 1-based step number: the tokens it produces arrive tagged with it. */
  step: number;
  start: number;
  /** When its last queue.submit returned (NaN if it submitted nothing). */
  submitted: number;
  /** Wall ms inside its queue.submit calls. */
  submitMs: number;
  end: number;
  dispatches: number;
  /** GPU ns of its passes (timestamp queries); null when not timed. */
  gpuNs: number | null;
}

/**
 * The decode window of streams started together: from the step in which the last stream got its
 * first token (its tokens' arrival) to the last token. Tokens of that step and earlier ones
 * (prefill, and decode of streams admitted early) are outside it. Null if no token falls inside.
 */
export function decodeWindow(streams: readonly (readonly Arrival[])[]): { fromStep: number; toStep: number; startMs: number; endMs: number; tokens: number } | null {
  if (streams.length === 0 || streams.some((s) => s.length === 0)) return null;
  const all = streams.flat();
  const fromStep = Math.max(...streams.map((s) => s[0]!.step));
  const toStep = Math.max(...all.map((a) => a.step));
  const startMs = Math.max(...all.filter((a) => a.step === fromStep).map((a) => a.at));
  const inside = all.filter((a) => a.step > fromStep);
  if (inside.length === 0) return null;
  return { fromStep, toStep, startMs, endMs: Math.max(...inside.map((a) => a.at)), tokens: inside.length };
}

/** One level's figures from the token arrivals and the step records (ratio left null). */
export function levelFigures(streams: readonly (readonly Arrival[])[], steps: readonly StepRecord[], preemptions = 0): StreamLevelResult | null {
  const w = decodeWindow(streams);
  if (!w) return null;
  const inWindow = steps.filter((s) => s.step > w.fromStep && s.step <= w.toStep);
  const n = inWindow.length;
  if (n === 0) return null;
  const windowMs = w.endMs - w.startMs;
  const dispatches = inWindow.reduce((t, s) => t + s.dispatches, 0);
  const mean = (f: (s: StepRecord) => number) => inWindow.reduce((t, s) => t + f(s), 0) / n;
  const hostMsPerStep = mean((s) => s.submitted - s.start);
  const submitMsPerStep = mean((s) => s.submitMs);
  const stepMs = windowMs / n;
  const runMs = mean((s) => s.end - s.start);
  const gpu = inWindow.every((s) => s.gpuNs !== null && s.gpuNs > 0) ? inWindow.reduce((t, s) => t + s.gpuNs!, 0) / 1e6 : null;
  return {
    streams: streams.length,
    tokens: w.tokens,
    steps: n,
    windowMs,
    tokensPerSecond: w.tokens / (windowMs / 1000),
    ratio: null,
    dispatchesPerStep: dispatches / n,
    dispatchesPerToken: dispatches / w.tokens,
    hostMsPerStep,
    submitMsPerStep,
    stepMs,
    hostShare: hostMsPerStep / stepMs,
    gapMs: stepMs - runMs,
    gpuBusyShare: gpu === null || windowMs <= 0 ? null : gpu / windowMs,
    preemptions,
  };
}

/** Each level's throughput over the 1-stream level's. */
export function withRatios(levels: StreamLevelResult[]): StreamLevelResult[] {
  const one = levels.find((l) => l.streams === 1)?.tokensPerSecond;
  return levels.map((l) => ({ ...l, ratio: one ? l.tokensPerSecond / one : null }));
}

/** A's prompt length: at most `asked`, leaving room in the context for B's extra tokens and a generated one, in whole pages. */
export function prefixLength(asked: number, contextLength: number, pageSize: number, extra = PREFIX_EXTRA_TOKENS): number {
  const room = contextLength - extra - 1;
  const n = Math.min(asked, room);
  return n >= pageSize ? n - (n % pageSize) : Math.max(0, n);
}

function check(value: number | null, goal: number, atLeast: boolean): GoalCheck {
  return { goal, value, met: value === null || !Number.isFinite(value) ? null : atLeast ? value >= goal : value <= goal };
}

/** The goals against what was measured: 8 streams' ratio, the prefix ratio, the worst level's host share. */
export function checkGoals(levels: readonly StreamLevelResult[], prefix: PrefixResult | null): BatchingResult['goals'] {
  const at8 = levels.find((l) => l.streams === 8)?.ratio ?? null;
  const host = levels.length ? Math.max(...levels.map((l) => l.hostShare)) : null;
  return {
    aggregateRatioAt8: check(at8, BATCHING_GOALS.aggregateRatioAt8, true),
    prefixTtftRatio: check(prefix?.ratio ?? null, BATCHING_GOALS.prefixTtftRatio, false),
    hostShare: check(host, BATCHING_GOALS.hostShare, false),
  };
}

// ---------------------------------------------------------------------------------------------
// The measurement.

const QUERY_RESOLVE = 0x0200; // GPUBufferUsage.QUERY_RESOLVE
const COPY_SRC = 0x0004;
const MAP_READ_DST = 0x0001 | 0x0008;
/** Timed passes per level (2 queries each; WebGPU caps a query set at 4096). */
const MAX_TIMED_PASSES = 2048;

/** The hooks on one engine: step records while `recording`, dispatch counts and pass timestamps. */
export class StepHooks implements StepProfiler {
  steps: StepRecord[] = [];
  private recording = false;
  private current: StepRecord | null = null;
  private stepNo = 0;
  private passes: Array<{ step: StepRecord; query: number }> = [];
  private querySet: GPUQuerySet | null = null;

  constructor(
    private readonly engine: GpuEngine,
    private readonly device: GPUDevice,
    private readonly timestamps: boolean,
  ) {
    const { runner } = engine;
    const submit = runner.submit.bind(runner);
    // The scheduler calls `this.runner.submit`: an own property of the instance takes precedence.
    runner.submit = async (items: BatchItem[]) => {
      const rec: StepRecord = { step: ++this.stepNo, start: performance.now(), submitted: NaN, submitMs: 0, end: NaN, dispatches: 0, gpuNs: null };
      this.current = rec;
      try {
        return await submit(items);
      } finally {
        rec.end = performance.now();
        this.current = null;
        if (this.recording) this.steps.push(rec);
      }
    };
  }

  /** Steps run so far: the number the next token's step will have been given. */
  get stepCount(): number {
    return this.stepNo;
  }

  /** Starts recording a level: submit wrapper, this as the engine's profiler, fresh records. */
  start(): () => void {
    this.steps = [];
    this.passes = [];
    if (this.timestamps) this.querySet = this.device.createQuerySet({ type: 'timestamp', count: 2 * MAX_TIMED_PASSES, label: 'bench steps' });
    const queue = this.device.queue;
    const submit = queue.submit;
    queue.submit = (buffers: Iterable<GPUCommandBuffer>) => {
      const t = performance.now();
      const r = submit.call(queue, buffers);
      const rec = this.current;
      if (rec) {
        rec.submitted = performance.now();
        rec.submitMs += rec.submitted - t;
      }
      return r;
    };
    this.engine.profiler = this;
    this.recording = true;
    return () => {
      this.recording = false;
      queue.submit = submit;
      this.engine.profiler = null;
    };
  }

  begin(encoder: GPUCommandEncoder): GPUComputePassEncoder {
    const rec = this.current;
    let desc: GPUComputePassDescriptor | undefined;
    if (rec && this.querySet && this.passes.length < MAX_TIMED_PASSES) {
      const query = 2 * this.passes.length;
      this.passes.push({ step: rec, query });
      desc = { timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: query, endOfPassWriteIndex: query + 1 } };
    }
    const pass = encoder.beginComputePass(desc);
    const dispatch = pass.dispatchWorkgroups;
    const indirect = pass.dispatchWorkgroupsIndirect;
    pass.dispatchWorkgroups = (x: number, y?: number, z?: number) => {
      if (rec) rec.dispatches++;
      return dispatch.call(pass, x, y, z);
    };
    pass.dispatchWorkgroupsIndirect = (buffer: GPUBuffer, offset: number) => {
      if (rec) rec.dispatches++;
      return indirect.call(pass, buffer, offset);
    };
    return pass;
  }

  end(): void {}

  /** Reads the level's pass timestamps into its step records (after the level's work is done). */
  async collectGpuTimes(): Promise<void> {
    const qs = this.querySet;
    this.querySet = null;
    if (!qs) return;
    const n = this.passes.length;
    try {
      if (n === 0) return;
      const resolve = this.device.createBuffer({ size: 16 * n, usage: QUERY_RESOLVE | COPY_SRC, label: 'bench steps resolve' });
      const readback = this.device.createBuffer({ size: 16 * n, usage: MAP_READ_DST, label: 'bench steps readback' });
      try {
        const encoder = this.device.createCommandEncoder();
        encoder.resolveQuerySet(qs, 0, 2 * n, resolve, 0);
        encoder.copyBufferToBuffer(resolve, 0, readback, 0, 16 * n);
        this.device.queue.submit([encoder.finish()]);
        await readback.mapAsync(0x0001 /* GPUMapMode.READ */);
        const ticks = new BigUint64Array(readback.getMappedRange());
        const bad = new Set<StepRecord>();
        for (const { step, query } of this.passes) {
          const ns = Number(ticks[query + 1]! - ticks[query]!);
          if (!(ns > 0) || ticks[query] === 0n) bad.add(step);
          else step.gpuNs = (step.gpuNs ?? 0) + ns;
        }
        for (const step of bad) step.gpuNs = null;
        readback.unmap();
      } finally {
        resolve.destroy();
        readback.destroy();
      }
    } finally {
      qs.destroy();
    }
  }
}

function request(promptIds: number[], maxTokens: number, cachePrompt: boolean): GenerateRequest {
  return { promptIds, maxTokens, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, cachePrompt };
}

/** Runs a request to its end; arrival of each token (ms since `t0`, tagged with the step count then) and the result. */
export async function consume(engine: GpuEngine, hooks: StepHooks, req: GenerateRequest, t0: number): Promise<{ arrivals: Arrival[]; result: GenerationResult }> {
  const arrivals: Arrival[] = [];
  const it = engine.generate(req);
  for (;;) {
    const next = await it.next();
    if (next.done) return { arrivals, result: next.value };
    arrivals.push({ at: performance.now() - t0, step: hooks.stepCount });
  }
}

/** Deterministic prompt ids spread over the vocabulary (no prefix shared between salts); every bench run's prompts. */
export function benchPrompt(length: number, vocab: number, salt: number): number[] {
  return Array.from({ length }, (_, i) => (i * 7919 + salt * 104729 + 17) % vocab);
}

/** N streams started at once (distinct prompts of one length); arrivals per stream. */
async function streamsAtOnce(engine: GpuEngine, hooks: StepHooks, n: number, promptTokens: number, maxTokens: number, salt: number): Promise<Arrival[][]> {
  const t0 = performance.now();
  const vocab = engine.config.vocabSize;
  const runs = Array.from({ length: n }, (_, i) => consume(engine, hooks, request(benchPrompt(promptTokens, vocab, salt + i), maxTokens, false), t0));
  return (await Promise.all(runs)).map((r) => r.arrivals);
}

/** The batching figures of one model, on an engine of its own (loaded here, disposed after). */
export async function benchBatching(gpu: GPUContext, opened: OpenedModel, format: string, s: BatchingSettings, log: (line: string) => void = () => {}): Promise<BatchingResult | null> {
  const levelsAsked = s.streams.filter((n) => n > 0);
  if (levelsAsked.length === 0 && s.prefixTokens <= 0) return null;
  const maxBatch = Math.max(1, ...levelsAsked);
  const contextLength = Math.max(s.streamPromptTokens + s.streamTokens + 8, s.prefixTokens > 0 ? s.prefixTokens + PREFIX_EXTRA_TOKENS + 8 : 0);
  const engine = await GpuEngine.load(opened, { gpu, contextLength, prefillChunk: s.prefillChunk, integerDot: s.integerDot, maxBatch });
  const hooks = new StepHooks(engine, gpu.device, gpu.info.timestamps && gpu.device.features.has('timestamp-query'));
  try {
    const vocab = engine.config.vocabSize;
    // Warm-up: the step shapes the levels take (a batch of every size up to the largest), since
    // some drivers (SwiftShader) compile a pipeline on its first use.
    await streamsAtOnce(engine, hooks, maxBatch, 8, 3, 900);
    await streamsAtOnce(engine, hooks, 1, 8, 3, 950);

    const levels: StreamLevelResult[] = [];
    for (const [li, n] of levelsAsked.entries()) {
      const preempted = engine.kvStats.preemptions;
      const stop = hooks.start();
      let arrivals: Arrival[][];
      try {
        arrivals = await streamsAtOnce(engine, hooks, n, s.streamPromptTokens, s.streamTokens, 20 * li);
      } finally {
        stop();
      }
      await hooks.collectGpuTimes();
      const level = levelFigures(arrivals, hooks.steps, engine.kvStats.preemptions - preempted);
      if (!level) {
        log(`${format}: ${n} stream${n === 1 ? '' : 's'}: no decode window (every stream ended in the step that gave the last its first token); raise --stream-tokens`);
        continue;
      }
      levels.push(level);
      log(
        `${format}: ${n} stream${n === 1 ? '' : 's'}: ${level.tokensPerSecond.toFixed(1)} tokens/s aggregate over ${level.tokens} tokens in ${level.steps} steps, ` +
          `${level.dispatchesPerToken.toFixed(1)} dispatches/token, host ${level.hostMsPerStep.toFixed(2)} of ${level.stepMs.toFixed(2)} ms/step`,
      );
    }

    let prefix: PrefixResult | null = null;
    const length = s.prefixTokens > 0 ? prefixLength(s.prefixTokens, engine.contextLength, engine.limits.pageSize) : 0;
    if (length > 0) {
      const a = benchPrompt(length, vocab, 300);
      const b = [...a, ...benchPrompt(PREFIX_EXTRA_TOKENS, vocab, 301)];
      const ra = await consume(engine, hooks, request(a, 1, true), performance.now());
      const rb = await consume(engine, hooks, request(b, 1, true), performance.now());
      const ttftAMs = ra.arrivals[0]!.at;
      const ttftBMs = rb.arrivals[0]!.at;
      prefix = { promptTokens: length, extraTokens: PREFIX_EXTRA_TOKENS, ttftAMs, ttftBMs, ratio: ttftBMs / ttftAMs, cachedTokens: rb.result.cachedTokens };
      log(`${format}: prefix ${length} tokens: TTFT ${ttftAMs.toFixed(0)} ms, again + ${PREFIX_EXTRA_TOKENS} tokens: ${ttftBMs.toFixed(0)} ms (${prefix.cachedTokens} cached), ratio ${prefix.ratio.toFixed(3)}`);
    }

    const withRatio = withRatios(levels);
    return {
      contextLength: engine.contextLength,
      maxBatch,
      pageSize: engine.limits.pageSize,
      streamPromptTokens: s.streamPromptTokens,
      streamTokens: s.streamTokens,
      levels: withRatio,
      prefix,
      goals: checkGoals(withRatio, prefix),
    };
  } finally {
    await engine.dispose();
  }
}
