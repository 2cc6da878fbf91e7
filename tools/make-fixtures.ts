/**
 * Writes fixture models in every format.
 *   npx vite-node tools/make-fixtures.ts [--arch llama] [--preset tiny] [--seed 0] [--tied|--untied]
 *                                        [--out DIR] [--gguf F16,Q4_K_M] [--hf F16]
 * Without --arch, all four architectures. Without --out, the shared cache (.fixtures/).
 * With --out, each fixture goes to DIR/<arch>-<preset>-<seed> (DIR itself when one --arch is given).
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ARCHES, type Arch } from '../src/model/arch';
import { GGUF_VARIANTS, type GGUFVariant } from '../src/testing/fixtures/gguf-layout';
import { PRESETS, type Preset } from '../src/testing/fixtures/model';
import { fixtureDir, fixtureName } from '../src/testing/fixtures/shared';
import { HF_DTYPES, writeFixture, type HFDType } from '../src/testing/fixtures/write';

const { values } = parseArgs({
  options: {
    arch: { type: 'string' },
    preset: { type: 'string', default: 'tiny' },
    seed: { type: 'string', default: '0' },
    tied: { type: 'boolean' },
    untied: { type: 'boolean' },
    out: { type: 'string' },
    gguf: { type: 'string' },
    hf: { type: 'string' },
  },
});

function oneOf<T extends string>(what: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new Error(`--${what} ${value}: expected one of ${allowed.join(', ')}`);
  return value as T;
}
const list = <T extends string>(what: string, v: string | undefined, all: readonly T[]): readonly T[] =>
  v === undefined ? all : v === '' ? [] : v.split(',').map((x) => oneOf(what, x.trim(), all));

const archs: Arch[] = values.arch ? [oneOf('arch', values.arch, ARCHES)] : [...ARCHES];
const preset = oneOf<Preset>('preset', values.preset!, PRESETS);
const seed = Number(values.seed);
if (!Number.isInteger(seed)) throw new Error(`--seed ${values.seed}: expected an integer`);
const tied = values.tied ? true : values.untied ? false : undefined;
const which = { gguf: list<GGUFVariant>('gguf', values.gguf, GGUF_VARIANTS), hf: list<HFDType>('hf', values.hf, HF_DTYPES) };

for (const arch of archs) {
  const opts = { arch, preset, seed, tied };
  const dir = values.out ? (values.arch ? values.out : join(values.out, fixtureName(opts))) : join(fixtureDir(), fixtureName(opts));
  const t0 = performance.now();
  const paths = await writeFixture(dir, opts, which);
  console.log(`${fixtureName(opts)}: ${paths.root} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
}
