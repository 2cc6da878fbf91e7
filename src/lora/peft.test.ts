import { describe, expect, it } from 'vitest';
import { concatChunks } from '../formats/gguf-writer';
import { encodeSafetensors } from '../formats/safetensors';
import { memorySource } from '../formats/source';
import type { Folder } from '../model/folder';
import { readPeftAdapter } from './peft';
import { LoraError } from './types';

/** A PEFT folder in memory: adapter_config.json and the named F32 tensors. */
function peftFolder(config: Record<string, unknown> | null, tensors: Record<string, number[]>): Folder {
  const st = concatChunks(
    encodeSafetensors(Object.entries(tensors).map(([name, shape]) => ({ name, dtype: 'F32' as const, shape, data: () => new Float32Array(shape[0]! * shape[1]!).fill(0.5) }))),
  );
  const files = new Map<string, Uint8Array>([['adapter_model.safetensors', st]]);
  if (config) files.set('adapter_config.json', new TextEncoder().encode(JSON.stringify(config)));
  return {
    name: 'mem/adapter',
    source: (f) => memorySource(files.get(f) ?? new Uint8Array(0), `mem/adapter/${f}`),
    text: async (f) => (files.has(f) ? new TextDecoder().decode(files.get(f)) : null),
  };
}

const P = 'base_model.model.model.layers';
const ok = { r: 2, lora_alpha: 4, target_modules: ['q_proj', 'down_proj'], bias: 'none' };
const pair = (layer: number, module: string, out: number, inp: number, r = 2) => ({
  [`${P}.${layer}.${module}.lora_A.weight`]: [r, inp],
  [`${P}.${layer}.${module}.lora_B.weight`]: [out, r],
});

async function failure(folder: Folder): Promise<LoraError> {
  const e = await readPeftAdapter(folder).then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(LoraError);
  return e as LoraError;
}

describe('readPeftAdapter', () => {
  it('reads each A/B pair with its layer, target, shapes and scale', async () => {
    const a = await readPeftAdapter(peftFolder(ok, { ...pair(1, 'mlp.down_proj', 8, 16), ...pair(0, 'self_attn.q_proj', 8, 8) }));
    expect(a.format).toBe('peft');
    expect(a.qkRows).toBe('halves');
    expect(a.weights.map((w) => [w.layer, w.target, w.rank, w.outFeatures, w.inFeatures, w.scale])).toEqual([
      [0, 'q', 2, 8, 8, 2],
      [1, 'down', 2, 8, 16, 2],
    ]);
    expect(a.weights[0]!.a.length).toBe(16);
    expect(a.weights[0]!.b.every((v) => v === 0.5)).toBe(true);
  });

  it('reads a family’s own module names and Qwen3.5’s language_model layers: LFM2’s out_proj and w1, the conv’s and the DeltaNet’s projections', async () => {
    const names = { ...ok, target_modules: ['out_proj', 'w1', 'in_proj', 'in_proj_qkv', 'in_proj_b'] };
    const a = await readPeftAdapter(
      peftFolder(names, {
        ...pair(1, 'self_attn.out_proj', 8, 8),
        ...pair(1, 'feed_forward.w1', 16, 8),
        ...pair(0, 'conv.in_proj', 24, 8),
        ...pair(0, 'conv.out_proj', 8, 8),
        [`base_model.model.model.language_model.layers.2.linear_attn.in_proj_qkv.lora_A.weight`]: [2, 8],
        [`base_model.model.model.language_model.layers.2.linear_attn.in_proj_qkv.lora_B.weight`]: [12, 2],
        ...pair(2, 'linear_attn.in_proj_b', 4, 8),
        ...pair(2, 'linear_attn.out_proj', 8, 4),
      }),
    );
    expect(a.vHeadOrder).toBe('grouped');
    expect(a.weights.map((w) => `${w.layer}.${w.target}`)).toEqual(['0.conv_in', '0.conv_out', '1.o', '1.gate', '2.dn_qkv', '2.dn_b', '2.dn_out']);
  });

  it('names the file and the module when a lora_B is missing', async () => {
    const e = await failure(peftFolder(ok, { [`${P}.0.self_attn.q_proj.lora_A.weight`]: [2, 8] }));
    expect(e.code).toBe('missing_tensor');
    expect(e.file).toBe('mem/adapter/adapter_model.safetensors');
    expect(e.message).toContain('model.layers.0.self_attn.q_proj has lora_A but no lora_B');
  });

  it.each([
    ['bias "all"', { ...ok, bias: 'all' }, 'unsupported_option', 'bias'],
    ['DoRA', { ...ok, use_dora: true }, 'unsupported_option', 'DoRA'],
    ['modules_to_save', { ...ok, modules_to_save: ['lm_head'] }, 'unsupported_option', 'modules_to_save'],
    ['lm_head among target_modules', { ...ok, target_modules: ['q_proj', 'lm_head'] }, 'unsupported_target', 'lm_head'],
    ['another PEFT method', { ...ok, peft_type: 'IA3' }, 'unsupported_option', 'IA3'],
    ['a non-integer r', { ...ok, r: 2.5 }, 'invalid_config', 'r must be'],
  ])('refuses %s, naming adapter_config.json', async (_, config, code, words) => {
    const e = await failure(peftFolder(config, pair(0, 'self_attn.q_proj', 8, 8)));
    expect(e.code).toBe(code);
    expect(e.file).toBe('mem/adapter/adapter_config.json');
    expect(e.message).toContain(words);
  });

  it.each([
    ['embeddings', `${P}.0.self_attn.q_proj.lora_A.weight`.replace('model.layers.0.self_attn.q_proj.lora_A', 'model.embed_tokens.lora_embedding_A'), 'embeddings'],
    ['lm_head', 'base_model.model.lm_head.lora_A.weight', 'lm_head'],
    ['an unknown module', `${P}.0.self_attn.rotary.lora_A.weight`, 'other than'],
  ])('refuses a tensor adapting %s', async (_, name, words) => {
    const e = await failure(peftFolder({ ...ok, target_modules: 'all-linear' }, { ...pair(0, 'self_attn.q_proj', 8, 8), [name]: [2, 8] }));
    expect(e.code).toBe('unsupported_target');
    expect(e.message).toContain(words);
  });

  it('refuses a rank that disagrees with r, and B with another rank than A', async () => {
    expect((await failure(peftFolder({ ...ok, r: 4 }, pair(0, 'self_attn.q_proj', 8, 8)))).message).toContain('r = 4');
    const mixed = { [`${P}.0.self_attn.q_proj.lora_A.weight`]: [2, 8], [`${P}.0.self_attn.q_proj.lora_B.weight`]: [8, 3] };
    expect((await failure(peftFolder(ok, mixed))).code).toBe('tensor_shape');
  });

  it('says a model folder is not an adapter', async () => {
    const e = await failure(peftFolder(null, {}));
    expect(e.code).toBe('not_an_adapter');
    expect(e.file).toBe('mem/adapter/adapter_config.json');
  });
});
