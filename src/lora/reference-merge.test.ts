/**
 * The fixture adapters end to end: read over HTTP (PEFT folder and GGUF, through the loader and
 * its cache), fitted to the HF and the GGUF base, merged in float64, run by the CPU reference.
 * Both formats of one adapter must give the same merged weights on either base, and the merged
 * model must differ from the base. The hybrids' adapters include one of their recurrent layers
 * alone (LFM2's conv, Granite 4.0-H's Mamba-2, Qwen3.5's DeltaNet, whose value heads GGUF files tile: B's rows, dn_out's
 * A columns move between the orders) and LFM2's own module names (out_proj, w1/w2/w3).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeDirCache } from '../loader/cache-node';
import { openModel, type OpenedModel } from '../model/open';
import { unpermuteQK } from '../model/qk-rows';
import { logitsFor, ReferenceModel } from '../reference/forward';
import { reorderVHeads, V_HEAD_SPANS } from '../model/v-heads';
import { fixtureLoraSpecs, loraScale, type LoraSpec } from '../testing/fixtures/lora';
import { makeFixture, type FixtureOptions } from '../testing/fixtures/model';
import { ensureLoraFixture } from '../testing/fixtures/lora-write';
import { baseWeights } from '../testing/lora-reference';
import { serveDirectory, type StaticServer } from '../testing/server';
import { openLoraWithCache } from './load';
import { mergeLora } from './merge';
import { baseTensorName, layerHolds, targetInfo } from './targets';
import type { LoraAdapter } from './types';

/** Largest |a - b| relative to max |b| over one tensor. */
function relDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  let s = 0;
  for (let i = 0; i < b.length; i++) {
    d = Math.max(d, Math.abs(a[i]! - b[i]!));
    s = Math.max(s, Math.abs(b[i]!));
  }
  return d / s;
}

function maxAbsDiff(a: Float32Array[], b: Float32Array[]): number {
  let worst = 0;
  b.forEach((w, t) => w.forEach((v, i) => (worst = Math.max(worst, Math.abs(a[t]![i]! - v)))));
  return worst;
}

// Granite 4.0-H: Mamba-2's in_proj and out_proj, in a granitehybrid GGUF adapter (its ssm_out not the DeltaNet's).
const FIXTURES: FixtureOptions[] = [...(['llama', 'qwen3', 'lfm2', 'qwen35'] as const).map((arch) => ({ arch, preset: 'tiny' as const })), { arch: 'granite', preset: 'tiny', hybrid: { mambaGroups: 2 } }];

