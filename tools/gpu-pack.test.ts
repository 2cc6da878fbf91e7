/**
 * `npm run gpu-pack -- DIR` as a bare GPU host uses it: the pack built from this checkout, then its
 * run.sh run in a clean environment (no HOME, a PATH whose `node` and `npm` only record that they
 * were called), on SwiftShader since there is no GPU here: selfcheck (a sample) and a short bench on
 * the tiny preset, with their reports under $OUT.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, no declarations
import { gpuPack } from '../scripts/gpu-pack.mjs';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SCRATCH = join(ROOT, '.cache', 'gpu-pack-test');
const PACK = join(SCRATCH, 'pack');
const FAKE_BIN = join(SCRATCH, 'fake-bin');
const CALLED = join(SCRATCH, 'called');
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/** Runs the pack's run.sh as a bare host would: nothing of this environment but the Vulkan ICD (no GPU here). */
function runPack(out: string, ...args: string[]) {
  const env = { PATH: `${FAKE_BIN}:/usr/bin:/bin`, OUT: out, TMPDIR: join(SCRATCH, 'tmp'), VK_ICD_FILENAMES: SWIFTSHADER_ICD };
  return run('bash', [join(PACK, 'run.sh'), ...args], { env, cwd: SCRATCH, timeout: 280_000, maxBuffer: 2 ** 26 });
}

describe('the GPU pack', () => {
  let bytes = 0;
  beforeAll(async () => {
    await rm(SCRATCH, { recursive: true, force: true });
    await mkdir(FAKE_BIN, { recursive: true });
    await mkdir(join(SCRATCH, 'tmp'));
    // A `node` or `npm` on PATH must never run: these record the call and fail.
    for (const name of ['node', 'npm', 'npx']) {
      await writeFile(join(FAKE_BIN, name), `#!/bin/sh\necho ${name} >> '${CALLED}'\nexit 97\n`);
      await chmod(join(FAKE_BIN, name), 0o755);
    }
    ({ bytes } = await gpuPack(PACK));
  }, 300_000);
  afterAll(async () => {
    await rm(SCRATCH, { recursive: true, force: true });
  });

  it('is at most 48 MiB and holds Node, the bundles, Dawn and the libraries a bare host may lack', async () => {
    expect(bytes).toBeLessThanOrEqual(48 * 2 ** 20);
    for (const f of ['run.sh', 'node.xz', 'tree.tar.xz', 'lib/vulkan/libvulkan.so.1', 'lib/glvnd/libGLdispatch.so.0']) expect((await stat(join(PACK, f))).isFile(), f).toBe(true);
    const { stdout } = await run('tar', ['-tJf', join(PACK, 'tree.tar.xz')], { maxBuffer: 2 ** 26 });
    const files = stdout.split('\n');
    expect(files).toEqual(expect.arrayContaining(['tree/src/testing/fixtures/cli.mjs', 'tree/src/testing/fixtures/bench.mjs', 'tree/node_modules/webgpu/dist/linux-x64/dawn.node']));
    // No node_modules beyond the two packages loaded from disk (Dawn's addon, xgrammar's file).
    const modules = files.filter((f) => f.startsWith('tree/node_modules/') && f !== 'tree/node_modules/' && f !== 'tree/node_modules/@mlc-ai/');
    expect(modules.filter((f) => !/^tree\/node_modules\/(webgpu|@mlc-ai\/web-xgrammar)\//.test(f))).toEqual([]);
  });

  it('runs selfcheck with its own Node and writes the JSON report and the log under $OUT', async () => {
    const out = join(SCRATCH, 'out-selfcheck');
    const { stdout, stderr } = await runPack(out, 'selfcheck', '--only', 'kernel rope', '--only', 'kernel rms_norm');
    expect(stdout + stderr).toMatch(/Vulkan driver: .*swiftshader/);
    const report = JSON.parse(await readFile(join(out, 'selfcheck.json'), 'utf8'));
    expect(report.adapter.architecture).toBe('swiftshader');
    expect(report.results.map((r: { check: string }) => r.check)).toEqual(['rms_norm', 'rope', 'rope']);
    expect(report.pass).toBe(true);
    expect(await readFile(join(out, 'selfcheck.log'), 'utf8')).toMatch(/^PASS: 3 of 3 checks passed/m);
    await expect(stat(CALLED)).rejects.toThrow();
  }, 300_000);

  it('exits 1 when a check fails (an f16 run on an adapter without shader-f16)', async () => {
    const out = join(SCRATCH, 'out-f16');
    const err = await runPack(out, 'selfcheck', '--precision', 'f16').then(() => null, (e: { code: number }) => e);
    expect(err?.code).toBe(1);
    expect(JSON.parse(await readFile(join(out, 'selfcheck.json'), 'utf8')).unavailable).toEqual(['f16']);
  }, 300_000);

  it('runs the bench: fixtures written on the host, the report under $OUT', async () => {
    const out = join(SCRATCH, 'out-bench');
    const short = ['--prompt-lengths', '16', '--decode-tokens', '4', '--decode-contexts', '0', '--streams', '0', '--prefix-tokens', '0', '--mask-vocab', '0', '--profile-steps', '1'];
    await runPack(out, 'bench', '--preset', 'tiny', '--formats', 'Q8_0', ...short);
    const report = JSON.parse(await readFile(join(out, 'bench.json'), 'utf8'));
    expect(report.preset).toBe('tiny');
    expect(report.targets.map((t: { target: string }) => t.target)).toEqual(['node']);
    expect(await readFile(join(out, 'fixtures.log'), 'utf8')).toMatch(/fixtures Q8_0 in /);
    expect(await readFile(join(out, 'bench.log'), 'utf8')).toMatch(/Q8_0: decode [\d.]+ tokens\/s/);
    await expect(stat(CALLED)).rejects.toThrow();
  }, 300_000);
});
