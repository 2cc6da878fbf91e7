/**
 * The built CLI as a user runs it: `vite build --mode node` (the library's Node part) into a
 * scratch folder, then `bin/webgpu-llm.js generate` as a child process on the tiny fixture (a GGUF
 * path, and a Hugging Face folder over HTTP), compared with the CPU reference's greedy tokens.
 */
import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ensureLoraFixture } from '../testing/fixtures/lora-write';
import { mergedReference } from '../testing/lora-reference';
import { greedy, ReferenceModel } from '../reference/forward';
import { stableGreedy } from '../testing/stable-greedy';
import { ensureFixture, HYBRID_FIXTURES } from '../testing/fixtures/shared';
import { serveDirectory, type StaticServer } from '../testing/server';
import type { GenerateOutput } from './generate';
import { main } from './main';
import { hasHardwareVulkan, SWIFTSHADER_ICD, useSwiftShaderIfNoGPU, type VulkanProbe } from './vulkan';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
// Inside the repository, so the build's external imports resolve from its node_modules.
const SCRATCH = join(ROOT, '.cache', 'cli-test');
const BIN = join(SCRATCH, 'bin', 'webgpu-llm.js');
const PROMPT = [1, 17, 42, 99, 7, 250, 3, 64];
const STEPS = 12;
/** Greedy ids are compared up to the reference's first near-tie (random weights make some). */
const TIE = 1e-3;

async function cli(...args: string[]): Promise<GenerateOutput> {
  // The CLI finds SwiftShader on its own when there is no GPU: do not hand it VK_ICD_FILENAMES.
  const env = { ...process.env };
  delete env.VK_ICD_FILENAMES;
  const { stdout } = await run(process.execPath, [BIN, 'generate', ...args], { env, cwd: ROOT, timeout: 120_000 });
  return JSON.parse(stdout) as GenerateOutput;
}

/** The reference's greedy ids (with a LoRA adapter merged, when given), cut at its first step whose top-2 logit margin is below TIE. */
async function reference(location: string, lora?: string): Promise<number[]> {
  const opened = await openModel(location);
  const ref = lora ? await mergedReference(opened, lora) : await ReferenceModel.load(opened);
  return stableGreedy(ref, PROMPT, STEPS, TIE);
}

describe('webgpu-llm generate (the built CLI in a child process)', () => {
  let paths: Awaited<ReturnType<typeof ensureFixture>>;
  let server: StaticServer;

  beforeAll(async () => {
    paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
    server = await serveDirectory(paths.root);
    await mkdir(join(SCRATCH, 'bin'), { recursive: true });
    await copyFile(join(ROOT, 'bin', 'webgpu-llm.js'), BIN);
    await run(process.execPath, [join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--mode', 'node', '--outDir', join(SCRATCH, 'dist'), '--emptyOutDir', '--logLevel', 'error'], {
      cwd: ROOT,
    });
  });
  afterAll(() => server?.close());

  // Two model loads on SwiftShader: about 10 s on an idle machine, much more on a busy one.
  it('prints the reference greedy ids at temperature 0, from a GGUF path and from a Hugging Face folder URL', { timeout: 180_000 }, async () => {
    const common = ['--prompt-ids', PROMPT.join(','), '--max-tokens', String(STEPS), '--temperature', '0', '--ignore-eos', '--precision', 'f32', '--json'];
    const folder = `${server.url}/hf-F32`;
    const [fromGguf, fromHf] = await Promise.all([cli('--model', paths.gguf.F32!, ...common), cli('--model', folder, ...common)]);
    for (const [got, location] of [
      [fromGguf, paths.gguf.F32!],
      [fromHf, folder],
    ] as const) {
      const want = await reference(location);
      expect(want.length).toBeGreaterThan(0);
      expect(got.ids.slice(0, want.length)).toEqual(want);
      expect(got.ids).toHaveLength(STEPS);
      expect(got.finish_reason).toBe('length');
      expect(typeof got.text).toBe('string');
      expect(got.timings.prompt_tokens).toBe(PROMPT.length);
      expect(got.timings.completion_tokens).toBe(STEPS);
    }
  });

  it('runs with a LoRA adapter (--lora PATH): the merged reference’s greedy ids', { timeout: 180_000 }, async () => {
    const { lora } = await ensureLoraFixture({ arch: 'llama', preset: 'tiny' });
    const adapter = lora.peft['all-r8-rslora']!;
    const got = await cli('--model', paths.gguf.Q8_0!, '--lora', adapter, '--prompt-ids', PROMPT.join(','), '--max-tokens', String(STEPS), '--temperature', '0', '--ignore-eos', '--precision', 'f32', '--json');
    const want = await reference(paths.gguf.Q8_0!, adapter);
    expect(want.length).toBeGreaterThan(0);
    expect(got.ids.slice(0, want.length)).toEqual(want);
    // and the adapter changed the output
    expect(got.ids).not.toEqual(greedy(await ReferenceModel.load(await openModel(paths.gguf.Q8_0!)), PROMPT, STEPS));
  });

  // A family with recurrent layers (issue #29) from its Q8_0 GGUF. The CLI's path is the same for every
  // family, and the grid checks each hybrid family's engine = reference: one family here (Granite 4.0-H,
  // whose conv bias, scan and grouped norm are the newest kernels), as each cold CLI load on SwiftShader
  // costs about 50 s. The HTTP server runs all three (src/transport/serve-hybrids.test.ts).
  it.each(HYBRID_FIXTURES.filter(([name]) => name === 'granite-4.0-h'))('runs the hybrid %s from its GGUF: the reference greedy ids', { timeout: 180_000 }, async (_, options) => {
    const { gguf } = await ensureFixture(options, { hf: [], gguf: ['Q8_0'] });
    const got = await cli('--model', gguf.Q8_0!, '--prompt-ids', PROMPT.join(','), '--max-tokens', String(STEPS), '--temperature', '0', '--ignore-eos', '--precision', 'f32', '--json');
    const want = await reference(gguf.Q8_0!);
    expect(want.length).toBeGreaterThan(0);
    expect(got.ids.slice(0, want.length)).toEqual(want);
  });
});

