/**
 * The hybrid case (issue #29, `npm run bench -- --hybrid`): the decode step of hybrid models
 * (LFM2: short convolutions, Qwen3.5: gated DeltaNet; one attention layer in three at the tiny
 * preset) beside a llama of the same preset (attention on every layer), at long contexts (1k and
 * 8k by default). Per model and context: the bytes a decode step reads, computed from the model
 * (./run.ts bytesPerDecodedToken: the weights as the GPU holds them, K and V of the attention
 * layers up to the context, the recurrent layers' slot states read and written), and the wall
 * time of a decode step on the adapter at hand. An attention model's KV bytes grow with the
 * context; a hybrid's recurrent layers read the same state at any context, so its step grows
 * only by its few attention layers'. On an emulated adapter (SwiftShader) the times say little
 * about a GPU; the byte counts are the adapter-free figure. Then Qwen3.5 with its MTP head (the
 * fixture written with one), decoded without speculation and with the head (./speculative.ts
 * benchMtp): tokens per step, and the head's cost per guess.
 */
import { GpuEngine } from '../engine/engine';
import { layerCacheKinds } from '../engine/layer-cache';
import type { GPUContext } from '../gpu/device';
import { actBytes } from '../kernels/op';
import type { Arch } from '../model/arch';
import { openModel } from '../model/open';
import type { GGUFVariant } from '../testing/fixtures/gguf-layout';
import type { Preset } from '../testing/fixtures/model';
import { ensureFixture } from '../testing/fixtures/shared';
import { GREEDY } from '../testing/sampling';
import { benchPrompt } from './batching';
import { bytesPerDecodedToken, type DecodeBytes } from './run';
import { benchMtp, MTP_TOKENS, type MtpBench } from './speculative';

/** The models compared: an attention-only llama, then the hybrids. */
export const HYBRID_BENCH_ARCHES: readonly Arch[] = ['llama', 'lfm2', 'qwen35'];

export interface HybridBenchSettings {
  preset: Preset;
  format: GGUFVariant;
  contexts: number[];
  /** Decode steps timed after each context's prompt. */
  steps: number;
  prefillChunk: number;
}

export interface HybridContextResult {
  context: number;
  /** Bytes a decode step reads at the middle of the timed steps. */
  bytes: DecodeBytes;
  /** Wall ms per decode step (one sequence), from the first token's arrival to the last's. */
  stepMs: number;
  /** The prompt's prefill, wall ms (the recurrent layers token by token within each sequence). */
  prefillMs: number;
}

export interface HybridBenchResult {
  arch: Arch;
  layers: number;
  /** Layers by kind: attention (paged K/V) and recurrent (slot state). */
  attentionLayers: number;
  recurrentLayers: number;
  contexts: HybridContextResult[];
}

