/**
 * `selfcheck`: is this GPU computing the model correctly? Every kernel against its TypeScript
 * reference (kernel-checks.ts), then tiny generated models through the engine against the CPU
 * reference forward pass (model-checks.ts), in f32 and, where the adapter has shader-f16, f16; each
 * with the specialisations the engine itself picks on this adapter, and the tests' tolerances.
 * Runs wherever the engine runs: the CLI in Node (`webgpu-llm selfcheck`), the library's
 * `selfCheck()` in the engine's Worker, the demo's "Check this GPU".
 */
import type { GPUContext, GPUDescription } from '../gpu/device';
import type { Precision } from '../gpu/pipelines';
import { engineOpContext } from '../kernels/op';
import { COVERAGE, KERNEL_CHECKS, type Measured } from './kernel-checks';
import { MODEL_CHECKS, runModelCheck } from './model-checks';

export type SelfCheckPrecision = 'auto' | Precision;

export interface SelfCheckOptions {
  /** auto (default): f32, and f16 where the adapter has shader-f16. */
  precision?: SelfCheckPrecision;
  /** Only checks whose group/check/case name contains one of these (default: all). */
  only?: readonly string[];
  /** Called as each result comes in (a progress table). */
  onResult?: (result: SelfCheckResult) => void;
}

export interface SelfCheckResult {
  group: 'kernel' | 'model';
  /** The kernel check (linear, attention, …) or 'engine'. */
  check: string;
  /** The case: weight type and path, shape, model and format. */
  name: string;
  precision: Precision;
  maxError: number;
  tolerance: number;
  pass: boolean;
  ms: number;
  /** Why it failed beyond its error, or the error it threw. */
  problem?: string;
}

export interface AdapterReport extends GPUDescription {
  features: string[];
  limits: Record<string, number>;
}

export interface SelfCheckReport {
  adapter: AdapterReport;
  precisions: Precision[];
  /** Precisions asked for that the adapter cannot run (f16 without shader-f16). */
  unavailable: Precision[];
  results: SelfCheckResult[];
  pass: boolean;
  seconds: number;
}

const LIMIT_NAMES = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBuffersPerShaderStage',
] as const;

export function describeAdapterForReport(gpu: GPUContext): AdapterReport {
  const limits: Record<string, number> = {};
  for (const name of LIMIT_NAMES) limits[name] = Number(gpu.device.limits[name]);
  return { ...gpu.info, features: [...gpu.device.features].map(String).sort(), limits };
}

/** A check passes when its error is within tolerance (NaN never is) and nothing else went wrong. */
export function passes(m: Pick<Measured, 'maxError' | 'tolerance' | 'problem'>): boolean {
  return m.problem === undefined && m.maxError <= m.tolerance;
}

export async function runSelfCheck(gpu: GPUContext, options: SelfCheckOptions = {}): Promise<SelfCheckReport> {
  const started = performance.now();
  // A precision named and not offered is a failure; 'auto' runs what the adapter has.
  const named = options.precision !== undefined && options.precision !== 'auto' ? options.precision : undefined;
  const asked: Precision[] = named ? [named] : ['f32', 'f16'];
  const precisions = asked.filter((p) => p === 'f32' || gpu.info.f16);
  const unavailable = named ? asked.filter((p) => !precisions.includes(p)) : [];
  const coverage = COVERAGE[engineOpContext(gpu, 'f32').emulated ? 'emulated' : 'gpu'];
  const results: SelfCheckResult[] = [];
  const wanted = (group: string, check: string, name = '') => !options.only?.length || options.only.some((o) => `${group} ${check} ${name}`.includes(o));
  const record = (r: SelfCheckResult) => {
    results.push(r);
    options.onResult?.(r);
  };
  const measure = async (group: SelfCheckResult['group'], check: string, precision: Precision, fallbackName: string, run: () => Promise<Measured[]>) => {
    const t0 = performance.now();
    let measured: Measured[];
    try {
      measured = await run();
    } catch (e) {
      // A kernel that does not compile or validate on this device is a failure of that check, not of selfcheck.
      measured = [{ name: fallbackName, maxError: NaN, tolerance: 0, problem: e instanceof Error ? e.message : String(e) }];
    }
    const ms = (performance.now() - t0) / Math.max(1, measured.length);
    for (const m of measured) if (wanted(group, check, m.name)) record({ group, check, precision, ...m, pass: passes(m), ms });
  };

  for (const precision of precisions) {
    const ctx = engineOpContext(gpu, precision, true);
    for (const k of KERNEL_CHECKS) {
      // Skipped unless a filter could match it or one of its cases.
      if (options.only?.length && !options.only.some((o) => `kernel ${k.name}`.includes(o) || o.startsWith(`kernel ${k.name} `))) continue;
      await measure('kernel', k.name, precision, k.name, () => k.run({ ctx, precision, coverage }));
    }
    const models = [...MODEL_CHECKS.filter((c) => !coverage.emulatedModels || c.emulated).map((c) => ({ ...c, integerDot: false })), ...(gpu.info.integerDot ? [{ ...MODEL_CHECKS[0]!, integerDot: true }] : [])];
    for (const c of models) {
      const name = `${c.arch} ${c.format}${c.integerDot ? ' int8 dot' : ''}`;
      if (!wanted('model', 'engine', name)) continue;
      await measure('model', 'engine', precision, name, async () => [await runModelCheck(gpu, c, { precision, integerDot: c.integerDot })]);
    }
  }
  return {
    adapter: describeAdapterForReport(gpu),
    precisions,
    unavailable,
    results,
    pass: unavailable.length === 0 && results.length > 0 && results.every((r) => r.pass),
    seconds: (performance.now() - started) / 1000,
  };
}
