/**
 * LFM2's config as transformers (Lfm2Config, Lfm2MLP) and llama.cpp's converter state it: conv
 * layers from layer_types or full_attn_idxs, the derived FFN width, norm_eps and tie_embedding in
 * config.json; GGUF's per-layer head_count_kv (0 on a conv layer), shortconv.l_cache and the
 * stored FFN width. Qwen3.5's as transformers (Qwen3_5TextConfig over Qwen3NextConfig) and
 * llama.cpp's qwen35 loader read them.
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

// A Qwen3.5-0.8B-shaped Qwen3_5ForConditionalGeneration config.json: the text model in text_config
// (rope_theta and partial_rotary_factor in rope_parameters, with the mRoPE sections), tied at the top level.
const QWEN35_LAYERS = Array.from({ length: 24 }, (_, l) => ((l + 1) % 4 === 0 ? 'full_attention' : 'linear_attention'));
const QWEN35_VL = {
  architectures: ['Qwen3_5ForConditionalGeneration'],
  model_type: 'qwen3_5',
  tie_word_embeddings: true,
  text_config: {
    model_type: 'qwen3_5_text',
    vocab_size: 248320,
    hidden_size: 1024,
    intermediate_size: 3584,
    num_hidden_layers: 24,
    num_attention_heads: 8,
    num_key_value_heads: 2,
    head_dim: 256,
    rms_norm_eps: 1e-6,
    max_position_embeddings: 262144,
    layer_types: QWEN35_LAYERS,
    full_attention_interval: 4,
    linear_conv_kernel_dim: 4,
    linear_key_head_dim: 128,
    linear_value_head_dim: 128,
    linear_num_key_heads: 16,
    linear_num_value_heads: 16,
    rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25, mrope_section: [11, 11, 10], mrope_interleaved: true },
    eos_token_id: 248044,
  },
  vision_config: { model_type: 'qwen3_5', depth: 12 },
};
const QWEN35_LINEAR = QWEN35_LAYERS.flatMap((t, l) => (t === 'linear_attention' ? [l] : []));

describe('Qwen3.5 configs', () => {
  it('reads the Qwen3_5ForConditionalGeneration folder: DeltaNet layers, gated attention, a quarter rotary, (1 + w) norms, tied', () => {
    const c = configFromHF(QWEN35_VL);
    expect(c).toMatchObject({ arch: 'qwen35', hiddenSize: 1024, numHeads: 8, numKvHeads: 2, headDim: 256, rotaryDim: 64, ropeTheta: 1e7, ropeScaling: null, normWeightOffset: 1, attnOutputGate: true, qkNorm: true, tieWordEmbeddings: true, ropeStyle: 'neox' });
    // heads × head_dim (2048) is not the hidden size (1024)
    expect(c.numHeads * c.headDim).not.toBe(c.hiddenSize);
    expect(c.deltaNet).toEqual({ layers: QWEN35_LINEAR, convKernel: 4, numKHeads: 16, numVHeads: 16, headKDim: 128, headVDim: 128, vHeadOrder: 'grouped', aStored: 'log' });
    expect(layerBlocks(c, 0).mixer).toBe('deltanet');
    expect(layerBlocks(c, 3).mixer).toBe('attention');
    expect(hasRecurrentLayers(c)).toBe(true);
  });

  it("takes Qwen3_5TextConfig's defaults for what a config leaves out: every 4th layer attends, 16 key and 32 value heads of 128, 4 taps, rotary 0.25", () => {
    const c = configFromHF({ model_type: 'qwen3_5_text', vocab_size: 100, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 8, num_attention_heads: 4, head_dim: 256 });
    expect(c.rotaryDim).toBe(64);
    expect(c.deltaNet).toEqual({ layers: [0, 1, 2, 4, 5, 6], convKernel: 4, numKHeads: 16, numVHeads: 32, headKDim: 128, headVDim: 128, vHeadOrder: 'grouped', aStored: 'log' });
    expect(configFromHF({ model_type: 'qwen3_5_text', vocab_size: 100, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 4, num_attention_heads: 4, full_attention_interval: 2 }).deltaNet?.layers).toEqual([0, 2]);
  });

  it('refuses a malformed layer_types and value heads the key heads do not divide, naming the key', () => {
    const text = QWEN35_VL.text_config;
    expect(() => configFromHF({ ...QWEN35_VL, text_config: { ...text, layer_types: ['linear_attention'] } })).toThrow(expect.objectContaining({ field: 'layer_types' }));
    expect(() => configFromHF({ ...QWEN35_VL, text_config: { ...text, layer_types: QWEN35_LAYERS.map((t) => (t === 'linear_attention' ? 'mamba' : t)) } })).toThrow(expect.objectContaining({ field: 'layer_types' }));
    expect(() => configFromHF({ ...QWEN35_VL, text_config: { ...text, linear_num_value_heads: 24 } })).toThrow(expect.objectContaining({ field: 'linear_num_value_heads' }));
  });

  const gguf = (extra: [string, unknown][] = []) =>
    new Map<string, unknown>([
      ['general.architecture', 'qwen35'],
      ['qwen35.embedding_length', 1024],
      ['qwen35.feed_forward_length', 3584],
      ['qwen35.block_count', 24],
      ['qwen35.attention.head_count', 8],
      ['qwen35.attention.head_count_kv', 2],
      ['qwen35.attention.key_length', 256],
      ['qwen35.attention.value_length', 256],
      ['qwen35.attention.layer_norm_rms_epsilon', 1e-6],
      ['qwen35.rope.freq_base', 1e7],
      ['qwen35.rope.dimension_count', 64],
      ['qwen35.rope.dimension_sections', [11, 11, 10, 0]],
      ['qwen35.ssm.conv_kernel', 4],
      ['qwen35.ssm.state_size', 128],
      ['qwen35.ssm.group_count', 16],
      ['qwen35.ssm.time_step_rank', 16],
      ['qwen35.ssm.inner_size', 2048],
      ['qwen35.full_attention_interval', 4],
      ['qwen35.vocab_size', 248320],
      ...extra,
    ]);

  it("reads llama.cpp's keys: layers by full_attention_interval, ssm.* sizes, tiled value heads and ssm_a, norms as stored", () => {
    const c = configFromGGUF(gguf());
    expect(c).toMatchObject({ arch: 'qwen35', headDim: 256, rotaryDim: 64, normWeightOffset: 0, attnOutputGate: true });
    expect(c.deltaNet).toEqual({ layers: QWEN35_LINEAR, convKernel: 4, numKHeads: 16, numVHeads: 16, headKDim: 128, headVDim: 128, vHeadOrder: 'tiled', aStored: 'neg' });
  });

  it('refuses value heads the key heads do not divide, naming the key', () => {
    expect(() => configFromGGUF(gguf([['qwen35.ssm.time_step_rank', 24]]))).toThrow(expect.objectContaining({ field: 'qwen35.ssm.time_step_rank' }));
  });
});

// A granitemoehybrid config.json in Granite 4.0-H's dense form (sizes shrunk, keys as the 1B/micro
// checkpoints state them): Mamba-2 layers beside NoPE attention, no routed experts, the shared MLP.
const GRANITE_H = {
  architectures: ['GraniteMoeHybridForCausalLM'],
  model_type: 'granitemoehybrid',
  vocab_size: 100352,
  hidden_size: 512,
  intermediate_size: 1024,
  shared_intermediate_size: 1024,
  num_hidden_layers: 6,
  num_attention_heads: 8,
  num_key_value_heads: 2,
  max_position_embeddings: 131072,
  rms_norm_eps: 1e-5,
  layer_types: ['mamba', 'mamba', 'attention', 'mamba', 'mamba', 'attention'],
  position_embedding_type: 'nope',
  num_local_experts: 0,
  num_experts_per_tok: 0,
  mamba_n_heads: 16,
  mamba_d_head: 64,
  mamba_d_state: 128,
  mamba_n_groups: 1,
  mamba_d_conv: 4,
  mamba_expand: 2,
  mamba_conv_bias: true,
  mamba_proj_bias: false,
  embedding_multiplier: 12,
  attention_multiplier: 0.0078125,
  residual_multiplier: 0.246,
  logits_scaling: 8,
  tie_word_embeddings: true,
};
const GRANITE_H_MAMBA = [0, 1, 3, 4];

describe('Granite 4.0-H configs', () => {
  it('reads Mamba-2 layers from layer_types with the mamba_* sizes, NoPE attention, the four multipliers', () => {
    const c = configFromHF(GRANITE_H);
    expect(c).toMatchObject({ arch: 'granite', intermediateSize: 1024, embeddingScale: 12, residualScale: 0.246, logitsScaling: 8, attentionScale: 0.0078125 });
    expect(c.mamba2).toEqual({ layers: GRANITE_H_MAMBA, convKernel: 4, numHeads: 16, headDim: 64, stateSize: 128, numGroups: 1, aStored: 'log' });
    expect(c.noRopeLayers).toEqual([0, 1, 2, 3, 4, 5]);
    expect([0, 2].map((l) => layerBlocks(c, l).mixer)).toEqual(['mamba2', 'attention']);
    expect(hasRecurrentLayers(c)).toBe(true);
    // "rope" attention keeps RoPE; d_head "auto" is mamba_expand · hidden / heads; no layer_types: Mamba everywhere (transformers).
    expect(configFromHF({ ...GRANITE_H, position_embedding_type: 'rope' }).noRopeLayers).toEqual([]);
    expect(configFromHF({ ...GRANITE_H, mamba_d_head: 'auto', mamba_n_heads: 32 }).mamba2).toMatchObject({ numHeads: 32, headDim: 32 });
    expect(configFromHF({ ...GRANITE_H, layer_types: undefined }).mamba2?.layers).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('refuses what it cannot run, naming the key', () => {
    const field = (change: Record<string, unknown>) => {
      try {
        configFromHF({ ...GRANITE_H, ...change });
      } catch (e) {
        return (e as { field?: string }).field;
      }
      return 'read';
    };
    expect(field({ num_local_experts: 64 })).toBe('num_local_experts');
    expect(field({ layer_types: ['mamba', 'linear_attention', 'attention', 'mamba', 'mamba', 'attention'] })).toBe('layer_types');
    expect(field({ mamba_proj_bias: true })).toBe('mamba_proj_bias');
    expect(field({ mamba_d_head: 48 })).toBe('mamba_d_head');
  });

  const gguf = (extra: [string, unknown][] = []) =>
    new Map<string, unknown>([
      ['general.architecture', 'granitehybrid'],
      ['granitehybrid.embedding_length', 512],
      ['granitehybrid.feed_forward_length', 1024],
      ['granitehybrid.block_count', 6],
      ['granitehybrid.attention.head_count', 8],
      ['granitehybrid.attention.head_count_kv', [0, 0, 2, 0, 0, 2]],
      ['granitehybrid.attention.layer_norm_rms_epsilon', 1e-5],
      ['granitehybrid.rope.scaling.finetuned', false],
      ['granitehybrid.ssm.conv_kernel', 4],
      ['granitehybrid.ssm.state_size', 128],
      ['granitehybrid.ssm.group_count', 1],
      ['granitehybrid.ssm.inner_size', 1024],
      ['granitehybrid.ssm.time_step_rank', 16],
      ['granitehybrid.embedding_scale', 12],
      ['granitehybrid.residual_scale', 0.246],
      ['granitehybrid.attention.scale', 0.0078125],
      ['granitehybrid.logit_scale', 8],
      ['granitehybrid.vocab_size', 100352],
      ...extra,
    ]);

  it("reads llama.cpp's granitehybrid keys: Mamba-2 layers where head_count_kv is 0, ssm.* sizes, ssm_a as stored, NoPE unless rope.scaling.finetuned", () => {
    const c = configFromGGUF(gguf());
    expect(c).toMatchObject({ arch: 'granite', numKvHeads: 2, embeddingScale: 12, residualScale: 0.246, logitsScaling: 8, shortConv: null });
    expect(c.mamba2).toEqual({ ...configFromHF(GRANITE_H).mamba2, aStored: 'neg' });
    expect(c.noRopeLayers).toEqual([0, 1, 2, 3, 4, 5]);
    expect(configFromGGUF(gguf([['granitehybrid.rope.scaling.finetuned', true]])).noRopeLayers).toEqual([]);
    expect(() => configFromGGUF(gguf([['granitehybrid.expert_count', 64]]))).toThrow(expect.objectContaining({ code: 'unsupported_arch', field: 'granitehybrid.expert_count' }));
  });
});
