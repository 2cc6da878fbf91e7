/**
 * One bench target (Node on Dawn, or a Chromium page): picks settings for the adapter it got and
 * runs every model on one device. Shared by src/bench/main.ts and the bench page.
 */
import type { GPUContext, GPUDescription } from '../gpu/device';
import type { ModelLocation } from '../model/open';
import type { Preset } from '../testing/fixtures/model';
import { benchModel, type BenchSettings, type Log, type ModelBenchResult } from './run';

export type TargetName = 'node' | 'chromium';

export interface TargetResult {
  target: TargetName;
  adapter: Pick<GPUDescription, 'vendor' | 'architecture' | 'description' | 'isFallbackAdapter' | 'f16' | 'timestamps'>;
  emulated: boolean;
  settings: BenchSettings;
  /** What the reader must know to read the numbers (caps, missing features). */
  notes: string[];
  models: Array<ModelBenchResult | { format: string; error: string }>;
}

/** The sizes, on a real GPU. */
export const FULL_SETTINGS: BenchSettings = {
  promptLengths: [128, 1024],
  decodeTokens: 64,
  decodeContexts: [1024, 4096, 8192],
  prefillChunk: 128,
  profileSteps: 8,
  profilePrefill: true,
  copyBytes: 256 << 20,
  streams: [1, 2, 4, 8, 16],
  streamPromptTokens: 128,
  streamTokens: 64,
  prefixTokens: 2048,
};

/**
 * On a CPU-emulated adapter (SwiftShader) a 1024-token prefill of even the small preset takes
 * minutes, so prompt and decode lengths are capped; ask for more with explicit settings.
 */
export const EMULATED_SETTINGS: BenchSettings = {
  promptLengths: [16, 64],
  decodeTokens: 16,
  decodeContexts: [128, 512],
  prefillChunk: 128,
  profileSteps: 2,
  profilePrefill: false,
  copyBytes: 16 << 20,
  streams: [1, 2, 4, 8, 16],
  streamPromptTokens: 16,
  streamTokens: 16,
  prefixTokens: 512,
};

/** Dawn toggles for Node: timestamps at the GPU's own resolution (Dawn quantises them by default). */
export const BENCH_DAWN_FLAGS = ['disable-dawn-features=timestamp_quantization'];
/** The same for Chromium: WebGPU developer features (unquantised timestamps among them), and the toggle itself. */
export const BENCH_CHROMIUM_FLAGS = ['--enable-webgpu-developer-features', '--disable-dawn-features=timestamp_quantization'];
export function isEmulated(info: GPUDescription): boolean {
  return info.isFallbackAdapter || info.architecture === 'swiftshader';
}

export function describeAdapter(info: GPUDescription): string {
  return `${info.vendor} ${info.architecture} (${info.description})${info.isFallbackAdapter ? ', fallback adapter' : ''}`;
}

/**
 * Whether to run Chromium, given both adapters: an emulated Chromium beside a real GPU in Node
 * would time SwiftShader, not the GPU (headless Chromium often gets no GPU), so it is skipped with
 * the reason; with WEBGPU_LLM_REAL_GPU set an emulated Chromium is an error.
 */
export function chromiumVerdict(chromium: GPUDescription, node: GPUDescription, realGpu: boolean): { run: true } | { run: false; reason: string } {
  if (!isEmulated(chromium)) return { run: true };
  const what = `Chromium's adapter is CPU-emulated (${describeAdapter(chromium)})`;
  if (realGpu) throw new Error(`WEBGPU_LLM_REAL_GPU is set but ${what}: start Chromium with GPU access (e.g. CHROME_PATH to a Chrome that sees the GPU)`);
  if (!isEmulated(node)) return { run: false, reason: `${what} while Node's is not (${describeAdapter(node)}): its figures would time the CPU` };
  return { run: true };
}

/** The fixture size a run uses unless told: the 1B shape on a real GPU, tens of MB on an emulated one. */
export function defaultPreset(info: GPUDescription): Preset {
  return isEmulated(info) ? 'small' : '1b';
}

export function resolveSettings(emulated: boolean, overrides: Partial<BenchSettings>): { settings: BenchSettings; notes: string[] } {
  const base = emulated ? EMULATED_SETTINGS : FULL_SETTINGS;
  const settings = { ...base, ...Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined)) } as BenchSettings;
  const notes: string[] = [];
  if (emulated) {
    notes.push('CPU-emulated adapter (SwiftShader): absolute figures mean little; the bandwidth ratio and the kernel breakdown still do.');
    if (!overrides.promptLengths) {
      notes.push(
        `prompt lengths capped at ${settings.promptLengths.join(' and ')} tokens (not 128 and 1024), decode at ${settings.decodeTokens} tokens ` +
          'and the breakdown at decode steps, to keep the run short; pass --prompt-lengths 128,1024 --decode-tokens 64 --profile-prefill for the full run.',
      );
    }
    if (!overrides.decodeContexts && settings.decodeContexts.length) {
      notes.push(`decode at ${settings.decodeContexts.join(' and ')} tokens of context only (not 1k, 4k and 8k); pass --decode-contexts 1024,4096,8192 for the full run.`);
    }
    const batchingAsked = overrides.streamPromptTokens !== undefined || overrides.streamTokens !== undefined || overrides.prefixTokens !== undefined;
    if (!batchingAsked) {
      notes.push(
        `batching runs shortened: ${settings.streamPromptTokens}-token prompts and ${settings.streamTokens} tokens per stream (not 128 and 64), ` +
          `a ${settings.prefixTokens}-token repeated prefix (not 2048); pass --stream-prompt 128 --stream-tokens 64 --prefix-tokens 2048 for the full sizes.`,
      );
    }
    notes.push('batching goals (≥ 6× aggregate at 8 streams, prefix TTFT ratio ≤ 0.1, host ≤ 5% of a step) are for real GPUs: here they are only reported.');
  }
  return { settings, notes };
}

export async function runTarget(
  target: TargetName,
  gpu: GPUContext,
  models: Array<{ format: string; location: ModelLocation }>,
  overrides: Partial<BenchSettings>,
  log: Log,
): Promise<TargetResult> {
  const { info } = gpu;
  const emulated = isEmulated(info);
  const { settings, notes } = resolveSettings(emulated, overrides);
  if (!info.timestamps) notes.push('timestamp-query not granted: no per-kernel breakdown.');
  notes.push('one device per target: pipelines compiled for one format are reused by the next, so later load times can be lower.');
  const results: TargetResult['models'] = [];
  for (const m of models) {
    try {
      results.push(await benchModel(gpu, m.location, m.format, settings, (line) => log(`[${target}] ${line}`)));
    } catch (e) {
      const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      log(`[${target}] ${m.format}: FAILED ${error}`);
      results.push({ format: m.format, error });
    }
  }
  const { vendor, architecture, description, isFallbackAdapter, f16, timestamps } = info;
  return { target, adapter: { vendor, architecture, description, isFallbackAdapter, f16, timestamps }, emulated, settings, notes, models: results };
}
