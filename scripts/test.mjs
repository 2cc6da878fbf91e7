#!/usr/bin/env node
// `npm test`: typecheck, unit tests in Node on Dawn, kernel and browser tests in headless Chromium,
// Playwright e2e against the Vite-served demo, then the packed library in scratch apps. Finds
// Chromium, or installs Debian's with apt when running as root on Debian; otherwise says how to
// install one.
import { execSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromiumPath } from './chromium.mjs';
import { ensureLavapipe } from './lavapipe.mjs';

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

function hasVulkanLoader() {
  try {
    return execSync('ldconfig -p', { encoding: 'utf8' }).includes('libvulkan.so.1');
  } catch {
    return false;
  }
}

function aptInstall(packages) {
  const isRoot = process.getuid?.() === 0;
  if (!isRoot || !existsSync('/usr/bin/apt-get')) return false;
  console.log(`[test] installing ${packages.join(' ')} with apt-get…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const run = (cmd) => spawnSync('sh', ['-c', cmd], { stdio: 'inherit', env }).status === 0;
  return run('apt-get update -qq') && run(`apt-get install -y -qq ${packages.join(' ')}`);
}

function ensureBrowserAndVulkan() {
  const missing = [];
  if (!chromiumPath()) missing.push('chromium');
  if (!hasVulkanLoader()) missing.push('libvulkan1');
  if (missing.length && !aptInstall(missing)) {
    console.error(
      `[test] missing: ${missing.join(', ')}.\n` +
        '  Debian/Ubuntu: sudo apt-get install chromium libvulkan1\n' +
        '  Elsewhere: install Chrome or Chromium and set CHROME_PATH=/path/to/chrome; Node tests need a Vulkan loader.',
    );
    process.exit(1);
  }
}

/**
 * The f16 step's files: the test files under `dirs` that mention f16 at all. A test named f16
 * (`-t f16`) is only in those, and every other file, isolated, would still start a fork and
 * import its module graph for nothing (37 of 65 files).
 */
function f16TestFiles(dirs) {
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.test.ts') && !e.name.endsWith('.browser.test.ts') ? [join(dir, e.name)] : [],
    );
  return dirs.flatMap(walk).filter((f) => readFileSync(f, 'utf8').includes('f16'));
}

/**
 * The browser step's first half: the files under these folders (a trailing /) or starting with
 * these paths; the second half takes the rest. About even on the last fresh-clone run's times.
 */
const BROWSER_HALF = ['src/engine/', 'src/structured/', 'src/transport/selfcheck', 'src/transport/embeddings'];

/**
 * Runs `cmd args` twice at once, the first on the files under `half`, the second on the others
 * (`--exclude`), each one's output held and printed whole when it ends, so the two never
 * interleave. Resolves to the worse exit status.
 */
function runHalves(cmd, args, half, env) {
  const runs = [
    [...args, ...half],
    [...args, ...half.flatMap((p) => ['--exclude', p.endsWith('/') ? `${p}**` : `${p}*`])],
  ].map(
    (a, i) =>
      new Promise((resolve) => {
        // Each its own Vite cache (vite.config.ts): two runs optimising dependencies into one folder at once break each other.
        const child = spawn(cmd, a, { env: { ...env, WEBGPU_LLM_VITE_CACHE: `node_modules/.vite-browser-${i + 1}` }, stdio: ['ignore', 'pipe', 'pipe'] });
        const out = [];
        child.stdout.on('data', (d) => out.push(d));
        child.stderr.on('data', (d) => out.push(d));
        child.on('close', (status) => {
          console.log(`\n[test] ── half ${i + 1} of 2 (${i === 0 ? half.join(', ') : 'the rest'}) ──`);
          process.stdout.write(Buffer.concat(out));
          resolve(status ?? 1);
        });
      }),
  );
  return Promise.all(runs).then((codes) => codes.find((c) => c !== 0) ?? 0);
}

const steps = [
  ['typecheck', 'npx', ['tsc', '--noEmit', '-p', 'tsconfig.json']],
  ['unit (Node, Dawn)', 'npx', ['vitest', 'run', '--project', 'node']],
  // SwiftShader has no shader-f16: the f16 kernels and engine run again on lavapipe (see lavapipe.mjs).
  // Each file isolated here: lavapipe slowed ten-fold on the kernel tests after the engine files
  // in one process (SwiftShader does not), and its compiles are few enough to repeat.
  ['f16 (Node, Dawn on lavapipe)', 'npx', ['vitest', 'run', '--project', 'node', '--isolate', '-t', 'f16', ...f16TestFiles(['src/kernels', 'src/engine', 'src/gpu', 'src/selfcheck'])], 'lavapipe'],
  // Two Chromiums side by side, each on half of the files: a page waits while SwiftShader runs and
  // SwiftShader idles while the page computes the reference, so one run leaves cores idle that the
  // other fills (as the Node step's two forks do).
  ['browser (Chromium)', 'npx', ['vitest', 'run', '--project', 'browser'], undefined, BROWSER_HALF],
  ['e2e (Playwright)', 'npx', ['playwright', 'test']],
  // The packed library installed into scratch apps (Vite, webpack, esbuild, no bundler): e2e/apps.
  ['packed library in apps (Playwright)', 'npx', ['playwright', 'test', '-c', 'e2e/apps']],
];

ensureBrowserAndVulkan();
const env = { ...process.env };
if (!env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD) && !env.WEBGPU_LLM_REAL_GPU) env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
if (!env.CHROME_PATH) env.CHROME_PATH = chromiumPath();

const only = process.argv.slice(2);
const started = Date.now();
for (const [name, cmd, args, driver, half] of steps) {
  if (only.length && !only.some((o) => name.startsWith(o))) continue;
  console.log(`\n[test] ── ${name} ──`);
  let stepEnv = env;
  if (driver === 'lavapipe' && env.WEBGPU_LLM_REAL_GPU) {
    console.log(`[test] ${name}: not needed (a real GPU ran the f16 tests in the step above)`);
    continue;
  } else if (driver === 'lavapipe') {
    const lvp = ensureLavapipe();
    if (!lvp) {
      // Under CI a skip would pass unseen: a green CI must mean the f16 tests ran.
      if (process.env.CI === 'true') {
        console.log(`[test] ${name}: FAILED (no lavapipe with shader-f16 here, and CI=true: the f16 tests must run in CI)`);
        process.exit(1);
      }
      console.log(`[test] ${name}: SKIPPED (no lavapipe with shader-f16 here; the f16 tests also skipped above)`);
      continue;
    }
    stepEnv = { ...env, ...lvp };
  }
  const t = Date.now();
  const status = half ? await runHalves(cmd, args, half, stepEnv) : spawnSync(cmd, args, { stdio: 'inherit', env: stepEnv }).status;
  console.log(`[test] ${name}: ${status === 0 ? 'ok' : 'FAILED'} in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  if (status !== 0) process.exit(status ?? 1);
}
console.log(`\n[test] all steps passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