describe.each(FIXTURES.map((f) => [f.hybrid ? `${f.arch} hybrid` : f.arch, f] as const))('LoRA adapters of the tiny %s fixture', (_, fixture) => {
  const SPECS: LoraSpec[] = fixtureLoraSpecs(makeFixture(fixture));
  let server: StaticServer;
  let cacheDir: string;
  let hf: OpenedModel;
  let gg: OpenedModel;
  let hfW: Map<string, Float32Array>;
  let ggW: Map<string, Float32Array>;
  // Each fixture adapter in both formats, fitted to the HF base and to the GGUF base.
  const adapters = new Map<string, { peft: LoraAdapter; gguf: LoraAdapter; peftOnGGUF: LoraAdapter; ggufOnGGUF: LoraAdapter }>();

  beforeAll(async () => {
    const { model, lora } = await ensureLoraFixture(fixture);
    server = await serveDirectory(model.root);
    cacheDir = await mkdtemp(join(tmpdir(), 'lora-cache-'));
    const at = (p: string) => `${server.url}/${relative(model.root, p).split('\\').join('/')}`;
    hf = await openModel(at(model.hf.F32!));
    gg = await openModel(at(model.gguf.F32!));
    hfW = await baseWeights(hf);
    ggW = await baseWeights(gg);
    const cache = nodeDirCache(cacheDir);
    for (const s of SPECS) {
      adapters.set(s.name, {
        peft: await openLoraWithCache(at(lora.peft[s.name]!), hf.config, { cache }),
        gguf: await openLoraWithCache(at(lora.gguf[s.name]!), hf.config, { cache }),
        peftOnGGUF: await openLoraWithCache(at(lora.peft[s.name]!), gg.config, { cache: false }),
        ggufOnGGUF: await openLoraWithCache(at(lora.gguf[s.name]!), gg.config, { cache: false }),
      });
    }
  });

  /** The matrices the spec adapts in this model: its targets on the layers holding them. */
  const held = (spec: LoraSpec) => Array.from({ length: hf.config.numLayers }, (_, l) => spec.targets.filter((x) => layerHolds(hf.config, l, x)).map((x) => baseTensorName(l, x))).flat();

  afterAll(async () => {
    await server?.close();
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
  });

  it.each(SPECS.map((s) => [s.name, s] as const))('%s: reads the same ranks, targets and scale from the PEFT folder and the GGUF', (name, spec) => {
    const { peft, gguf } = adapters.get(name)!;
    const summary = (a: LoraAdapter) => a.weights.map((w) => `${w.layer}.${w.target}.r${w.rank}`);
    expect(summary(gguf)).toEqual(summary(peft));
    expect(peft.weights.length).toBe(held(spec).length);
    for (const [p, g] of peft.weights.map((w, i) => [w, gguf.weights[i]!] as const)) {
      expect(p.scale).toBe(loraScale(spec));
      // the GGUF stores alpha · sqrt(r) as f32 for rsLoRA: equal up to that rounding
      expect(g.scale).toBeCloseTo(p.scale, 5);
    }
  });

  it.each(SPECS.map((s) => [s.name] as const))('%s: merges to the same weights from both formats, on the HF base and on the GGUF base', (name) => {
    const a = adapters.get(name)!;
    const onHF = [mergeLora(hf.config, hfW, a.peft), mergeLora(hf.config, hfW, a.gguf)];
    const onGG = [mergeLora(gg.config, ggW, a.peftOnGGUF), mergeLora(gg.config, ggW, a.ggufOnGGUF)];
    for (const w of a.peft.weights) {
      const t = baseTensorName(w.layer, w.target);
      expect(relDiff(onHF[1]!.get(t)!, onHF[0]!.get(t)!)).toBeLessThan(1e-6);
      expect(relDiff(onGG[1]!.get(t)!, onGG[0]!.get(t)!)).toBeLessThan(1e-6);
      // and the GGUF base's merged rows, back in HF order, are the HF base's merged rows
      const heads = w.target === 'q' ? hf.config.numHeads : hf.config.numKvHeads;
      const rotary = gg.config.ropeStyle === 'interleaved' && (w.target === 'q' || w.target === 'k');
      const span = gg.config.deltaNet && V_HEAD_SPANS[targetInfo(w.target).ggufTensor];
      const ggMerged = rotary
        ? unpermuteQK(onGG[1]!.get(t)!, w.outFeatures, heads)
        : span
          ? reorderVHeads(onGG[1]!.get(t)!, w.outFeatures, w.inFeatures, span, gg.config.deltaNet!, 'tiled', 'grouped')
          : onGG[1]!.get(t)!;
      expect(relDiff(ggMerged, onHF[0]!.get(t)!)).toBeLessThan(1e-6);
    }
  });

  it.each(SPECS.map((s) => [s.name, s] as const))('%s: changes exactly the targeted matrices', (name, spec) => {
    const merged = mergeLora(hf.config, hfW, adapters.get(name)!.peft);
    const changed = [...merged].filter(([t, v]) => v !== hfW.get(t)).map(([t]) => t);
    const want = held(spec);
    expect(changed.sort()).toEqual(want.sort());
    for (const t of changed) expect(relDiff(merged.get(t)!, hfW.get(t)!)).toBeGreaterThan(0.1);
  });

  it.each(SPECS.map((s) => [s.name] as const))('%s: gives the merged reference other logits than the base, the same from both bases and formats', (name) => {
    const a = adapters.get(name)!;
    const vocab = hf.config.vocabSize;
    const ids = Array.from({ length: 8 }, (_, i) => (i * 7919 + 13) % vocab);
    const base = logitsFor(ReferenceModel.fromWeights(hf.config, hfW), ids);
    // each base with the other format's adapter, so the q/k rows had to move both ways
    const merged = logitsFor(ReferenceModel.fromWeights(hf.config, mergeLora(hf.config, hfW, a.gguf)), ids);
    const mergedGG = logitsFor(ReferenceModel.fromWeights(gg.config, mergeLora(gg.config, ggW, a.peftOnGGUF), gg.ropeFreqFactors), ids);
    // measured: 3 .. 18 from the base (logit std ≈ 5), under 4e-6 between the two
    expect(maxAbsDiff(merged, base)).toBeGreaterThan(0.5);
    expect(maxAbsDiff(mergedGG, merged)).toBeLessThan(1e-4);
  });
});
