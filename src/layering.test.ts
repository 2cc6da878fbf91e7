/**
 * The layering of src/ (docs/ARCHITECTURE.md): each folder imports only the folders below it in
 * LAYERS, test support lives only in src/testing/, and no module imports itself back through a
 * cycle of imports (type-only ones included). Read from the sources' import lines (tests excluded: they may reach
 * anywhere), so a new upward import fails here with the file that made it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = dirname(fileURLToPath(import.meta.url));

/** What each folder may import (besides itself). Lower layers first. */
const LAYERS: Record<string, string[]> = {
  platform: [],
  gpu: [],
  formats: [],
  // Image processing (Idefics3's tiles and resampler): plain arithmetic on pixels.
  vision: ['platform'],
  model: ['formats', 'vision'],
  text: ['platform', 'model', 'formats'],
  kernels: ['gpu', 'formats', 'model'],
  structured: ['platform', 'text', 'model'],
  loader: ['formats', 'model'],
  lora: ['formats', 'model', 'loader'],
  engine: ['platform', 'vision', 'gpu', 'formats', 'model', 'text', 'kernels', 'structured', 'loader', 'lora'],
  reference: ['platform', 'vision', 'formats', 'model', 'text', 'kernels', 'structured', 'engine'],
  api: ['platform', 'vision', 'gpu', 'formats', 'model', 'text', 'structured', 'engine'],
  // selfcheck runs the tests' kernel and model comparisons (testing/) on a user's GPU.
  selfcheck: ['platform', 'vision', 'gpu', 'formats', 'model', 'text', 'kernels', 'structured', 'loader', 'lora', 'engine', 'reference', 'testing'],
  // The engine's Worker runs selfcheck too (selfCheck(): a dynamic import, a chunk of its own).
  transport: ['platform', 'vision', 'gpu', 'formats', 'model', 'text', 'kernels', 'structured', 'loader', 'engine', 'api', 'selfcheck'],
  cli: ['platform', 'vision', 'gpu', 'formats', 'model', 'text', 'loader', 'engine', 'api', 'transport', 'selfcheck'],
  // Test support and the benchmark sit above everything.
  testing: ['*'],
  bench: ['*'],
};

interface Source {
  file: string;
  imports: { target: string; typeOnly: boolean }[];
}

function sources(): Source[] {
  const out: Source[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts')) out.push(read(p));
    }
  };
  const read = (file: string): Source => {
    const text = readFileSync(file, 'utf8');
    const imports: Source['imports'] = [];
    const re = /^\s*(import|export)\s+(type\s+)?[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/gm;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      const spec = m[3] ?? m[4]!;
      if (!/\.(ts|wgsl)$/.test(spec) && spec.includes('.wgsl')) continue;
      const target = normalize(join(dirname(file), spec.endsWith('.wgsl') ? spec : spec.replace(/\.ts$/, '') + '.ts'));
      imports.push({ target, typeOnly: !!m[2] });
    }
    return { file, imports };
  };
  walk(SRC);
  return out;
}

const folderOf = (file: string) => {
  const rel = relative(SRC, file).split(/[\\/]/);
  return rel.length > 1 ? rel[0]! : null;
};

describe('the layering of src/', () => {
  const all = sources();

  it('has every folder in the layer table', () => {
    const folders = new Set(all.map((s) => folderOf(s.file)).filter((f): f is string => f !== null));
    expect([...folders].filter((f) => !(f in LAYERS))).toEqual([]);
  });

  it('never imports upward: each folder only from the folders below it', () => {
    const bad: string[] = [];
    for (const s of all) {
      const from = folderOf(s.file);
      if (!from || LAYERS[from]!.includes('*')) continue;
      for (const { target } of s.imports) {
        if (!target.startsWith(SRC) || target.endsWith('.wgsl')) continue;
        const to = folderOf(target);
        if (to && to !== from && !LAYERS[from]!.includes(to)) bad.push(`${relative(SRC, s.file)} → ${relative(SRC, target)}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('keeps test support in src/testing/ only', () => {
    const support = all.filter((s) => folderOf(s.file) !== 'testing' && /(^|[\\/])(test-[^\\/]*|[^\\/]*-fixture|[^\\/]*test-helpers?)\.ts$/.test(s.file));
    expect(support.map((s) => relative(SRC, s.file))).toEqual([]);
  });

  // Type-only imports count too: a type circle marks a type that lives in the wrong file.
  it('has no cycle of imports between modules, type-only ones included', () => {
    const graph = new Map(all.map((s) => [s.file, s.imports.filter((i) => i.target.endsWith('.ts')).map((i) => i.target)]));
    const state = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'open') {
        cycles.push([...path.slice(path.indexOf(f)), f].map((x) => relative(SRC, x)).join(' → '));
        return;
      }
      state.set(f, 'open');
      for (const t of graph.get(f) ?? []) if (graph.has(t)) visit(t, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of graph.keys()) visit(f, []);
    expect(cycles).toEqual([]);
  });
});
