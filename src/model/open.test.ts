/**
 * openModel() over real HTTP (and local paths) on the tiny fixtures, and its errors on broken
 * Hugging Face folders: each a copy of a fixture folder with one thing changed.
 */
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeChunks } from '../formats/node-write';
import { encodeSafetensors } from '../formats/safetensors';
import { fileSource } from '../formats/source';
import { makeFixture, type Fixture } from '../testing/fixtures/model';
import { ensureFixture } from '../testing/fixtures/shared';
import type { FixturePaths } from '../testing/fixtures/write';
import { serveDirectory, type StaticServer } from '../testing/server';
import { ModelError } from './errors';
import { openModel } from './open';

let paths: FixturePaths;
let fx: Fixture; // the master float32 weights
let server: StaticServer;
let scratch: string; // broken and sharded copies of the HF folder
const url = (p: string) => `${server.url}/${relative(scratch, p).split('\\').join('/')}`;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'open-model-'));
  paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
  fx = makeFixture({ arch: 'llama', preset: 'tiny' });
  server = await serveDirectory(scratch);
});

afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

/** A copy of the llama HF F32 folder under scratch/<name>, with config.json edited. */
async function hfCopy(name: string, edit: (config: Record<string, unknown>) => void, files = ['model.safetensors']): Promise<string> {
  const dir = join(scratch, name);
  await mkdir(dir);
  const src = paths.hf.F32!;
  for (const f of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json', ...files]) await copyFile(join(src, f), join(dir, f));
  const config = JSON.parse(await readFile(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  edit(config);
  await writeFile(join(dir, 'config.json'), JSON.stringify(config));
  return dir;
}

async function openError(location: string): Promise<ModelError> {
  const e = await openModel(location).then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ModelError);
  return e as ModelError;
}

describe('openModel on a Hugging Face folder over HTTP', () => {
  it('reads config, tokenizer files and chat template, and maps tensors to canonical names', async () => {
    const m = await openModel(url(await hfCopy('plain', () => {})));
    expect(m.format).toBe('safetensors');
    expect(m.config).toMatchObject({ arch: 'llama', hiddenSize: 256, numLayers: 2, ropeStyle: 'neox' });
    expect(m.config.ropeScaling?.type).toBe('llama3');
    expect(m.tokenizer.json).toHaveProperty('model');
    expect(m.tokenizer.config).toHaveProperty('chat_template');
    expect(m.chatTemplate).toContain('{%');
    expect(m.ropeFreqFactors).toBeUndefined();
    expect(m.tensors.get('blk.1.ffn_down.weight')!.info.name).toBe('model.layers.1.mlp.down_proj.weight');
    expect(m.tensors.has('model.embed_tokens.weight')).toBe(false);

    expect(await m.readTensorF32('blk.0.attn_k.weight')).toEqual(fx.weight('model.layers.0.self_attn.k_proj.weight'));
    expect((await m.readTensor('output_norm.weight')).byteLength).toBe(256 * 4);
  });

  it('follows model.safetensors.index.json to the shards', async () => {
    const dir = await hfCopy('sharded', () => {}, []);
    const [first, second] = [fx.tensors.slice(0, 5), fx.tensors.slice(5)];
    const shard = (i: number) => `model-0000${i}-of-00002.safetensors`;
    await writeChunks(join(dir, shard(1)), encodeSafetensors(first.map((t) => ({ ...t, dtype: 'F32' as const }))));
    await writeChunks(join(dir, shard(2)), encodeSafetensors(second.map((t) => ({ ...t, dtype: 'F32' as const }))));
    const weightMap = Object.fromEntries([...first.map((t) => [t.name, shard(1)]), ...second.map((t) => [t.name, shard(2)])]);
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));

    const m = await openModel(url(dir));
    expect(m.tensors.get('token_embd.weight')!.source.name).toContain('model-00001-of-00002');
    expect(m.tensors.get('output.weight')!.source.name).toContain('model-00002-of-00002');
    expect(await m.readTensorF32('output.weight')).toEqual(fx.weight('lm_head.weight'));
  });
});

