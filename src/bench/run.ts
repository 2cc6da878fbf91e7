/**
 * One model through the benchmark, the same code in Node (Dawn) and in Chromium: load, prefill at
 * each prompt length (time to first token), decode, peak GPU memory, copy bandwidth on the same
 * device, bytes read per decoded token and the per-kernel breakdown from timestamp queries; then,
 * on an engine of its own, continuous batching (./batching.ts): aggregate decode at 1–16 streams,
 * a repeated long prefix, dispatches and host time per step.
 */
import type { GPUContext } from '../gpu/device';
import { pipelineCache } from '../gpu/run-kernel';
import { GpuEngine } from '../engine/engine';
import { layerCacheKinds, rowBytes, type LayerCacheKind } from '../engine/layer-cache';
import type { GenerateRequest } from '../engine/types';
import { compileConstraint, type Constraint } from '../structured/grammar';
import { measureCopyBandwidth } from '../kernels/copy';
import { actBytes } from '../kernels/op';
import { openModel, type ModelLocation } from '../model/open';
import { GREEDY } from '../testing/sampling';
import { trackBuffers } from './memory';
import { benchSpeculative, DRAFT_TOKENS, type SpeculativeBench } from './speculative';
import { DraftModel } from '../engine/draft';
import { DraftEngine } from '../engine/draft-engine';
import { BENCH_CONSTRAINT_LABEL, benchConstraintSpec, benchToolCall, maskOverhead, msPerGeneratedToken, type ToolCallBench } from './structured';
import { aggregateByKernel, aggregateByOp, TimestampProfiler, type KernelTime, type OpTime } from './profiler';
import { benchBatching, benchPrompt, type BatchingResult } from './batching';
import { benchDecodeContexts, type ContextDecodeResult } from './decode';
import { benchRestart, type RestartBench } from './persist';

export interface BenchSettings {
  /** Prompt lengths for prefill / time to first token (the issue asks for 128 and 1024). */
  promptLengths: number[];
  /** Tokens decoded (greedy) after the longest prompt, for decode tokens/s; and at each decode context. */
  decodeTokens: number;
  /** Contexts (prompt tokens) to decode at, greedy and sampled, each with a profiled step (./decode.ts); empty: none. */
  decodeContexts: number[];
  /** Prompt tokens per prefill step. */
  prefillChunk: number;
  /** EngineOptions.integerDot (`--integer-dot`): one-token decode steps by int8 dot products where the GPU has them. */
  integerDot?: boolean;
  /** Tokens the MTP head guesses per step in the speculative part, on a model with a head (`--mtp-tokens`; default MTP_TOKENS). */
  mtpTokens?: number;
  /** Decode steps recorded with timestamps for the breakdown. */
  profileSteps: number;
  /** Also time a prefill chunk per kernel (one more prefill of the shortest prompt). */
  profilePrefill: boolean;
  /** Buffer size of the copy-bandwidth probe, in bytes. */
  copyBytes: number;
  /** Concurrent streams per batching level (1, 2, 4, 8, 16); empty: none. */
  streams: number[];
  /** Prompt tokens of each concurrent stream. */
  streamPromptTokens: number;
  /** Tokens each concurrent stream generates. */
  streamTokens: number;
  /** The repeated prefix's length (clamped to the context); 0: no prefix test. */
  prefixTokens: number;
}

export interface PrefillResult {
  promptTokens: number;
  /** Wall time from the request to its first generated token. */
  ttftMs: number;
  /** promptTokens / TTFT. */
  tokensPerSecond: number;
}

