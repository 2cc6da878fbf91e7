/**
 * LFM2's config as transformers (Lfm2Config, Lfm2MLP) and llama.cpp's converter state it: conv
 * layers from layer_types or full_attn_idxs, the derived FFN width, norm_eps and tie_embedding in
 * config.json; GGUF's per-layer head_count_kv (0 on a conv layer), shortconv.l_cache and the
 * stored FFN width.
 */
import { describe, expect, it } from 'vitest';
import { hasRecurrentLayers, layerBlocks } from './config';
import { configFromGGUF } from './config-gguf';
import { configFromHF } from './config-hf';

// LiquidAI/LFM2-350M's config.json, its sizes kept.
const LFM2_350M = {
  architectures: ['Lfm2ForCausalLM'],
  model_type: 'lfm2',
  vocab_size: 65536,
  hidden_size: 1024,
  intermediate_size: 6656,
  block_ff_dim: 6656,
  block_auto_adjust_ff_dim: true,
  block_ffn_dim_multiplier: 1.0,
  block_multiple_of: 256,
  num_hidden_layers: 16,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  max_position_embeddings: 128000,
  norm_eps: 1e-5,
  rope_theta: 1000000.0,
  conv_L_cache: 3,
  conv_bias: false,
  full_attn_idxs: [2, 5, 8, 10, 12, 14],
  layer_types: ['conv', 'conv', 'full_attention', 'conv', 'conv', 'full_attention', 'conv', 'conv', 'full_attention', 'conv', 'full_attention', 'conv', 'full_attention', 'conv', 'full_attention', 'conv'],
  tie_embedding: true,
  bos_token_id: 1,
  eos_token_id: 7,
};
const CONV_350M = [0, 1, 3, 4, 6, 7, 9, 11, 13, 15];

describe('LFM2 configs', () => {
  it('reads LFM2-350M config.json: conv layers, the derived FFN width (6656 -> 4608), norm_eps, tied, NEOX with q/k norms', () => {
    const c = configFromHF(LFM2_350M);
    expect(c).toMatchObject({ arch: 'lfm2', hiddenSize: 1024, intermediateSize: 4608, numKvHeads: 8, headDim: 64, rmsNormEps: 1e-5, tieWordEmbeddings: true, ropeStyle: 'neox', qkNorm: true, qkNormScope: 'head', normWeightOffset: 0 });
    expect(c.shortConv).toEqual({ kernel: 3, layers: CONV_350M });
    expect(layerBlocks(c, 0).mixer).toBe('shortconv');
    expect(layerBlocks(c, 2).mixer).toBe('attention');
    expect(hasRecurrentLayers(c)).toBe(true);
  });

  it('takes full_attn_idxs without layer_types, every layer attending without either (Lfm2Config), and other widths', () => {
    const { layer_types: _, ...old } = LFM2_350M;
    expect(configFromHF(old).shortConv).toEqual({ kernel: 3, layers: CONV_350M });
    const { full_attn_idxs: __, ...none } = old;
    expect(configFromHF(none).shortConv).toBeNull();
    expect(hasRecurrentLayers(configFromHF(none))).toBe(false);
    // No auto-adjustment: the width as stated; a multiplier rounds up to block_multiple_of.
    expect(configFromHF({ ...LFM2_350M, block_auto_adjust_ff_dim: false }).intermediateSize).toBe(6656);
    expect(configFromHF({ ...LFM2_350M, block_ffn_dim_multiplier: 1.5 }).intermediateSize).toBe(6656);
    expect(configFromHF({ ...LFM2_350M, conv_L_cache: 4 }).shortConv?.kernel).toBe(4);
    expect(configFromHF({ ...LFM2_350M, tie_embedding: false }).tieWordEmbeddings).toBe(false);
  });

  it('refuses conv biases and a malformed layer_types, naming the key', () => {
    expect(() => configFromHF({ ...LFM2_350M, conv_bias: true })).toThrow(expect.objectContaining({ field: 'conv_bias' }));
    expect(() => configFromHF({ ...LFM2_350M, layer_types: ['conv'] })).toThrow(expect.objectContaining({ field: 'layer_types' }));
    expect(() => configFromHF({ ...LFM2_350M, layer_types: LFM2_350M.layer_types.map((t) => (t === 'conv' ? 'mamba' : t)) })).toThrow(expect.objectContaining({ field: 'layer_types' }));
  });

  const gguf = (kv: unknown, extra: [string, unknown][] = []) =>
    new Map<string, unknown>([
      ['general.architecture', 'lfm2'],
      ['lfm2.embedding_length', 1024],
      ['lfm2.feed_forward_length', 4608],
      ['lfm2.block_count', 16],
      ['lfm2.attention.head_count', 16],
      ['lfm2.attention.head_count_kv', kv],
      ['lfm2.attention.layer_norm_rms_epsilon', 1e-5],
      ['lfm2.shortconv.l_cache', 3],
      ['lfm2.vocab_size', 65536],
      ...extra,
    ]);
  const perLayer = LFM2_350M.layer_types.map((t) => (t === 'conv' ? 0 : 8));

  it('reads GGUF metadata: conv layers where head_count_kv is 0, l_cache, the stored FFN width, NEOX', () => {
    const c = configFromGGUF(gguf(perLayer));
    expect(c).toMatchObject({ arch: 'lfm2', numKvHeads: 8, intermediateSize: 4608, ropeStyle: 'neox', qkNorm: true });
    expect(c.shortConv).toEqual({ kernel: 3, layers: CONV_350M });
    // A single count: attention on every layer.
    expect(configFromGGUF(gguf(8)).shortConv).toBeNull();
  });

  it('refuses a per-layer count of the wrong length or with two attention counts, naming the key', () => {
    expect(() => configFromGGUF(gguf(perLayer.slice(1)))).toThrow(expect.objectContaining({ field: 'lfm2.attention.head_count_kv' }));
    expect(() => configFromGGUF(gguf(perLayer.map((n, l) => (l === 2 ? 4 : n))))).toThrow(expect.objectContaining({ field: 'lfm2.attention.head_count_kv' }));
  });
});
