/**
 * Embedding models are told apart by their files: sentence-transformers' Pooling module in a
 * Hugging Face folder, `pooling_type` in a GGUF. The tiny Qwen3-Embedding fixture (bare-model
 * tensor names, no lm_head) opens from both forms as last-token pooling; a plain folder or GGUF is
 * no embedding model; pooling modes we do not run are refused naming their key.
 */
import { describe, expect, it } from 'vitest';
import { ensureFixture } from '../testing/fixtures/shared';
import { denseFromGGUF, embeddingFromFolder, embeddingFromGGUF } from './embedding';
import { ModelError } from './errors';
import type { Folder } from './folder';
import { openModel } from './open';
import { canonicalName } from './tensors';

/** A folder of JSON files held in memory. */
function folderOf(files: Record<string, unknown>): Folder {
  return {
    name: 'mem',
    source: () => {
      throw new Error('no tensors here');
    },
    text: async (f) => (f in files ? JSON.stringify(files[f]) : null),
  };
}

const POOLING = { type: 'sentence_transformers.models.Pooling', path: '1_Pooling' };
const mode = (key: string) => ({ word_embedding_dimension: 8, pooling_mode_cls_token: false, pooling_mode_mean_tokens: false, pooling_mode_lasttoken: false, [key]: true });

describe('the pooling of a sentence-transformers folder', () => {
  it.each([
    ['pooling_mode_lasttoken', 'last'],
    ['pooling_mode_mean_tokens', 'mean'],
    ['pooling_mode_cls_token', 'cls'],
  ])('%s reads as %s pooling, with sentence_bert_config.json’s max_seq_length', async (key, pooling) => {
    const folder = folderOf({ 'modules.json': [{ type: 'sentence_transformers.models.Transformer', path: '' }, POOLING], '1_Pooling/config.json': mode(key), 'sentence_bert_config.json': { max_seq_length: 256 } });
    expect(await embeddingFromFolder(folder)).toEqual({ pooling, maxSeqLength: 256 });
  });

  it('is null without modules.json or without a Pooling module (a chat model)', async () => {
    expect(await embeddingFromFolder(folderOf({}))).toBeNull();
    expect(await embeddingFromFolder(folderOf({ 'modules.json': [{ type: 'sentence_transformers.models.Transformer', path: '' }] }))).toBeNull();
  });

  it('refuses max pooling and a config with no mode or two, naming the key', async () => {
    const max = folderOf({ 'modules.json': [POOLING], '1_Pooling/config.json': mode('pooling_mode_max_tokens') });
    await expect(embeddingFromFolder(max)).rejects.toMatchObject({ code: 'invalid_field', field: 'pooling_mode_max_tokens' });
    const two = folderOf({ 'modules.json': [POOLING], '1_Pooling/config.json': { ...mode('pooling_mode_cls_token'), pooling_mode_mean_tokens: true } });
    await expect(embeddingFromFolder(two)).rejects.toBeInstanceOf(ModelError);
    const missing = folderOf({ 'modules.json': [POOLING] });
    await expect(embeddingFromFolder(missing)).rejects.toMatchObject({ code: 'missing_file' });
  });
});