export interface ModelBenchResult {
  format: string;
  model: { arch: string; layers: number; hidden: number; intermediate: number; vocab: number };
  precision: string;
  /** Open + upload + pipelines, wall time. */
  loadMs: number;
  prefill: PrefillResult[];
  decode: { promptTokens: number; tokens: number; tokensPerSecond: number; msPerToken: number; meanContext: number };
  /**
   * The same decode (prompt, token count, greedy) under a JSON grammar: the mask's cost per token
   * (xgrammar's bitmask on the CPU, its upload, the apply_mask kernel). msPerToken is over the
   * tokens actually produced; maskMsPerToken = msPerToken − decode.msPerToken.
   */
  structured: { constraint: string; tokens: number; finishReason: string; tokensPerSecond: number; msPerToken: number; maskMsPerToken: number };
  /** A forced tool call token by token, with jump-forward decoding, and unconstrained (./structured.ts). Absent in older reports. */
  toolCall?: ToolCallBench;
  /** TTFT of a long prompt after a restart (its KV pages read from storage) ÷ cold (./persist.ts). Absent in older reports. */
  restart?: RestartBench | { error: string };
  /** One stream without speculation and with each proposer (./speculative.ts). Absent in older reports. */
  speculative?: SpeculativeBench;
  memory: {
    /** Peak bytes of all GPU buffers alive during load, prefill and decode. */
    peakBytes: number;
    matrixBytes: number;
    kvCacheBytes: number;
  };
  /** Bytes of the GGUF file's tensors (the weights as stored). */
  ggufBytes?: number;
  bandwidth: {
    /** The copy kernel's read + write bandwidth on this device (wall clock). */
    copyGBps: number;
    /** The same copies timed with timestamps (null without timestamp-query): the per-op GB/s yardstick. */
    copyTimestampGBps?: number | null;
    /** Weight matrices + KV read at the mean decode context + one embedding row. */
    bytesPerToken: number;
    /** bytesPerToken × decode tokens/s. */
    decodeGBps: number;
    /** decodeGBps / copyGBps. */
    ratio: number;
  };
  /**
   * GPU time per step by kernel and by op role (time, bytes, GB/s, share of copy bandwidth); null
   * when timestamp-query is not granted. The op split is absent in older reports.
   */
  breakdown: { decode: KernelTime[]; prefill: KernelTime[] | null; prefillTokens: number; decodeOps?: OpTime[]; prefillOps?: OpTime[] | null } | null;
  /**
   * Decode at each of settings.decodeContexts (./decode.ts), on an engine of its own: `dropped`,
   * the contexts longer than the model's; `{ error }` when that part failed. Absent in older reports.
   */
  contexts?: { results: ContextDecodeResult[]; dropped: number[] } | { error: string };
  /**
   * Continuous batching (./batching.ts), on a second engine loaded after the first is disposed:
   * null when no level and no prefix were asked for, `{ error }` when that part failed (the figures
   * above stand). Absent in older reports.
   */
  batching?: BatchingResult | { error: string } | null;
}

export type Log = (line: string) => void;

/** What a decode step reads, by part (see ModelBenchResult.bandwidth). */
export interface DecodeBytes {
  /** The weight matrices as the GPU holds them, and one embedding row. */
  weights: number;
  /** K and V of every attention layer up to the context: grows with it. */
  kv: number;
  /** Every recurrent layer's slot state, read and written back: the same at any context. */
  state: number;
  total: number;
}

/**
 * Bytes a decode step reads at a context of `context` tokens: per layer as its cache kind says
 * (../engine/layer-cache.ts), K and V up to the context on attention layers, the slot state
 * (f32, read and written) on a hybrid's recurrent ones.
 */
export function bytesPerDecodedToken(args: { matrixBytes: number; caches: readonly LayerCacheKind[]; actBytes: number; context: number; embeddingRowBytes: number }): DecodeBytes {
  let kv = 0;
  let state = 0;
  for (const k of args.caches) {
    if (k.kind === 'paged-kv') kv += 2 * args.context * rowBytes(k, args.actBytes);
    else state += 2 * k.floats * 4;
  }
  const weights = args.matrixBytes + args.embeddingRowBytes;
  return { weights, kv, state, total: weights + kv + state };
}

function request(promptIds: number[], maxTokens: number, constraint?: Constraint): GenerateRequest {
  return { promptIds, maxTokens, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, cachePrompt: false, constraint };
}

/** Runs a request; returns the wall time at which each token arrived (ms since the call). */
async function timedGenerate(engine: GpuEngine, promptIds: number[], maxTokens: number): Promise<number[]> {
  return (await timedRun(engine, promptIds, maxTokens)).at;
}

async function timedRun(engine: GpuEngine, promptIds: number[], maxTokens: number, constraint?: Constraint): Promise<{ at: number[]; finishReason: string }> {
  const t0 = performance.now();
  const at: number[] = [];
  const it = engine.generate(request(promptIds, maxTokens, constraint));
  for (;;) {
    const next = await it.next();
    if (next.done) return { at, finishReason: next.value.finishReason };
    at.push(performance.now() - t0);
  }
}

/** The decode run again under the bench grammar (compiled and started before the clock runs). */
async function constrainedDecode(engine: GpuEngine, promptIds: number[], tokens: number, vocab: number): Promise<{ at: number[]; finishReason: string }> {
  const compiled = await compileConstraint(engine.tokenizer, benchConstraintSpec(tokens), vocab);
  // Warm-up: the masked path's kernels (apply_mask) compile on first use on some drivers.
  const warm = await compiled.start();
  try {
    await timedRun(engine, benchPrompt(16, vocab, 98), 2, warm);
  } finally {
    warm.dispose();
  }
  const constraint = await compiled.start();
  try {
    return await timedRun(engine, promptIds, tokens, constraint);
  } finally {
    constraint.dispose();
  }
}

