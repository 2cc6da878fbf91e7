// Mesa's lavapipe, a CPU Vulkan driver that (unlike SwiftShader) offers shaderFloat16 and 16-bit
// storage, so Dawn exposes `shader-f16` on it: the f16 kernels and the f16 engine path then run on
// a machine without a GPU. Debian 12's Mesa 22.3 lavapipe is refused by Dawn (it lacks dynamic
// indexing of uniform arrays); bookworm-backports' Mesa 25 works. The package is unpacked into
// `.cache/lavapipe/` (never installed system-wide), next to an ICD manifest pointing at it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const DIR = join(ROOT, '.cache', 'lavapipe');
const ICD = join(DIR, 'lvp_icd.json');
const LIB_DIR = join(DIR, 'root', 'usr', 'lib', 'x86_64-linux-gnu');
const LIB = join(LIB_DIR, 'libvulkan_lvp.so');
const SUITE = 'bookworm-backports';
// libdrm from backports: Mesa 25 needs a newer one than bookworm has; LD_LIBRARY_PATH points at it.
const PACKAGES = [`mesa-vulkan-drivers/${SUITE}`, `libdrm2/${SUITE}`, `libdrm-amdgpu1/${SUITE}`];

/** The environment that points Vulkan (and so Dawn) at lavapipe, or undefined when it is not unpacked. */
export function lavapipeEnv() {
  if (!existsSync(LIB) || !existsSync(ICD)) return undefined;
  const ld = process.env.LD_LIBRARY_PATH ? `${LIB_DIR}:${process.env.LD_LIBRARY_PATH}` : LIB_DIR;
  return { VK_ICD_FILENAMES: ICD, LD_LIBRARY_PATH: ld };
}

/** Fetches and unpacks lavapipe when missing. Returns its environment, or undefined (and says why). */
export function ensureLavapipe() {
  const ready = lavapipeEnv();
  if (ready) return ready;
  const say = (m) => console.log(`[lavapipe] ${m}`);
  if (process.platform !== 'linux' || process.arch !== 'x64' || !existsSync('/usr/bin/apt-get')) {
    say('not a Debian x86-64 machine: the f16 tests will skip unless a GPU offers shader-f16');
    return undefined;
  }
  // Mesa 25's backport links against bookworm's LLVM 15; unpack it too where it is not installed.
  const packages = [...PACKAGES, ...(installed('libllvm15') ? [] : ['libllvm15/bookworm', 'libz3-4/bookworm'])];
  mkdirSync(join(DIR, 'lists', 'partial'), { recursive: true });
  mkdirSync(join(DIR, 'debs'), { recursive: true });
  const sources = join(DIR, 'sources.list');
  writeFileSync(sources, `deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian ${SUITE} main\n`);
  const apt = [
    `-o Dir::Etc::SourceList=${sources}`,
    '-o Dir::Etc::SourceParts=/dev/null',
    `-o Dir::State::Lists=${join(DIR, 'lists')}`,
    '-o Debug::NoLocking=1',
    // As root, apt would hand the download to its `_apt` user, which cannot write into the checkout.
    ...(process.getuid?.() === 0 ? ['-o APT::Sandbox::User=root'] : []),
  ].join(' ');
  say(`fetching Mesa's lavapipe from ${SUITE} into .cache/lavapipe (once)…`);
  const run = (cmd, cwd) => spawnSync('sh', ['-c', cmd], { cwd, stdio: ['ignore', 'ignore', 'inherit'] }).status === 0;
  if (!run(`apt-get -qq ${apt} update`) || !run(`apt-get -qq ${apt} download ${packages.join(' ')}`, join(DIR, 'debs'))) {
    say('could not download it (no access to deb.debian.org?): the f16 tests will skip');
    return undefined;
  }
  for (const deb of readdirSync(join(DIR, 'debs')).filter((f) => f.endsWith('.deb'))) {
    if (!run(`dpkg -x '${join(DIR, 'debs', deb)}' '${join(DIR, 'root')}'`)) return undefined;
  }
  if (!existsSync(LIB)) return undefined;
  writeFileSync(ICD, JSON.stringify({ file_format_version: '1.0.1', ICD: { library_path: LIB, api_version: '1.3.0' } }));
  return lavapipeEnv();
}

function installed(name) {
  return spawnSync('dpkg', ['-s', name], { stdio: 'ignore' }).status === 0;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const env = ensureLavapipe();
  if (!env) process.exit(1);
  console.log(Object.entries(env).map(([k, v]) => `export ${k}='${v}'`).join('\n'));
}