describe('openModel on a GGUF file', () => {
  it('opens it from a URL, a path, a file:// URL and a ByteSource alike', async () => {
    const file = paths.gguf.F32!;
    const fixtureServer = await serveDirectory(paths.root);
    try {
      const fromUrl = await openModel(`${fixtureServer.url}/gguf/model-F32.gguf`);
      for (const m of [fromUrl, await openModel(file), await openModel(pathToFileURL(file).href), await openModel(fileSource(file))]) {
        expect(m.format).toBe('gguf');
        expect(m.config).toMatchObject({ arch: 'llama', ropeStyle: 'interleaved', tieWordEmbeddings: false, numKvHeads: 2 });
        expect(m.tokenizer.gguf?.get('tokenizer.ggml.model')).toBe('gpt2');
        expect(m.chatTemplate).toBe(fromUrl.chatTemplate);
        // Llama 3 scaling travels as rope_freqs.weight: 1 for high frequencies, 32 for the lowest.
        expect(m.ropeFreqFactors).toHaveLength(32);
        expect(m.ropeFreqFactors![0]).toBe(1);
        expect(m.ropeFreqFactors![31]).toBe(32);
      }
    } finally {
      await fixtureServer.close();
    }
  });

  it('dequantises a Q4_K tensor to float32 close to the master weights', async () => {
    const m = await openModel(paths.gguf.Q4_K!);
    const got = await m.readTensorF32('blk.0.ffn_up.weight');
    const want = fx.weight('model.layers.0.mlp.up_proj.weight');
    let err = 0;
    let norm = 0;
    for (let i = 0; i < want.length; i++) {
      err += (got[i] - want[i]) ** 2;
      norm += want[i] ** 2;
    }
    expect(m.tensors.get('blk.0.ffn_up.weight')!.info.dtype).toBe('Q4_K');
    expect(Math.sqrt(err / norm)).toBeLessThan(0.15);
  });
});

describe('openModel errors', () => {
  it('names the tensor, expected and found shape when config and weights disagree', async () => {
    const e = await openError(url(await hfCopy('wrong-shape', (c) => (c.intermediate_size = 768))));
    expect(e.code).toBe('tensor_shape');
    expect(e.field).toBe('blk.0.ffn_gate.weight');
    expect(e.message).toBe('tensor blk.0.ffn_gate.weight has shape [512, 256], expected [768, 256]');
  });

  it('names a missing tensor', async () => {
    const e = await openError(url(await hfCopy('missing-tensor', (c) => (c.num_hidden_layers = 3))));
    expect(e.code).toBe('missing_tensor');
    expect(e.field).toBe('blk.2.attn_norm.weight');
  });

  // llama.cpp's other weight types: a GGUF with one tensor's type id changed to each.
  it.each([
    [16, 'IQ2_XXS'], [17, 'IQ2_XS'], [18, 'IQ3_XXS'], [19, 'IQ1_S'], [21, 'IQ3_S'], [22, 'IQ2_S'], [29, 'IQ1_M'], [34, 'TQ1_0'], [35, 'TQ2_0'],
  ])('refuses a GGUF with a tensor of ggml type %i (%s), naming the tensor and the type', async (id, name) => {
    const bytes = new Uint8Array(await readFile(paths.gguf.Q4_0!));
    const tensor = 'blk.0.attn_q.weight';
    // The tensor's header entry: its name, u32 n_dims, n_dims u64 dims, then the u32 type.
    const at = Buffer.from(bytes).indexOf(Buffer.from(tensor)) + tensor.length;
    const view = new DataView(bytes.buffer, bytes.byteOffset);
    expect(view.getUint32(at + 4 + 8 * view.getUint32(at, true), true)).toBe(2); // Q4_0
    view.setUint32(at + 4 + 8 * view.getUint32(at, true), id, true);
    const file = join(scratch, `type-${id}.gguf`);
    await writeFile(file, bytes);
    const e = (await openModel(file).then(() => null, (err: unknown) => err)) as { code?: string; message?: string };
    expect(e?.code).toBe('unsupported_dtype');
    expect(e.message).toContain(`"${tensor}" has ggml type ${name} (id ${id})`);
  });

  it('refuses an unsupported architecture', async () => {
    const e = await openError(url(await hfCopy('falcon', (c) => (c.model_type = 'falcon'))));
    expect(e.code).toBe('unsupported_arch');
    expect(e.message).toContain('falcon');
  });

  it('says which file is missing when a folder has no config.json', async () => {
    const dir = join(scratch, 'empty');
    await mkdir(dir);
    const e = await openError(url(dir));
    expect(e.code).toBe('missing_file');
    expect(e.field).toBe('config.json');
  });
});

