import { describe, expect, it } from 'vitest';
import type { ModelConfig } from './config';
import { ModelError } from './errors';
import { canonicalName, expectedTensors, validateTensors } from './tensors';

const config: ModelConfig = {
  arch: 'qwen2',
  vocabSize: 10,
  hiddenSize: 8,
  intermediateSize: 12,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 2,
  rmsNormEps: 1e-6,
  ropeTheta: 10000,
  ropeScaling: null,
  ropeStyle: 'neox',
  maxPositionEmbeddings: 64,
  tieWordEmbeddings: false,
  attentionBias: true,
  qkNorm: false,
  slidingWindow: null,
  bosTokenId: null,
  eosTokenIds: [],
};

function shapes(c: ModelConfig): Map<string, { shape: number[] }> {
  return new Map(expectedTensors(c).filter((t) => !t.optional).map((t) => [t.name, { shape: t.shape }]));
}

describe('canonical tensor names', () => {
  it('maps Hugging Face names to llama.cpp names', () => {
    expect(canonicalName('model.embed_tokens.weight')).toBe('token_embd.weight');
    expect(canonicalName('model.norm.weight')).toBe('output_norm.weight');
    expect(canonicalName('lm_head.weight')).toBe('output.weight');
    expect(canonicalName('model.layers.3.input_layernorm.weight')).toBe('blk.3.attn_norm.weight');
    expect(canonicalName('model.layers.0.self_attn.q_proj.weight')).toBe('blk.0.attn_q.weight');
    expect(canonicalName('model.layers.0.self_attn.k_proj.bias')).toBe('blk.0.attn_k.bias');
    expect(canonicalName('model.layers.0.self_attn.o_proj.weight')).toBe('blk.0.attn_output.weight');
    expect(canonicalName('model.layers.12.self_attn.q_norm.weight')).toBe('blk.12.attn_q_norm.weight');
    expect(canonicalName('model.layers.0.post_attention_layernorm.weight')).toBe('blk.0.ffn_norm.weight');
    expect(canonicalName('model.layers.0.mlp.gate_proj.weight')).toBe('blk.0.ffn_gate.weight');
    expect(canonicalName('model.layers.0.mlp.up_proj.weight')).toBe('blk.0.ffn_up.weight');
    expect(canonicalName('model.layers.0.mlp.down_proj.weight')).toBe('blk.0.ffn_down.weight');
  });

  it('returns null for tensors the model does not use', () => {
    expect(canonicalName('model.layers.0.self_attn.rotary_emb.inv_freq')).toBeNull();
    expect(canonicalName('vision_tower.weight')).toBeNull();
  });
});

describe('expected tensors', () => {
  it('lists [out, in] shapes, biases when attentionBias, and output.weight unless tied', () => {
    const byName = shapes(config);
    expect(byName.get('token_embd.weight')!.shape).toEqual([10, 8]);
    expect(byName.get('blk.1.attn_q.weight')!.shape).toEqual([8, 8]);
    expect(byName.get('blk.1.attn_k.weight')!.shape).toEqual([4, 8]);
    expect(byName.get('blk.1.attn_v.bias')!.shape).toEqual([4]);
    expect(byName.get('blk.1.attn_output.weight')!.shape).toEqual([8, 8]);
    expect(byName.get('blk.1.ffn_down.weight')!.shape).toEqual([8, 12]);
    expect(byName.get('output.weight')!.shape).toEqual([10, 8]);
    expect(byName.has('blk.0.attn_q_norm.weight')).toBe(false);
    expect(shapes({ ...config, tieWordEmbeddings: true }).has('output.weight')).toBe(false);
    expect(shapes({ ...config, qkNorm: true }).get('blk.0.attn_k_norm.weight')!.shape).toEqual([2]);
  });

  it('accepts a complete file and ignores unknown extra tensors', () => {
    const found = shapes(config);
    found.set('something.else', { shape: [3] });
    expect(() => validateTensors(config, found)).not.toThrow();
  });

  it('names the tensor, the expected and the found shape when a shape is wrong', () => {
    const found = shapes(config);
    found.set('blk.1.ffn_up.weight', { shape: [12, 9] });
    expect(() => validateTensors(config, found)).toThrow(
      expect.objectContaining({ code: 'tensor_shape', field: 'blk.1.ffn_up.weight', message: 'tensor blk.1.ffn_up.weight has shape [12, 9], expected [12, 8]' }),
    );
  });

  it('names a missing tensor', () => {
    const found = shapes(config);
    found.delete('blk.0.attn_k.bias');
    try {
      validateTensors(config, found);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ModelError);
      expect((e as ModelError).code).toBe('missing_tensor');
      expect((e as ModelError).message).toBe('tensor blk.0.attn_k.bias is missing (expected shape [4])');
    }
  });
});
