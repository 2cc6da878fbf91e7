/**
 * `npm run bench` (scripts/bench.mjs runs this with vite-node): the benchmark in Node (Dawn) and in
 * headless Chromium (Playwright, the system Chromium), on fixture models written on demand.
 * Prints tables and writes the JSON report.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { useSwiftShaderIfNoGPU } from '../cli/vulkan';
import { acquireGPU, type GPUContext, type GPUDescription } from '../gpu/device';
import type { Arch } from '../model/arch';
import type { GGUFVariant } from '../testing/fixtures/gguf-layout';
import { PRESETS, type Preset } from '../testing/fixtures/model';
import { ensureFixture } from '../testing/fixtures/shared';
import { serveDirectory } from '../testing/server';
import { benchHybrid, benchHybridMtp, formatHybrid } from './hybrid';
import { measureMaskCost, type MaskCostResult } from './mask-cost';
import { formatMtp, formatReport, type BenchReport } from './report';
import { LLAMA3_VOCAB } from './synthetic-vocab';
import type { BenchSettings } from './run';
import { BENCH_CHROMIUM_FLAGS, BENCH_DAWN_FLAGS, chromiumVerdict, defaultPreset, describeAdapter, isEmulated, runTarget, type TargetResult } from './target';
import { MTP_TOKENS } from './speculative';
import { ARCH } from '../model/arch';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DEFAULT_FORMATS = 'Q4_0,Q4_K,Q8_0,Q4_K_M,F16';
/** WEBGPU_LLM_REAL_GPU=1: an emulated adapter is an error. */
const REAL_GPU = !!process.env.WEBGPU_LLM_REAL_GPU && process.env.WEBGPU_LLM_REAL_GPU !== '0';
const USAGE = `usage: npm run bench -- [options]
  --preset tiny|small|1b      fixture size (default: small on a CPU-emulated adapter, 1b otherwise)
  --formats LIST              GGUF variants to run (default ${DEFAULT_FORMATS})
  --arch llama|qwen2|qwen3|mistral|qwen35   fixture architecture (default llama; qwen35's fixture has its MTP head,
                              run in the speculative part)
  --mtp-tokens K              tokens the MTP head guesses per step, in the speculative part and --hybrid (default ${MTP_TOKENS})
  --target node|chromium|both|cpu   (default both; cpu: only the CPU mask timing below)
  --hybrid                    only the hybrid case (Node): decode steps of LFM2 and Qwen3.5 beside a llama of the same preset
                              (default small) at --decode-contexts (default 1024,8192), --decode-tokens steps each (default 8),
                              bytes per token by part (weights, K/V, recurrent state) and ms per step; first of --formats (Q8_0 alone by default);
                              then Qwen3.5 with its MTP head, decoded without speculation and with the head (tokens/step, head ms and bytes per guess)
  --fixtures-only             write the fixture files the other options name (--preset, --arch, --formats) and exit:
                              processes that each write one format can run at once (gpu-pack's run.sh does)
  --json PATH                 write the JSON report there (default .cache/bench/latest.json), again as each target finishes
  --prompt-lengths 128,1024   prefill sizes (capped on emulated adapters unless given)
  --decode-tokens N           tokens decoded after the longest prompt, at each decode context and in the forced tool call
  --decode-contexts 1024,4096,8192   contexts to decode at, greedy and sampled (T 0.7, top-k 40, top-p 0.9), with a profiled step
                              (default 1024,4096,8192; 128,512 on emulated adapters; 0: skip)
  --prefill-chunk N           prompt tokens per prefill step (default 128)
  --integer-dot               one-token decode steps by int8 dot products (dot4I8Packed) where the GPU has them
  --profile-steps N           decode steps timed per kernel
  --profile-prefill           also time a prefill chunk per kernel (default on real GPUs)
  --mask-vocab 128256,151936  vocabulary sizes for the CPU grammar-mask timing (default 128256, Llama 3's; 0: skip)
  --streams 1,2,4,8,16        concurrent streams per batching level (default 1,2,4,8,16; 0: skip)
  --stream-prompt N           prompt tokens of each concurrent stream (default 128; 16 on emulated adapters)
  --stream-tokens N           tokens each concurrent stream generates (default 64; 16 on emulated adapters)
  --prefix-tokens N           the repeated prefix for the prefix-cache TTFT, clamped to the context (default 2048; 512 on emulated adapters; 0: skip)

Timestamps are unquantised: Dawn's timestamp_quantization toggle is off in Node, and Chromium runs with
WebGPU's developer features. Chromium is skipped when its adapter is CPU-emulated and Node's is not.
WEBGPU_LLM_REAL_GPU=1: a CPU-emulated adapter (SwiftShader, lavapipe) is an error, not a fallback.`;