describe('the Dense modules of a sentence-transformers folder', () => {
  const DENSE = (path: string, idx: number) => ({ idx, type: 'sentence_transformers.models.Dense', path });
  const files = (dense2: Record<string, unknown>) => ({
    'modules.json': [POOLING, DENSE('2_Dense', 2), DENSE('3_Dense', 3)],
    '1_Pooling/config.json': mode('pooling_mode_mean_tokens'),
    '2_Dense/config.json': dense2,
    '3_Dense/config.json': { in_features: 16, out_features: 4, bias: false, activation_function: 'torch.nn.modules.linear.Identity' },
  });

  it('reads them in order as dense_<idx>; no activation_function is Dense’s default Tanh', async () => {
    const e = await embeddingFromFolder(folderOf(files({ in_features: 8, out_features: 16, bias: true })));
    expect(e?.dense).toEqual([
      { name: 'dense_2', path: '2_Dense', inFeatures: 8, outFeatures: 16, bias: true, activation: 'tanh' },
      { name: 'dense_3', path: '3_Dense', inFeatures: 16, outFeatures: 4, bias: false, activation: 'identity' },
    ]);
  });

  it('refuses an activation it does not run and a bad size, naming the key', async () => {
    await expect(embeddingFromFolder(folderOf(files({ in_features: 8, out_features: 16, activation_function: 'torch.nn.modules.activation.ReLU' })))).rejects.toMatchObject({ field: 'activation_function' });
    await expect(embeddingFromFolder(folderOf(files({ in_features: 0, out_features: 16 })))).rejects.toMatchObject({ field: 'in_features' });
  });

  it('are refused on a decoder’s folder (its hidden-states path has no Dense), naming modules.json', async () => {
    const folder = folderOf({ 'config.json': { model_type: 'qwen3' }, ...files({ in_features: 8, out_features: 16 }) });
    await expect(openModel(folder)).rejects.toMatchObject({ code: 'invalid_field', field: 'modules.json' });
  });

  it('a GGUF’s dense_<n> tensors in order of n, Identity, a bias where it has one', () => {
    const t = (shape: number[]) => ({ info: { shape } });
    const tensors = new Map([['dense_3.weight', t([8, 32])], ['dense_2.weight', t([16, 32])], ['dense_2.bias', t([32])], ['output_norm.weight', t([16])]]);
    expect(denseFromGGUF(tensors, 16)).toEqual([
      { name: 'dense_2', inFeatures: 16, outFeatures: 32, bias: true, activation: 'identity' },
      { name: 'dense_3', inFeatures: 32, outFeatures: 8, bias: false, activation: 'identity' },
    ]);
  });
});

describe('the pooling of a GGUF (llama.cpp’s pooling_type)', () => {
  it('reads 1, 2, 3 as mean, cls, last; none (0), rank (4) and absent are no embedding model', () => {
    const meta = (v?: number) => new Map<string, unknown>(v === undefined ? [] : [['qwen3.pooling_type', v]]);
    expect([1, 2, 3].map((v) => embeddingFromGGUF(meta(v), 'qwen3')?.pooling)).toEqual(['mean', 'cls', 'last']);
    expect([0, 4, undefined].map((v) => embeddingFromGGUF(meta(v), 'qwen3'))).toEqual([null, null, null]);
  });
});

describe('the tiny Qwen3-Embedding fixture', () => {
  it('opens from its folder (bare-model names, no lm_head) and its GGUF as last-token pooling, tied', async () => {
    const paths = await ensureFixture({ arch: 'qwen3', preset: 'tiny', embedding: true }, { hf: ['F32'], gguf: ['Q8_0'] });
    const [hf, gguf] = await Promise.all([openModel(paths.hf.F32!), openModel(paths.gguf.Q8_0!)]);
    expect(hf.config.embedding).toEqual({ pooling: 'last', maxSeqLength: hf.config.maxPositionEmbeddings });
    expect(gguf.config.embedding).toEqual({ pooling: 'last', maxSeqLength: null });
    expect(hf.tensors.get('token_embd.weight')?.info.name).toBe('embed_tokens.weight');
    expect(hf.tensors.get('blk.1.attn_q_norm.weight')?.info.name).toBe('layers.1.self_attn.q_norm.weight');
    for (const m of [hf, gguf]) expect(m.config.tieWordEmbeddings).toBe(true);
  });

  it('maps a bare name as its `model.` form, and leaves lm_head alone', () => {
    expect(canonicalName('norm.weight')).toBe('output_norm.weight');
    expect(canonicalName('layers.0.mlp.down_proj.weight')).toBe('blk.0.ffn_down.weight');
    expect(canonicalName('lm_head.weight')).toBe('output.weight');
  });
});
