/**
 * LoRA adapters on the GPU engine in headless Chromium against the reference with the adapter
 * merged in float64 (both run in the page), then through createEngine's Worker: adapters loaded,
 * picked per request by `model: "llama:<name>"` and `lora_path`, listed and unloaded over comlink.
 */
import OpenAI from 'openai';
import { describe, expect, inject, it } from 'vitest';
import { createEngine } from '../index';
import { openModel } from '../model/open';
import { expectEngineMatchesReference } from '../testing/engine-check';
import { testGPU } from '../testing/gpu';
import { baseWeights, mergedReference } from '../testing/lora-reference';
import { GpuEngine } from './engine';

const url = (variant: string) => `${inject('fixturesURL')}/${inject('fixtures').llama![variant]}`;
const LOGIT_TOLERANCE = 1e-3; // f32 path, as in lora.test.ts

describe('LoRA adapters in Chromium', () => {
  it('each adapter gives the merged reference’s greedy tokens and logits (GGUF Q8_0 base; PEFT and GGUF adapters)', async () => {
    const opened = await openModel(url('Q8_0'));
    const weights = await baseWeights(opened);
    const engine = await GpuEngine.load(opened, { gpu: await testGPU(), precision: 'f32', lora: { qv: url('lora/qv-r4'), all: url('lora/all-r8-rslora.gguf') }, loraPool: { maxRank: 8 } });
    try {
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 31) % opened.config.vocabSize);
      for (const [name, variant] of [['qv', 'lora/qv-r4'], ['all', 'lora/all-r8-rslora.gguf']] as const) {
        await expectEngineMatchesReference(engine, await mergedReference(opened, url(variant), weights), prompt, 12, LOGIT_TOLERANCE, name);
      }
    } finally {
      await engine.dispose();
    }
  });

  it('loads, picks, lists and unloads adapters through createEngine’s Worker', async () => {
    const engine = await createEngine({ model: url('Q8_0'), cache: false, lora: { qv: url('lora/qv-r4') } });
    try {
      const client = new OpenAI({ baseURL: 'http://localhost/v1', apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0, fetch: engine.fetch });
      const ask = (extra: object) => client.completions.create({ model: 'llama', prompt: 'Hello', max_tokens: 6, temperature: 0, ...extra } as never);
      const base = (await ask({})).choices[0]!.text;
      const qv = (await ask({ model: 'llama:qv' })).choices[0]!.text;
      expect(qv).not.toBe(base);
      expect((await ask({ lora_path: 'qv' })).choices[0]!.text).toBe(qv);
      const info = await engine.loadLora('all', { source: url('lora/all-r8-rslora.gguf'), scale: 0.5 });
      expect(info).toMatchObject({ name: 'all', format: 'gguf', rank: 8, scale: 0.5 });
      expect((await engine.loras()).map((l) => l.name)).toEqual(['qv', 'all']);
      expect((await client.models.list()).data.map((m) => m.id)).toEqual(['llama', 'llama:qv', 'llama:all']);
      const all = (await ask({ model: 'llama:all' })).choices[0]!.text;
      expect(all).not.toBe(base);
      await engine.unloadLora('all');
      await expect(ask({ model: 'llama:all' })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(engine.unloadLora('all')).rejects.toMatchObject({ code: 'lora_not_found' });
      expect((await ask({})).choices[0]!.text).toBe(base);
    } finally {
      await engine.unload();
    }
  });
});