function numbers(s: string | undefined): number[] | undefined {
  return s === undefined ? undefined : s.split(',').map((x) => Number(x.trim()));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2).filter((a) => a !== '--'),
    options: {
      preset: { type: 'string' },
      formats: { type: 'string', default: DEFAULT_FORMATS },
      arch: { type: 'string', default: 'llama' },
      target: { type: 'string', default: 'both' },
      json: { type: 'string', default: resolve(ROOT, '.cache/bench/latest.json') },
      'prompt-lengths': { type: 'string' },
      'decode-tokens': { type: 'string' },
      'decode-contexts': { type: 'string' },
      'prefill-chunk': { type: 'string' },
      'profile-steps': { type: 'string' },
      'profile-prefill': { type: 'boolean' },
      'integer-dot': { type: 'boolean' },
      'mask-vocab': { type: 'string', default: String(LLAMA3_VOCAB) },
      streams: { type: 'string' },
      'stream-prompt': { type: 'string' },
      'stream-tokens': { type: 'string' },
      'prefix-tokens': { type: 'string' },
      'fixtures-only': { type: 'boolean' },
      'mtp-tokens': { type: 'string' },
      hybrid: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return void console.log(USAGE);
  const targets = values.target === 'both' ? ['node', 'chromium'] : values.target === 'cpu' ? [] : [values.target!];
  if (!targets.every((t) => t === 'node' || t === 'chromium')) throw new Error(`--target ${values.target}: expected node, chromium, both or cpu`);
  const maskVocabs = numbers(values['mask-vocab'])!.filter((n) => n !== 0);
  for (const n of maskVocabs) if (!(Number.isInteger(n) && n > 0)) throw new Error(`--mask-vocab: ${values['mask-vocab']} is not a list of positive integers`);
  if (values.preset && !PRESETS.includes(values.preset as Preset)) throw new Error(`--preset ${values.preset}: expected ${PRESETS.join(', ')}`);
  const overrides: Partial<BenchSettings> = {
    promptLengths: numbers(values['prompt-lengths']),
    decodeTokens: numbers(values['decode-tokens'])?.[0],
    prefillChunk: numbers(values['prefill-chunk'])?.[0],
    profileSteps: numbers(values['profile-steps'])?.[0],
    profilePrefill: values['profile-prefill'],
    integerDot: values['integer-dot'],
    mtpTokens: numbers(values['mtp-tokens'])?.[0],
    streamPromptTokens: numbers(values['stream-prompt'])?.[0],
    streamTokens: numbers(values['stream-tokens'])?.[0],
  };
  for (const [k, v] of Object.entries(overrides)) {
    if (typeof v === 'boolean') continue;
    for (const n of [v].flat()) if (n !== undefined && !(Number.isInteger(n) && (n as number) > 0)) throw new Error(`--${k}: ${v} is not a positive integer`);
  }
  // These two take 0 (skip).
  const streams = numbers(values.streams);
  if (streams && !streams.every((n) => Number.isInteger(n) && n >= 0)) throw new Error(`--streams: ${values.streams} is not a list of integers ≥ 0`);
  if (streams) overrides.streams = streams.filter((n) => n > 0);
  const prefixTokens = numbers(values['prefix-tokens'])?.[0];
  if (prefixTokens !== undefined && !(Number.isInteger(prefixTokens) && prefixTokens >= 0)) throw new Error(`--prefix-tokens: ${values['prefix-tokens']} is not an integer ≥ 0`);
  if (prefixTokens !== undefined) overrides.prefixTokens = prefixTokens;
  const decodeContexts = numbers(values['decode-contexts']);
  if (decodeContexts && !decodeContexts.every((n) => Number.isInteger(n) && n >= 0)) throw new Error(`--decode-contexts: ${values['decode-contexts']} is not a list of integers ≥ 0`);
  if (decodeContexts) overrides.decodeContexts = decodeContexts.filter((n) => n > 0);
  const formats = values.formats!.split(',').map((f) => f.trim()) as GGUFVariant[];
  if (values['fixtures-only']) {
    // No GPU here: the preset must be named (its default depends on the adapter).
    if (!values.preset) throw new Error('--fixtures-only needs --preset');
    const t0 = performance.now();
    const paths = await ensureFixture(benchFixture(values.arch as Arch, values.preset as Preset), { hf: [], gguf: formats });
    return void console.log(`[bench] fixtures ${formats.join(', ')} in ${paths.root} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  }

  if (values.hybrid) return void (await runHybrid(values.preset as Preset | undefined, values.formats === DEFAULT_FORMATS ? 'Q8_0' : formats[0]!, decodeContexts, overrides, values.json!));

  // CPU only, before any GPU work shares the cores with it.
  const maskCost: MaskCostResult[] = [];
  for (const vocabSize of maskVocabs) {
    const r = await measureMaskCost({ vocabSize });
    console.log(`[cpu] grammar mask at a ${vocabSize}-token vocabulary: ${r.meanMs.toFixed(3)} ms/token mean, ${r.p95Ms.toFixed(3)} p95 over ${r.tokens} tokens (compile ${r.compileMs.toFixed(0)} ms)`);
    maskCost.push(r);
  }
  if (targets.length === 0) return void (await writeReport({ date: new Date().toISOString(), preset: '-', arch: '-', targets: [], maskCost }, values.json!));

  const icd = useSwiftShaderIfNoGPU();
  if (icd) console.log(`[bench] no GPU found: Vulkan uses SwiftShader (${icd})`);
  const { nodeGPU } = await import('../gpu/node-gpu');
  const nodeGpu: GPUContext = await acquireGPU({ gpu: await nodeGPU(BENCH_DAWN_FLAGS) });
  if (REAL_GPU && isEmulated(nodeGpu.info)) {
    nodeGpu.destroy();
    throw new Error(`WEBGPU_LLM_REAL_GPU is set but Node's adapter is CPU-emulated (${describeAdapter(nodeGpu.info)}): no GPU found`);
  }
  const preset = (values.preset ?? defaultPreset(nodeGpu.info)) as Preset;
  const arch = values.arch as Arch;
  console.log(`[bench] ${arch} ${preset} preset, formats ${formats.join(', ')}; writing fixtures if needed…`);
  const paths = await ensureFixture(benchFixture(arch, preset), { hf: [], gguf: formats });

  const report: BenchReport = { date: new Date().toISOString(), preset, arch, targets: [], skipped: [], maskCost };
  const log = (line: string) => console.log(line);
  const nodeInfo = nodeGpu.info;
  if (targets.includes('node')) {
    const models = formats.map((format) => ({ format, location: paths.gguf[format]! }));
    report.targets.push(await runTarget('node', nodeGpu, models, overrides, log));
    // Written as soon as the target finishes: a later one that fails or hangs leaves this one's figures.
    await writeReport(report, values.json!, true);
  }
  nodeGpu.destroy();
  if (targets.includes('chromium')) {
    const server = await serveDirectory(paths.root);
    try {
      const models = formats.map((format) => ({ format, url: `${server.url}/${relative(paths.root, paths.gguf[format]!).split('\\').join('/')}` }));
      const r = await runInChromium(models, overrides, nodeInfo);
      if ('skipped' in r) {
        console.log(`[chromium] skipped: ${r.skipped}`);
        report.skipped!.push({ target: 'chromium', reason: r.skipped });
      } else report.targets.push(r);
    } finally {
      await server.close();
    }
  }

  await writeReport(report, values.json!);
}

/** The bench's fixture of `arch`: with its MTP head where the family's checkpoints ship one (Qwen3.5), for the speculative part. */
function benchFixture(arch: Arch, preset: Preset): { arch: Arch; preset: Preset; mtp?: boolean } {
  return { arch, preset, ...(ARCH[arch]?.mtp ? { mtp: true } : {}) };
}

/** The hybrid case alone, in Node (./hybrid.ts): a table on stdout, the results as the JSON report. */
async function runHybrid(preset: Preset | undefined, format: GGUFVariant, contexts: number[] | undefined, o: Partial<BenchSettings>, json: string): Promise<void> {
  const icd = useSwiftShaderIfNoGPU();
  if (icd) console.log(`[bench] no GPU found: Vulkan uses SwiftShader (${icd})`);
  const { nodeGPU } = await import('../gpu/node-gpu');
  const gpu = await acquireGPU({ gpu: await nodeGPU(BENCH_DAWN_FLAGS) });
  try {
    const settings = { preset: preset ?? 'small', format, contexts: contexts?.length ? contexts : [1024, 8192], steps: o.decodeTokens ?? 8, prefillChunk: o.prefillChunk ?? 512 };
    console.log(`[bench] hybrid case on ${describeAdapter(gpu.info)}: ${settings.preset} preset, ${format}, contexts ${settings.contexts.join(', ')}, ${settings.steps} steps each`);
    const results = await benchHybrid(gpu, settings, (line) => console.log(line));
    const mtp = await benchHybridMtp(gpu, settings, o.mtpTokens, (line) => console.log(line));
    console.log('\n' + formatHybrid(results) + '\n\n' + formatMtp(`qwen35 ${settings.preset} ${format}`, mtp, isEmulated(gpu.info)).join('\n'));
    await mkdir(dirname(json), { recursive: true });
    await writeFile(json, JSON.stringify({ date: new Date().toISOString(), adapter: describeAdapter(gpu.info), settings, hybrid: results, mtp }, null, 2) + '\n');
    console.log(`\n[bench] JSON report: ${json}`);
  } finally {
    gpu.destroy();
  }
}

/** Writes the JSON report (again, as each target finishes); prints the tables only at the end (`partial` false). */
async function writeReport(report: BenchReport, path: string, partial = false): Promise<void> {
  if (!partial) console.log('\n' + formatReport(report));
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, JSON.stringify(report, null, 2) + '\n');
  console.log(`\n[bench] JSON report${partial ? ' (so far)' : ''}: ${path}`);
}

