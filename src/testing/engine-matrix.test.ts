/**
 * The engine grid's coverage: every weight type and mix on the carriers (a dense and an MoE
 * family), every family's HF folder and five GGUF formats, each run by the main grid or by exactly
 * one part of the short type grid, naming only files the fixture generator writes;
 * Chromium's sample runs every architecture and every written file format (HF folders, GGUF's
 * float types, the mixes) at least once.
 */
import { describe, expect, it } from 'vitest';
import { ARCH, ARCHES } from '../model/arch';
import { GGUF_VARIANTS, MIX_NAMES } from './fixtures/gguf-layout';
import { HF_DTYPES } from './fixtures/write';
import { LAYOUT_GRID, MAIN_GRID, requiredFormats, TYPE_CARRIERS, TYPE_GROUPS, typeGrid } from './engine-matrix';
import { BROWSER_ENGINE_CASES } from './browser-engine-cases';

const WRITTEN = new Set<string>([...HF_DTYPES.map((d) => `hf-${d}`), ...GGUF_VARIANTS]);

describe('the engine grid', () => {
  it.each(ARCHES)('%s: every required format runs once, long or short', (arch) => {
    const long = MAIN_GRID.find(([a]) => a === arch)?.[1] ?? [];
    const short = Object.values(TYPE_GROUPS).flatMap((g) => typeGrid(g).find(([a]) => a === arch)?.[1] ?? []);
    expect(short.filter((f) => long.includes(f))).toEqual([]);
    expect([...long, ...short].sort()).toEqual([...new Set([...long, ...requiredFormats(arch)])].sort());
  });

  it('names only formats the fixture generator writes, and requires every GGUF type of the carriers', () => {
    const named = [...MAIN_GRID.flatMap(([, f]) => f), ...ARCHES.flatMap(requiredFormats), ...Object.values(TYPE_GROUPS).flat()];
    expect(named.filter((f) => !WRITTEN.has(f))).toEqual([]);
    // A weight type added to the generator must join the grid (NEW_TYPES or a group).
    for (const arch of TYPE_CARRIERS) expect(GGUF_VARIANTS.filter((v) => !requiredFormats(arch).includes(v))).toEqual([]);
    // A dense carrier and an MoE one: the experts' kernels dequantise every type too.
    expect(TYPE_CARRIERS.map((a) => ARCH[a].moe !== null)).toEqual([false, true]);
  });

  it('runs each other fixture layout (Granite 4.0-H) on formats its variant writes, each once', () => {
    for (const { long, short, variant } of LAYOUT_GRID) {
      const all = [...long, ...short];
      expect(all.length).toBeGreaterThan(0);
      expect(new Set(all).size).toBe(all.length);
      expect(all.filter((f) => !WRITTEN.has(f))).toEqual([]);
      const written = [...(variant.which?.hf ?? []).map((d) => `hf-${d}`), ...(variant.which?.gguf ?? [])];
      expect(all.filter((f) => !written.includes(f))).toEqual([]);
    }
  });

  it("Chromium's sample runs every architecture and every file format the generator writes", () => {
    const archs = new Set(BROWSER_ENGINE_CASES.map(([a]) => a));
    const formats = new Set(BROWSER_ENGINE_CASES.map(([, f]) => f));
    expect(ARCHES.filter((a) => !archs.has(a))).toEqual([]);
    // Every loader path: HF folders, GGUF's float types, and a llama-quantize mix.
    const files = [...HF_DTYPES.map((d) => `hf-${d}`), 'F32', 'F16', 'BF16'];
    expect(files.filter((f) => !formats.has(f))).toEqual([]);
    expect([...formats].some((f) => (MIX_NAMES as readonly string[]).includes(f))).toBe(true);
    expect([...formats].filter((f) => !WRITTEN.has(f))).toEqual([]);
  });
});