describe('openModel on fused projections (Phi-3)', () => {
  let phi: FixturePaths;
  let phiFx: Fixture;
  beforeAll(async () => {
    phi = await ensureFixture({ arch: 'phi3', preset: 'tiny' }, { hf: ['F32'], gguf: ['F32', 'Q8_0'] });
    phiFx = makeFixture({ arch: 'phi3', preset: 'tiny' });
  });

  // tiny: 4 heads and 2 KV heads of 64, intermediate 512.
  const QKV: [string, number, number][] = [['attn_q', 0, 256], ['attn_k', 256, 384], ['attn_v', 384, 512]];
  const GATE_UP: [string, number, number][] = [['ffn_gate', 0, 512], ['ffn_up', 512, 1024]];

  it('splits qkv_proj into q, k, v and gate_up_proj into gate, up, by rows in that order, in both formats', async () => {
    for (const file of [phi.hf.F32!, phi.gguf.F32!]) {
      const m = await openModel(file);
      expect(m.tensors.has('blk.1.attn_qkv.weight')).toBe(false);
      for (const [fused, parts] of [['self_attn.qkv_proj.weight', QKV], ['mlp.gate_up_proj.weight', GATE_UP]] as const) {
        const master = phiFx.weight(`model.layers.1.${fused}`);
        for (const [part, from, to] of parts) {
          expect(m.tensors.get(`blk.1.${part}.weight`)!.info.shape, part).toEqual([to - from, 256]);
          expect(await m.readTensorF32(`blk.1.${part}.weight`), part).toEqual(master.subarray(from * 256, to * 256));
        }
      }
    }
  });

  it('splits quantised fused tensors on whole rows, and reads LongRoPE factors from their GGUF tensors', async () => {
    const m = await openModel(phi.gguf.Q8_0!);
    const q8 = m.tensors.get('blk.0.attn_k.weight')!.info;
    // Q8_0: 34 bytes per 32 values, so a row of 256 is 272 bytes; k starts after q's 256 rows.
    expect([q8.dtype, q8.byteLength]).toEqual(['Q8_0', 128 * 272]);
    expect(q8.offset - m.tensors.get('blk.0.attn_q.weight')!.info.offset).toBe(256 * 272);
    const hf = await openModel(phi.hf.F32!);
    const [g, h] = [m.config.ropeScaling, hf.config.ropeScaling];
    // F32 tensors against config.json's doubles.
    expect(g?.type === 'longrope' && [g.longFactor, g.shortFactor]).toEqual(h?.type === 'longrope' && [h.longFactor.map(Math.fround), h.shortFactor.map(Math.fround)]);
  });

  it('names the fused tensor when its rows do not add up', async () => {
    const dir = join(scratch, 'phi3-wrong');
    await mkdir(dir);
    for (const f of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json', 'model.safetensors']) await copyFile(join(phi.hf.F32!, f), join(dir, f));
    const config = JSON.parse(await readFile(join(phi.hf.F32!, 'config.json'), 'utf8')) as Record<string, unknown>;
    await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, num_key_value_heads: 1 }));
    const e = await openError(url(dir));
    expect(e.code).toBe('tensor_shape');
    expect(e.field).toBe('blk.0.attn_qkv.weight');
    expect(e.message).toBe('tensor model.layers.0.self_attn.qkv_proj.weight has shape [512, 256], expected [384, 256] (fused attn_q.weight + attn_k.weight + attn_v.weight)');
  });
});

describe('openModel on a mixture-of-experts HF folder', () => {
  const moe = makeFixture({ arch: 'qwen3moe', preset: 'tiny' });
  /** A folder of config.json and a model.safetensors holding the fixture's tensors that `keep` keeps. */
  const folder = async (name: string, keep: (hfName: string) => boolean) => {
    const dir = join(scratch, name);
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'config.json'), JSON.stringify(moe.config));
    await writeChunks(join(dir, 'model.safetensors'), encodeSafetensors(moe.tensors.filter((t) => keep(t.name)).map((t) => ({ ...t, dtype: 'F32' as const }))));
    return dir;
  };

  it('stacks each expert\'s tensors into one [experts, out, in] tensor, in expert order', async () => {
    const m = await openModel(url(await folder('moe', () => true)));
    const t = m.tensors.get('blk.1.ffn_up_exps.weight')!;
    expect(t.info.shape).toEqual([4, 256, 256]);
    expect(t.info.name).toBe('model.layers.1.mlp.experts.*.up_proj.weight');
    const all = await m.readTensorF32('blk.1.ffn_up_exps.weight');
    for (let e = 0; e < 4; e++) expect(all.subarray(e * 256 * 256, (e + 1) * 256 * 256)).toEqual(moe.weight(`model.layers.1.mlp.experts.${e}.up_proj.weight`));
    // A read across experts' boundaries comes from both.
    const bytes = await t.source.read(256 * 256 * 4 - 8, 16);
    expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, 4))).toEqual([
      ...moe.weight('model.layers.1.mlp.experts.0.up_proj.weight').subarray(-2),
      ...moe.weight('model.layers.1.mlp.experts.1.up_proj.weight').subarray(0, 2),
    ]);
  });

  it('names a missing expert\'s tensor', async () => {
    const gone = 'model.layers.1.mlp.experts.3.up_proj.weight';
    const e = await openError(url(await folder('moe-missing', (n) => n !== gone)));
    expect(e.code).toBe('missing_tensor');
    expect(e.field).toBe('blk.1.ffn_up_exps.weight');
    expect(e.message).toContain(gone);
  });
});