/** Serves the bench page with Vite and runs it in headless Chromium. */
async function runInChromium(models: Array<{ format: string; url: string }>, overrides: Partial<BenchSettings>, node: GPUDescription): Promise<TargetResult | { skipped: string }> {
  const { createServer } = await import('vite');
  const { chromium } = await import('playwright');
  const { chromiumPath, chromiumArgs } = await import('../../scripts/chromium.mjs');
  const vite = await createServer({ root: ROOT, configFile: resolve(ROOT, 'vite.config.ts'), logLevel: 'warn', server: { host: '127.0.0.1', port: 0 } });
  await vite.listen();
  const base = vite.resolvedUrls?.local[0];
  if (!base) throw new Error('the Vite server for the bench page did not report a URL');
  const browser = await chromium.launch({ executablePath: chromiumPath() ?? undefined, args: [...chromiumArgs, ...BENCH_CHROMIUM_FLAGS], headless: true });
  try {
    const page = await browser.newPage();
    page.on('console', (m) => console.log(m.text()));
    page.on('pageerror', (e) => console.error(`[chromium] page error: ${e.message}`));
    await page.goto(new URL('src/bench/page/index.html', base).href);
    await page.waitForFunction(() => window.benchReady === true, undefined, { timeout: 60_000 });
    const verdict = chromiumVerdict(await page.evaluate(() => window.benchAdapter()), node, REAL_GPU);
    if (!verdict.run) return { skipped: verdict.reason };
    return await page.evaluate((args) => window.runBench(args), { models, overrides });
  } finally {
    await browser.close();
    await vite.close();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? `[bench] ${e.message}` : e);
    process.exit(1);
  },
);