export async function benchModel(gpu: GPUContext, location: ModelLocation, format: string, s: BenchSettings, log: Log = () => {}): Promise<ModelBenchResult> {
  const { device } = gpu;
  const tracker = trackBuffers(device);
  let engine: GpuEngine | undefined;
  try {
    const t0 = performance.now();
    const opened = await openModel(location);
    const contextLength = Math.max(...s.promptLengths) + s.decodeTokens + 8;
    // The MTP head where the model ships one (the qwen35 fixture): the speculative part runs it.
    engine = await GpuEngine.load(opened, { gpu, contextLength, prefillChunk: s.prefillChunk, integerDot: s.integerDot, mtp: !!opened.config.mtpLayers });
    const loadMs = performance.now() - t0;
    const c = opened.config;
    log(`${format}: loaded in ${loadMs.toFixed(0)} ms (${engine.precision})`);

    // Warm-up through every path the timed runs take: a prompt above the matvec limit (tiled matmul,
    // prefill attention) and decode steps. Some drivers (SwiftShader) compile a pipeline on first use.
    await timedGenerate(engine, benchPrompt(16, c.vocabSize, 99), 2);

    // One request per prompt length; the longest one goes on to decode (its prompt is the decode context).
    const prefill: PrefillResult[] = [];
    const longest = Math.max(...s.promptLengths);
    let at: number[] = [];
    let decodePrompt: number[] = [];
    for (const [i, n] of s.promptLengths.entries()) {
      const decodes = n === longest && at.length === 0;
      const prompt = benchPrompt(n, c.vocabSize, i);
      const times = await timedGenerate(engine, prompt, decodes ? s.decodeTokens : 1);
      if (decodes) [at, decodePrompt] = [times, prompt];
      prefill.push({ promptTokens: n, ttftMs: times[0]!, tokensPerSecond: n / (times[0]! / 1000) });
      log(`${format}: prefill ${n} tokens, first token after ${times[0]!.toFixed(0)} ms`);
    }
    const msPerToken = msPerGeneratedToken(at);
    const decode = {
      promptTokens: longest,
      tokens: at.length,
      tokensPerSecond: 1000 / msPerToken,
      msPerToken,
      meanContext: longest + at.length / 2,
    };
    log(`${format}: decode ${decode.tokensPerSecond.toFixed(1)} tokens/s after a ${longest}-token prompt`);
    const masked = await constrainedDecode(engine, decodePrompt, s.decodeTokens, c.vocabSize);
    const maskedMs = msPerGeneratedToken(masked.at);
    const structured = {
      constraint: BENCH_CONSTRAINT_LABEL,
      tokens: masked.at.length,
      finishReason: masked.finishReason,
      msPerToken: maskedMs,
      ...maskOverhead(maskedMs, msPerToken),
    };
    log(`${format}: constrained decode ${structured.tokensPerSecond.toFixed(1)} tokens/s over ${structured.tokens} tokens (${structured.finishReason}), mask ${structured.maskMsPerToken.toFixed(2)} ms/token`);
    const toolCall = await benchToolCall(engine, benchPrompt(16, c.vocabSize, 97), s.decodeTokens);
    const tc = (r: ToolCallBench['free']) => `${r.tokens} tokens in ${r.steps} steps, ${r.msPerToken.toFixed(1)} ms/token`;
    log(`${format}: forced tool call token by token ${tc(toolCall.tokenByToken)}; jump-forward ${tc(toolCall.jumpForward)}; unconstrained ${tc(toolCall.free)}`);
    // The model as its own draft, on the device beside the engine (one stream).
    const drafter = await DraftEngine.load(gpu, opened, { precision: engine.precision, contextLength, maxSeqs: 1, pageSize: 16, prefillChunk: s.prefillChunk });
    let speculative: SpeculativeBench;
    try {
      speculative = await benchSpeculative(engine, benchPrompt(16, c.vocabSize, 98), s.decodeTokens, c.vocabSize, new DraftModel(drafter, DRAFT_TOKENS), s.mtpTokens);
    } finally {
      await drafter.dispose();
    }
    log(`${format}: speculative decoding, tokens/step: none ${speculative.none.tokensPerStep.toFixed(2)}, prediction ${speculative.copy.tokensPerStep.toFixed(2)}, edited prediction ${speculative.edited.tokensPerStep.toFixed(2)}, n-gram ${speculative.ngram.tokensPerStep.toFixed(2)}, draft ${speculative.draft?.tokensPerStep.toFixed(2)}${speculative.mtp ? `, MTP head ${speculative.mtp.tokensPerStep.toFixed(2)}` : ''}`);
    const peakBytes = tracker.peak;
    tracker.stop();

    const { matrixBytes, kvCacheBytes } = engine.footprint;
    const embd = opened.tensors.get('token_embd.weight')!.info;
    const bytesPerToken = bytesPerDecodedToken({
      matrixBytes,
      caches: layerCacheKinds(c),
      actBytes: actBytes(engine.precision),
      context: decode.meanContext,
      embeddingRowBytes: embd.byteLength / embd.shape[0]!,
    }).total;

    const copy = await measureCopyBandwidth(
      { device, cache: pipelineCache(device), precision: 'f32' },
      { bytes: Math.min(s.copyBytes, device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize), timestamps: gpu.info.timestamps },
    );
    // Per-op GB/s are timestamped, so their yardstick is the timestamped copy.
    const copyTimestampGBps = copy.timestampGBps ?? null;
    const breakdown = gpu.info.timestamps ? await profile(engine, c.vocabSize, s, copyTimestampGBps) : null;
    const decodeGBps = (bytesPerToken * decode.tokensPerSecond) / 1e9;
    log(`${format}: copy ${copy.gbPerSecond.toFixed(2)} GB/s (timestamps: ${copyTimestampGBps?.toFixed(2) ?? '-'}), decode reads ${decodeGBps.toFixed(2)} GB/s`);
    const ggufBytes = [...opened.tensors.values()].reduce((n, t) => n + t.info.byteLength, 0);
    // Batching gets an engine of its own (a context for the long prefix, a batch for every stream):
    // the figures above keep their engine's sizes, and its memory is given back first.
    const precision = engine.precision;
    await engine.dispose();
    engine = undefined;
    let contexts: ModelBenchResult['contexts'];
    try {
      contexts = await benchDecodeContexts(gpu, opened, format, s, { copyGBps: copyTimestampGBps, ggufBytes }, log);
    } catch (e) {
      const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      log(`${format}: decode at long contexts FAILED ${error}`);
      contexts = { error };
    }
    let restart: ModelBenchResult['restart'];
    if (s.prefixTokens > 0) {
      try {
        restart = await benchRestart(gpu, opened, s.prefixTokens, s.prefillChunk);
        log(`${format}: ${restart.promptTokens}-token prompt, first token cold ${restart.coldMs.toFixed(0)} ms, after a restart ${restart.restartMs.toFixed(0)} ms (${restart.cachedTokens} tokens from storage): ratio ${restart.ratio.toFixed(3)}`);
      } catch (e) {
        const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        log(`${format}: KV persistence FAILED ${error}`);
        restart = { error };
      }
    }
    let batching: ModelBenchResult['batching'];
    try {
      batching = await benchBatching(gpu, opened, format, s, log);
    } catch (e) {
      const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      log(`${format}: batching FAILED ${error}`);
      batching = { error };
    }
    return {
      format,
      model: { arch: c.arch, layers: c.numLayers, hidden: c.hiddenSize, intermediate: c.intermediateSize, vocab: c.vocabSize },
      precision,
      loadMs,
      prefill,
      decode,
      structured,
      toolCall,
      speculative,
      ...(restart ? { restart } : {}),
      memory: { peakBytes, matrixBytes, kvCacheBytes },
      ggufBytes,
      bandwidth: { copyGBps: copy.gbPerSecond, copyTimestampGBps, bytesPerToken, decodeGBps, ratio: decodeGBps / copy.gbPerSecond },
      breakdown,
      contexts,
      batching,
    };
  } finally {
    tracker.stop();
    await engine?.dispose();
  }
}

/** A profiled prefill chunk and profiled decode steps (one timed pass per dispatch). */
async function profile(engine: GpuEngine, vocab: number, s: BenchSettings, copyGBps: number | null): Promise<NonNullable<ModelBenchResult['breakdown']>> {
  const profiler = new TimestampProfiler(engine.gpu.device);
  engine.profiler = profiler;
  try {
    const prefillTokens = Math.min(s.prefillChunk, ...s.promptLengths);
    let prefill: KernelTime[] | null = null;
    let prefillOps: OpTime[] | null = null;
    if (s.profilePrefill) {
      await timedGenerate(engine, benchPrompt(prefillTokens, vocab, 3), 1);
      const steps = await profiler.collect();
      prefill = aggregateByKernel(steps);
      prefillOps = aggregateByOp(steps, copyGBps);
    }
    await timedGenerate(engine, benchPrompt(8, vocab, 5), s.profileSteps + 1);
    const [, ...decodeSteps] = await profiler.collect(); // the first step is the prompt's
    return { decode: aggregateByKernel(decodeSteps), prefill, prefillTokens, decodeOps: aggregateByOp(decodeSteps, copyGBps), prefillOps };
  } finally {
    engine.profiler = null;
    profiler.destroy();
  }
}