export async function benchHybrid(gpu: GPUContext, s: HybridBenchSettings, log: (line: string) => void = () => {}): Promise<HybridBenchResult[]> {
  const out: HybridBenchResult[] = [];
  for (const arch of HYBRID_BENCH_ARCHES) {
    const paths = await ensureFixture({ arch, preset: s.preset }, { hf: [], gguf: [s.format] });
    const opened = await openModel(paths.gguf[s.format]!);
    // The fixtures' position limit is no limit of their random weights (RoPE runs at any position): widened to the longest context.
    opened.config = { ...opened.config, maxPositionEmbeddings: Math.max(opened.config.maxPositionEmbeddings, Math.max(...s.contexts) + s.steps + 8) };
    const caches = layerCacheKinds(opened.config);
    const engine = await GpuEngine.load(opened, { gpu, contextLength: Math.max(...s.contexts) + s.steps + 8, prefillChunk: s.prefillChunk, maxBatch: 1 });
    try {
      const embd = opened.tensors.get('token_embd.weight')!.info;
      const contexts: HybridContextResult[] = [];
      for (const [i, context] of s.contexts.entries()) {
        const ids = benchPrompt(context, opened.config.vocabSize, 900 + i);
        const t0 = performance.now();
        const arrivals: number[] = [];
        const it = engine.generate({ promptIds: ids, maxTokens: s.steps + 1, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, cachePrompt: false });
        for (let r = await it.next(); !r.done; r = await it.next()) arrivals.push(performance.now());
        const stepMs = (arrivals.at(-1)! - arrivals[0]!) / Math.max(1, arrivals.length - 1);
        const bytes = bytesPerDecodedToken({ matrixBytes: engine.footprint.matrixBytes, caches, actBytes: actBytes(engine.precision), context: context + s.steps / 2, embeddingRowBytes: embd.byteLength / embd.shape[0]! });
        contexts.push({ context, bytes, stepMs, prefillMs: arrivals[0]! - t0 });
        log(`[hybrid] ${arch} at ${context}: ${(bytes.total / 2 ** 20).toFixed(2)} MiB/token (KV ${(bytes.kv / 2 ** 20).toFixed(2)}, state ${(bytes.state / 2 ** 20).toFixed(2)}), ${stepMs.toFixed(1)} ms/step`);
      }
      const recurrentLayers = caches.filter((k) => k.kind === 'slot-state').length;
      out.push({ arch, layers: caches.length, attentionLayers: caches.length - recurrentLayers, recurrentLayers, contexts });
    } finally {
      await engine.dispose();
    }
  }
  return out;
}

/** The comparison as a table: per model and context, MiB read per token by part, and ms per step. */
export function formatHybrid(results: readonly HybridBenchResult[]): string {
  const mib = (b: number) => (b / 2 ** 20).toFixed(3);
  const rows = results.flatMap((r) =>
    r.contexts.map((c) => `| ${r.arch} (${r.attentionLayers} attention + ${r.recurrentLayers} recurrent) | ${c.context} | ${mib(c.bytes.weights)} | ${mib(c.bytes.kv)} | ${mib(c.bytes.state)} | ${mib(c.bytes.total)} | ${c.stepMs.toFixed(1)} | ${(c.prefillMs / 1000).toFixed(1)} |`),
  );
  return ['| model (layers) | context | weights MiB | KV MiB | state MiB | MiB/token | ms/step | prefill s |', '|---|---|---|---|---|---|---|---|', ...rows].join('\n');
}

/** Tokens the MTP case decodes (at least): enough steps for the head's guesses to count. */
const MTP_CASE_TOKENS = 16;

/** Qwen3.5 with its MTP head (the engine told to load it), one stream: without speculation and with the head, `k` guesses a step. */
export async function benchHybridMtp(gpu: GPUContext, s: HybridBenchSettings, k = MTP_TOKENS, log: (line: string) => void = () => {}): Promise<MtpBench> {
  const paths = await ensureFixture({ arch: 'qwen35', preset: s.preset, mtp: true }, { hf: [], gguf: [s.format] });
  const opened = await openModel(paths.gguf[s.format]!);
  const tokens = Math.max(s.steps, MTP_CASE_TOKENS);
  // One stream in a batch of k + 1, as when these figures were first taken: an engine of maxBatch 1
  // then verified no guess. Since a56cad7 every step has VERIFY_ROWS beyond maxBatch (engine.ts),
  // so maxBatch 1 would verify them too.
  const engine = await GpuEngine.load(opened, { gpu, contextLength: 256, prefillChunk: s.prefillChunk, maxBatch: k + 1, mtp: true });
  try {
    const b = (await benchMtp(engine, benchPrompt(16, opened.config.vocabSize, 98), tokens, k))!;
    log(`[hybrid] qwen35 with its MTP head: ${b.mtp.tokensPerStep.toFixed(2)} tokens/step (none ${b.none.tokensPerStep.toFixed(2)}), ${b.mtp.accepted} of ${b.mtp.proposed} guesses taken, head ${b.mtp.headMsPerStep.toFixed(2)} ms/step${b.identical ? '' : ', OUTPUT CHANGED'}`);
    return b;
  } finally {
    await engine.dispose();
  }
}