describe('the CLI entry', () => {
  function capture() {
    const io = { stdout: '', stderr: '', out: (t: string) => void (io.stdout += t), err: (t: string) => void (io.stderr += t) };
    return io;
  }

  it('rejects a generate without a model, or with both prompt forms, with the usage and status 2', async () => {
    const io = capture();
    expect(await main(['generate', '--prompt', 'hi'], io)).toBe(2);
    expect(io.stderr).toMatch(/--model is required[\s\S]*usage: webgpu-llm/);
    expect(await main(['generate', '--model', 'x.gguf', '--prompt', 'hi', '--prompt-ids', '1'], io)).toBe(2);
    expect(io.stderr).toMatch(/exactly one of --prompt and --prompt-ids/);
    expect(await main(['generate', '--model', 'x.gguf', '--prompt-ids', '1,a'], io)).toBe(2);
    expect(await main(['generate', '--model', 'x.gguf', '--prompt-ids', '1', '--lora-scale', '2'], io)).toBe(2);
    expect(io.stderr).toMatch(/--lora-scale needs --lora/);
  });

  it('names the model file in every load error, as serve does (head count 0, sizes contradicting the tensors)', async () => {
    const paths = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] });
    const broken: [string, (c: Record<string, number>) => void, RegExp][] = [
      ['heads-0', (c) => void (c.num_attention_heads = 0), /num_attention_heads/],
      ['vocab', (c) => void (c.vocab_size += 64), /token_embd.weight has shape/],
      ['hidden', (c) => void (c.hidden_size += 64), /has shape/],
    ];
    for (const [name, change, problem] of broken) {
      const dir = join(SCRATCH, 'broken', name);
      await cp(paths.hf.F32!, dir, { recursive: true });
      const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
      change(config);
      await writeFile(join(dir, 'config.json'), JSON.stringify(config));
      const io = capture();
      expect(await main(['generate', '--model', dir, '--prompt-ids', '1,2', '--max-tokens', '1'], io), name).toBe(1);
      expect(io.stderr, name).toContain(dir);
      expect(io.stderr, name).toMatch(problem);
    }
  });

  it('names an unknown command', async () => {
    const io = capture();
    expect(await main(['frobnicate'], io)).toBe(2);
    expect(io.stderr).toContain('unknown command "frobnicate"');
  });
});

describe('the SwiftShader fallback for Vulkan', () => {
  const probe = (files: Record<string, string[]>, nodes: string[] = []): VulkanProbe => ({
    exists: (p) => p === SWIFTSHADER_ICD || nodes.includes(p),
    list: (d) => files[d] ?? [],
  });

  it('points Vulkan at SwiftShader when only software or device-less ICDs are installed', () => {
    const env: Record<string, string> = {};
    const mesa = probe({ '/usr/share/vulkan/icd.d': ['lvp_icd.x86_64.json', 'intel_icd.x86_64.json'] });
    expect(hasHardwareVulkan(mesa)).toBe(false);
    expect(useSwiftShaderIfNoGPU(env, mesa)).toBe(SWIFTSHADER_ICD);
    expect(env.VK_ICD_FILENAMES).toBe(SWIFTSHADER_ICD);
  });

  it('leaves the environment alone with a hardware ICD and a GPU, or when VK_ICD_FILENAMES is set', () => {
    const nvidia = probe({ '/etc/vulkan/icd.d': ['nvidia_icd.json'] }, ['/dev/nvidia0']);
    const env: Record<string, string> = {};
    expect(useSwiftShaderIfNoGPU(env, nvidia)).toBeNull();
    expect(env.VK_ICD_FILENAMES).toBeUndefined();
    const set = { VK_ICD_FILENAMES: '/x.json' };
    expect(useSwiftShaderIfNoGPU(set, probe({}))).toBeNull();
    expect(set.VK_ICD_FILENAMES).toBe('/x.json');
  });
});
