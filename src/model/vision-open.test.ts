import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { concatChunks } from '../formats/gguf-writer';
import { writeChunks } from '../formats/node-write';
import { encodeSafetensors } from '../formats/safetensors';
import { memorySource } from '../formats/source';
import { encodeMmprojGGUF, FIXTURE_PROCESSOR, fixtureTower } from '../testing/fixtures/vision';
import { towerTensors } from '../vision/tower';
import { ModelError } from './errors';
import { openVisionTower } from './vision-open';

// A stand-in for the text fixture: only the width, the seed and the embedding's rms matter here.
const TEXT = { shape: { hiddenSize: 48 }, options: { seed: 3 }, weight: () => Float32Array.from({ length: 64 }, (_, i) => (i % 2 ? 1 : -1)) };

/** The same tower as an HF Idefics3 folder: config.json, preprocessor_config.json, model.safetensors under HF names. */
async function hfFolder(): Promise<string> {
  const { config: c, weights } = fixtureTower(TEXT);
  const dir = await mkdtemp(join(tmpdir(), 'idefics3-'));
  await mkdir(dir, { recursive: true });
  const p = FIXTURE_PROCESSOR;
  await writeFile(join(dir, 'config.json'), JSON.stringify({
    architectures: ['Idefics3ForConditionalGeneration'], model_type: 'idefics3', scale_factor: c.scaleFactor,
    text_config: { model_type: 'llama', hidden_size: c.projectionDim },
    vision_config: { model_type: 'idefics3_vision', image_size: c.imageSize, patch_size: c.patchSize, hidden_size: c.hiddenSize, intermediate_size: c.intermediateSize, num_hidden_layers: c.numLayers, num_attention_heads: c.numHeads, layer_norm_eps: c.layerNormEps, hidden_act: 'gelu_pytorch_tanh' },
  }));
  await writeFile(join(dir, 'preprocessor_config.json'), JSON.stringify({
    image_processor_type: 'SmolVLMImageProcessor', do_image_splitting: true, size: { longest_edge: p.longestEdge }, max_image_size: { longest_edge: p.tileSize },
    rescale_factor: p.rescale, image_mean: p.mean, image_std: p.std,
  }));
  const tensors = towerTensors(c).map((t) => ({ name: t.hf, dtype: 'F32' as const, shape: t.shape, data: () => weights.get(t.name)! }));
  // A text tensor too: the tower's reader passes it by.
  tensors.push({ name: 'model.text_model.norm.weight', dtype: 'F32', shape: [c.projectionDim], data: () => new Float32Array(c.projectionDim) });
  await writeChunks(join(dir, 'model.safetensors'), encodeSafetensors(tensors));
  return dir;
}

describe('openVisionTower', () => {
  it('reads the same tower from an mmproj GGUF and from an HF Idefics3 folder', async () => {
    const gguf = await openVisionTower(memorySource(concatChunks([...encodeMmprojGGUF(TEXT)]), 'mmproj.gguf'));
    const hf = await openVisionTower(await hfFolder());
    // GGUF keeps the epsilon as f32.
    expect({ ...gguf.config, layerNormEps: 0 }).toEqual({ ...hf.config, layerNormEps: 0 });
    expect(gguf.config.layerNormEps).toBe(Math.fround(hf.config.layerNormEps));
    expect(gguf.config.projectionDim).toBe(48);
    expect(gguf.processor).toEqual(FIXTURE_PROCESSOR);
    expect(hf.processor).toEqual(FIXTURE_PROCESSOR);
    const { weights } = fixtureTower(TEXT);
    for (const name of ['v.patch_embd.weight', 'v.blk.1.ffn_down.bias', 'mm.model.fc.weight']) {
      expect(await gguf.readTensorF32(name)).toEqual(weights.get(name));
      expect(await hf.readTensorF32(name)).toEqual(weights.get(name));
    }
    expect(hf.tensors.size).toBe(towerTensors(hf.config).length);
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
