import { describe, expect, it } from 'vitest';
import { concatChunks } from '../formats/gguf-writer';
import { memorySource } from '../formats/source';
import { makeFixture } from '../testing/fixtures/model';
import { ensureFixture } from '../testing/fixtures/shared';
import { encodeMmprojGGUF, FIXTURE_PROCESSOR, fixtureTower } from '../testing/fixtures/vision';
import { towerTensors } from '../vision/tower';
import { ModelError } from './errors';
import { openModel } from './open';
import { openVisionTower } from './vision-open';

// A stand-in for the text fixture: only the width, the seed and the embedding's rms matter here.
const TEXT = { shape: { hiddenSize: 48 }, options: { seed: 3 }, weight: () => Float32Array.from({ length: 64 }, (_, i) => (i % 2 ? 1 : -1)) };

describe('openVisionTower', () => {
  it('reads the same tower from an mmproj GGUF and from an HF Idefics3 folder, which openModel picks up itself', async () => {
    // The fixture writer's SmolVLM in both forms: text GGUF + mmproj GGUF, and the HF folder.
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny', vision: true }, { hf: ['F32'], gguf: ['F32'] });
    const gguf = await openVisionTower(paths.mmproj!);
    const hf = await openVisionTower(paths.hf.F32!);
    const model = await openModel(paths.hf.F32!);
    // GGUF keeps the epsilon as f32.
    expect({ ...gguf.config, layerNormEps: 0 }).toEqual({ ...hf.config, layerNormEps: 0 });
    expect(gguf.config.layerNormEps).toBe(Math.fround(hf.config.layerNormEps));
    expect(model.vision!.config).toEqual(hf.config);
    expect(gguf.processor).toEqual(FIXTURE_PROCESSOR);
    expect(hf.processor).toEqual(FIXTURE_PROCESSOR);
    expect(model.vision!.processor).toEqual(FIXTURE_PROCESSOR);
    const { weights } = fixtureTower(makeFixture({ arch: 'llama', preset: 'tiny', vision: true }));
    for (const name of ['v.patch_embd.weight', 'v.blk.1.ffn_down.bias', 'mm.model.fc.weight']) {
      expect(await gguf.readTensorF32(name)).toEqual(weights.get(name));
      expect(await hf.readTensorF32(name)).toEqual(weights.get(name));
      expect(await model.vision!.readTensorF32(name)).toEqual(weights.get(name));
    }
    expect(hf.tensors.size).toBe(towerTensors(hf.config).length);
    // The folder's text model is the GGUF's: its tensors under model.text_model.*, read as the text model's.
    const text = await openModel(paths.gguf.F32!);
    expect(text.vision).toBeUndefined();
    expect(model.config.hiddenSize).toBe(gguf.config.projectionDim);
    expect(await model.readTensorF32('blk.0.ffn_down.weight')).toEqual(await text.readTensorF32('blk.0.ffn_down.weight'));
  });

  it('opens a SmolVLM2 folder (smolvlm, SmolVLMForConditionalGeneration) as the Idefics3 one: the same text model, tower and processor', async () => {
    // The same weights, written as SmolVLM2's folder: only config.json's classes and the template differ.
    const [v1, v2] = await Promise.all([
      ensureFixture({ arch: 'llama', preset: 'tiny', vision: true }, { hf: ['F32'], gguf: [] }),
      ensureFixture({ arch: 'llama', preset: 'tiny', vision: 'smolvlm2' }, { hf: ['F32'], gguf: [] }),
    ]);
    const [a, b] = [await openModel(v1.hf.F32!), await openModel(v2.hf.F32!)];
    expect(b.config).toEqual(a.config);
    expect(b.vision!.config).toEqual(a.vision!.config);
    expect(b.vision!.processor).toEqual(FIXTURE_PROCESSOR);
    expect(b.chatTemplate).toContain("line['type'] == 'video'");
    expect(await b.readTensorF32('blk.1.attn_q.weight')).toEqual(await a.readTensorF32('blk.1.attn_q.weight'));
    expect(await b.vision!.readTensorF32('mm.model.fc.weight')).toEqual(await a.vision!.readTensorF32('mm.model.fc.weight'));
  });

  it('refuses an mmproj of another projector and one missing a tensor, by name', async () => {
    const bytes = concatChunks([...encodeMmprojGGUF(TEXT)]);
    const text = new TextDecoder('latin1').decode(bytes);
    // The same length, another projector type: "idefics3" -> "gemma3__".
    const other = Uint8Array.from(bytes);
    other.set(new TextEncoder().encode('gemma3__'), text.indexOf('idefics3'));
    const e = await openVisionTower(memorySource(other, 'other.gguf')).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ModelError);
    expect((e as ModelError).code).toBe('unsupported_arch');
    const renamed = Uint8Array.from(bytes);
    renamed.set(new TextEncoder().encode('v.post_lX'), text.indexOf('v.post_ln.weight'));
    const m = await openVisionTower(memorySource(renamed, 'renamed.gguf')).catch((x: unknown) => x);
    expect((m as ModelError).code).toBe('missing_tensor');
  });
});
