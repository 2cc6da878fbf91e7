import { describe, expect, it } from 'vitest';
import { ARCH, ARCHES } from './arch';
import { layerBlocks, layerRope, layerWindow, PLAIN_MATH } from './config';
import { configFromGGUF } from './config-gguf';
import { configFromHF } from './config-hf';
import { ModelError } from './errors';

const llamaJson = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  vocab_size: 128256,
  hidden_size: 2048,
  intermediate_size: 8192,
  num_hidden_layers: 16,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-5,
  rope_theta: 500000,
  max_position_embeddings: 131072,
  tie_word_embeddings: true,
  bos_token_id: 128000,
  eos_token_id: 128001,
  rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
};

function thrown(f: () => unknown): ModelError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ModelError);
    return e as ModelError;
  }
  throw new Error('expected a ModelError');
}

describe('configFromHF', () => {
  it('normalises a Llama 3.2 config with llama3 rope scaling and generation eos ids', () => {
    const c = configFromHF(llamaJson, { eos_token_id: [128001, 128008, 128009] });
    expect(c).toEqual({
      arch: 'llama',
      vocabSize: 128256,
      hiddenSize: 2048,
      intermediateSize: 8192,
      numLayers: 16,
      numHeads: 32,
      numKvHeads: 8,
      headDim: 64,
      rmsNormEps: 1e-5,
      ropeTheta: 500000,
      ropeScaling: { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
      ropeStyle: 'neox',
      maxPositionEmbeddings: 131072,
      tieWordEmbeddings: true,
      attentionBias: false,
      qkNorm: false,
      qkNormScope: 'head',
      normPlacement: 'pre',
      ...PLAIN_MATH,
      slidingWindow: null,
      noRopeLayers: [],
      bosTokenId: 128000,
      eosTokenIds: [128001, 128008, 128009],
    });
  });

  it('reads the old `type` spelling of rope_scaling and linear scaling', () => {
    const c = configFromHF({ ...llamaJson, rope_scaling: { type: 'linear', factor: 2 } });
    expect(c.ropeScaling).toEqual({ type: 'linear', factor: 2 });
  });

  it('gives qwen2 q/k/v biases and qwen3 q/k norms and an explicit head_dim', () => {
    const qwen2 = configFromHF({ ...llamaJson, model_type: 'qwen2', rope_scaling: null });
    expect(qwen2.attentionBias).toBe(true);
    expect(qwen2.qkNorm).toBe(false);
    const qwen3 = configFromHF({ ...llamaJson, model_type: 'qwen3', head_dim: 128, rope_scaling: null });
    expect(qwen3.attentionBias).toBe(false);
    expect(qwen3.qkNorm).toBe(true);
    expect(qwen3.headDim).toBe(128);
  });

  it('falls back to `architectures` when model_type is absent, and to num_attention_heads for kv heads', () => {
    const { model_type: _, num_key_value_heads: __, ...rest } = llamaJson;
    const c = configFromHF({ ...rest, architectures: ['MistralForCausalLM'] });
    expect(c.arch).toBe('mistral');
    expect(c.numKvHeads).toBe(32);
  });

  it('rejects an unsupported model type, naming the field', () => {
    const e = thrown(() => configFromHF({ ...llamaJson, model_type: 'falcon' }));
    expect(e.code).toBe('unsupported_arch');
    expect(e.field).toBe('model_type');
    expect(e.message).toMatch(/falcon/);
  });

  it('reads a bidirectional gemma3 (EmbeddingGemma: use_bidirectional_attention) and refuses other bidirectional families rather than run them causally', () => {
    const gemma3 = { ...llamaJson, model_type: 'gemma3_text', rope_scaling: null, sliding_window: 512 };
    expect(configFromHF({ ...gemma3, use_bidirectional_attention: true }).bidirectional).toBe(true);
    expect(configFromHF(gemma3).bidirectional).toBeUndefined();
    const e = thrown(() => configFromHF({ ...llamaJson, use_bidirectional_attention: true }));
    expect([e.code, e.field]).toEqual(['unsupported_arch', 'use_bidirectional_attention']);
    expect(configFromHF({ ...llamaJson, use_bidirectional_attention: 'vision' }).bidirectional).toBeUndefined();
  });

  it('rejects a missing required field, naming it', () => {
    const { hidden_size: _, ...rest } = llamaJson;
    const e = thrown(() => configFromHF(rest));
    expect(e.code).toBe('missing_field');
    expect(e.field).toBe('hidden_size');
  });

  it('rejects an unsupported rope scaling type', () => {
    const e = thrown(() => configFromHF({ ...llamaJson, rope_scaling: { rope_type: 'dynamic', factor: 4 } }));
    expect(e.field).toBe('rope_scaling.rope_type');
    expect(e.message).toMatch(/dynamic.*yarn/);
  });
});

describe('the sliding window from config.json', () => {
  const mistral = { ...llamaJson, architectures: ['MistralForCausalLM'], model_type: 'mistral', rope_scaling: null, num_hidden_layers: 3 };
  const qwen2 = { ...mistral, architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', sliding_window: 512 };

  it('windows every Mistral layer, defaults an absent key to 4096 and turns off on null', () => {
    expect(configFromHF({ ...mistral, sliding_window: 8 }).slidingWindow).toEqual({ size: 8, layers: [0, 1, 2] });
    expect(configFromHF(mistral).slidingWindow).toEqual({ size: 4096, layers: [0, 1, 2] });
    expect(configFromHF({ ...mistral, sliding_window: null }).slidingWindow).toBeNull();
  });

  it('windows Qwen2 only with use_sliding_window, from max_window_layers on', () => {
    expect(configFromHF(qwen2).slidingWindow).toBeNull();
    expect(configFromHF({ ...qwen2, use_sliding_window: false, max_window_layers: 0 }).slidingWindow).toBeNull();
    const c = configFromHF({ ...qwen2, use_sliding_window: true, max_window_layers: 1 });
    expect(c.slidingWindow).toEqual({ size: 512, layers: [1, 2] });
    expect([0, 1, 2].map((l) => layerWindow(c, l))).toEqual([null, 512, 512]);
    // Every layer below max_window_layers: nothing is windowed.
    expect(configFromHF({ ...qwen2, use_sliding_window: true, max_window_layers: 3 }).slidingWindow).toBeNull();
    expect(configFromHF({ ...qwen2, model_type: 'qwen3', use_sliding_window: true, max_window_layers: 2 }).slidingWindow).toEqual({ size: 512, layers: [2] });
  });

  it('follows an explicit layer_types list, and ignores the window on llama', () => {
    const types = ['sliding_attention', 'full_attention', 'sliding_attention'];
    expect(configFromHF({ ...mistral, sliding_window: 16, layer_types: types }).slidingWindow).toEqual({ size: 16, layers: [0, 2] });
    expect(configFromHF({ ...llamaJson, sliding_window: 16 }).slidingWindow).toBeNull();
  });

  it('rejects a window that is not a positive integer and a malformed layer_types, naming them', () => {
    expect(thrown(() => configFromHF({ ...mistral, sliding_window: 0 })).field).toBe('sliding_window');
    expect(thrown(() => configFromHF({ ...mistral, sliding_window: 8, layer_types: ['full_attention'] })).field).toBe('layer_types');
  });
});

describe('Gemma 2', () => {
  // google/gemma-2-2b-it's config.json (the keys the reader uses).
  const gemma2Json = {
    architectures: ['Gemma2ForCausalLM'],
    model_type: 'gemma2',
    vocab_size: 256000,
    hidden_size: 2304,
    intermediate_size: 9216,
    num_hidden_layers: 26,
    num_attention_heads: 8,
    num_key_value_heads: 4,
    head_dim: 256,
    hidden_activation: 'gelu_pytorch_tanh',
    query_pre_attn_scalar: 256,
    sliding_window: 4096,
    attn_logit_softcapping: 50.0,
    final_logit_softcapping: 30.0,
    rms_norm_eps: 1e-6,
    rope_theta: 10000.0,
    max_position_embeddings: 8192,
    bos_token_id: 2,
    eos_token_id: [1, 107],
  };

  it('reads config.json: sandwich (1 + w) norms, sqrt(hidden) embeddings, GeGLU, query_pre_attn_scalar, both caps, windows on even layers, tied by default', () => {
    const c = configFromHF(gemma2Json);
    expect(c).toMatchObject({
      arch: 'gemma2',
      headDim: 256,
      normPlacement: 'sandwich',
      normWeightOffset: 1,
      embeddingScale: Math.sqrt(2304),
      ffnActivation: 'gelu_tanh',
      attentionScale: 1 / 16,
      attnLogitSoftcap: 50,
      finalLogitSoftcap: 30,
      tieWordEmbeddings: true,
      ropeStyle: 'neox',
      qkNorm: false,
    });
    expect(c.slidingWindow).toEqual({ size: 4096, layers: Array.from({ length: 13 }, (_, i) => 2 * i) });
    // The 27B's scalar is hidden/heads = 144, not its head_dim 128; null caps are off.
    const big = configFromHF({ ...gemma2Json, query_pre_attn_scalar: 144, attn_logit_softcapping: null, final_logit_softcapping: null });
    expect(big).toMatchObject({ attentionScale: 1 / 12, attnLogitSoftcap: null, finalLogitSoftcap: null });
    expect(configFromHF({ ...gemma2Json, tie_word_embeddings: false }).tieWordEmbeddings).toBe(false);
    expect(thrown(() => configFromHF({ ...gemma2Json, final_logit_softcapping: -1 })).field).toBe('final_logit_softcapping');
    // Llama's rows keep Llama's math.
    expect(configFromHF(llamaJson)).toMatchObject(PLAIN_MATH);
  });

  it('reads GGUF metadata: norms already 1 + w, the caps, the window on even layers, llama.cpp\'s 27B query scale', () => {
    const meta = (layers: number, extra: [string, unknown][] = []) =>
      new Map<string, unknown>([
        ['general.architecture', 'gemma2'],
        ['gemma2.embedding_length', 2304],
        ['gemma2.feed_forward_length', 9216],
        ['gemma2.block_count', layers],
        ['gemma2.attention.head_count', 8],
        ['gemma2.attention.head_count_kv', 4],
        ['gemma2.attention.key_length', 256],
        ['gemma2.attention.layer_norm_rms_epsilon', 1e-6],
        ['gemma2.vocab_size', 256000],
        ...extra,
      ]);
    const caps: [string, unknown][] = [
      ['gemma2.attn_logit_softcapping', 50],
      ['gemma2.final_logit_softcapping', 30],
      ['gemma2.attention.sliding_window', 4096],
    ];
    const c = configFromGGUF(meta(26, caps));
    expect(c).toMatchObject({ arch: 'gemma2', normPlacement: 'sandwich', normWeightOffset: 0, embeddingScale: Math.sqrt(2304), ffnActivation: 'gelu_tanh', attentionScale: null, attnLogitSoftcap: 50, finalLogitSoftcap: 30, ropeStyle: 'neox' });
    expect(c.slidingWindow).toEqual({ size: 4096, layers: Array.from({ length: 13 }, (_, i) => 2 * i) });
    // 46 layers: the 27B, scaled by 1/sqrt(hidden / heads) as llama.cpp does (no key says so).
    expect(configFromGGUF(meta(46, caps)).attentionScale).toBe(1 / Math.sqrt(2304 / 8));
    expect(configFromGGUF(meta(26))).toMatchObject({ attnLogitSoftcap: null, finalLogitSoftcap: null, slidingWindow: null });
  });
});

describe('Gemma 3', () => {
  // google/gemma-3-1b-it's config.json (the keys the reader uses), plus the 4B's rope scaling.
  const gemma3Json = {
    architectures: ['Gemma3ForCausalLM'],
    model_type: 'gemma3_text',
    vocab_size: 262144,
    hidden_size: 1152,
    intermediate_size: 6912,
    num_hidden_layers: 26,
    num_attention_heads: 4,
    num_key_value_heads: 1,
    head_dim: 256,
    hidden_activation: 'gelu_pytorch_tanh',
    query_pre_attn_scalar: 256,
    sliding_window: 512,
    sliding_window_pattern: 6,
    rope_local_base_freq: 10000,
    rope_theta: 1000000,
    rope_scaling: null,
    attn_logit_softcapping: null,
    final_logit_softcapping: null,
    rms_norm_eps: 1e-6,
    max_position_embeddings: 32768,
  };
  const local26 = Array.from({ length: 26 }, (_, l) => l).filter((l) => l % 6 !== 5);

  it('reads config.json: per-head (1 + w) q/k norms, windows on 5 layers of 6 with their own RoPE base, no caps', () => {
    const c = configFromHF(gemma3Json);
    expect(c).toMatchObject({
      arch: 'gemma3',
      qkNorm: true,
      qkNormScope: 'head',
      normPlacement: 'sandwich',
      normWeightOffset: 1,
      embeddingScale: Math.sqrt(1152),
      ffnActivation: 'gelu_tanh',
      attentionScale: 1 / 16,
      attnLogitSoftcap: null,
      finalLogitSoftcap: null,
      ropeTheta: 1e6,
      ropeLocalTheta: 10000,
      tieWordEmbeddings: true,
    });
    expect(c.slidingWindow).toEqual({ size: 512, layers: local26 });
    expect([0, 4, 5, 11].map((l) => layerRope(c, l))).toEqual(['local', 'local', 'global', 'global']);
    // The 4B's linear scaling stays on the global layers (ropeScaling); transformers v5's
    // per-layer-type rope_parameters read the same.
    const v5 = configFromHF({
      ...gemma3Json,
      rope_theta: undefined,
      rope_local_base_freq: undefined,
      rope_parameters: { full_attention: { rope_type: 'linear', factor: 8, rope_theta: 1e6 }, sliding_attention: { rope_type: 'default', rope_theta: 10000 } },
    });
    expect(v5).toMatchObject({ ropeTheta: 1e6, ropeScaling: { type: 'linear', factor: 8 }, ropeLocalTheta: 10000 });
    expect(thrown(() => configFromHF({ ...gemma3Json, rope_local_base_freq: 0 })).field).toBe('rope_local_base_freq');
    // Other families rotate every layer alike.
    expect(configFromHF(llamaJson).ropeLocalTheta).toBeNull();
  });

  it("reads a multimodal checkpoint's config.json (gemma-3-4b-it): text_config over Gemma3TextConfig's defaults", () => {
    // google/gemma-3-4b-it's config.json, its vision_config cut down.
    const c = configFromHF({
      architectures: ['Gemma3ForConditionalGeneration'],
      model_type: 'gemma3',
      boi_token_index: 255999,
      eos_token_id: [1, 106],
      image_token_index: 262144,
      mm_tokens_per_image: 256,
      text_config: {
        hidden_size: 2560,
        intermediate_size: 10240,
        model_type: 'gemma3_text',
        num_hidden_layers: 34,
        rope_scaling: { factor: 8.0, rope_type: 'linear' },
        sliding_window: 1024,
      },
      vision_config: { hidden_size: 1152, model_type: 'siglip_vision_model', patch_size: 14 },
    });
    expect(c).toMatchObject({
      arch: 'gemma3',
      vocabSize: 262208,
      hiddenSize: 2560,
      numHeads: 8,
      numKvHeads: 4,
      headDim: 256,
      attentionScale: 1 / 16,
      ropeTheta: 1e6,
      ropeLocalTheta: 10000,
      ropeScaling: { type: 'linear', factor: 8 },
      tieWordEmbeddings: true,
      eosTokenIds: [1, 106],
    });
    expect(c.slidingWindow).toEqual({ size: 1024, layers: Array.from({ length: 34 }, (_, l) => l).filter((l) => l % 6 !== 5) });
    // The class alone names it too; without text_config there is nothing to read.
    expect(thrown(() => configFromHF({ architectures: ['Gemma3ForConditionalGeneration'] })).field).toBe('text_config');
  });

  it('reads GGUF metadata: the fixed pattern of 6 and local base 10000, global linear scaling', () => {
    const c = configFromGGUF(
      new Map<string, unknown>([
        ['general.architecture', 'gemma3'],
        ['gemma3.embedding_length', 1152],
        ['gemma3.feed_forward_length', 6912],
        ['gemma3.block_count', 26],
        ['gemma3.attention.head_count', 4],
        ['gemma3.attention.head_count_kv', 1],
        ['gemma3.attention.key_length', 256],
        ['gemma3.attention.layer_norm_rms_epsilon', 1e-6],
        ['gemma3.attention.sliding_window', 512],
        ['gemma3.rope.freq_base', 1e6],
        ['gemma3.rope.scaling.type', 'linear'],
        ['gemma3.rope.scaling.factor', 8],
        ['gemma3.vocab_size', 262144],
      ]),
    );
    expect(c).toMatchObject({ arch: 'gemma3', qkNorm: true, normWeightOffset: 0, ropeTheta: 1e6, ropeLocalTheta: 10000, ropeScaling: { type: 'linear', factor: 8 }, attnLogitSoftcap: null, attentionScale: null });
    expect(c.slidingWindow).toEqual({ size: 512, layers: local26 });
  });
});

describe('Granite', () => {
  // ibm-granite/granite-3.3-2b-instruct's config.json (the keys the reader uses).
  const graniteJson = {
    architectures: ['GraniteForCausalLM'],
    model_type: 'granite',
    vocab_size: 49159,
    hidden_size: 2048,
    intermediate_size: 8192,
    num_hidden_layers: 40,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    attention_bias: false,
    embedding_multiplier: 12.0,
    residual_multiplier: 0.22,
    attention_multiplier: 0.015625,
    logits_scaling: 8.0,
    rms_norm_eps: 1e-5,
    rope_theta: 10000000.0,
    rope_scaling: null,
    max_position_embeddings: 131072,
    tie_word_embeddings: true,
  };

  it('reads config.json: its four multipliers, attention_multiplier in place of 1/sqrt(head_dim)', () => {
    expect(configFromHF(graniteJson)).toMatchObject({
      arch: 'granite',
      embeddingScale: 12,
      residualScale: 0.22,
      attentionScale: 0.015625,
      logitsScaling: 8,
      ropeStyle: 'neox',
      tieWordEmbeddings: true,
      normPlacement: 'pre',
    });
    // GraniteConfig's defaults are 1 each, attention_multiplier included (not 1/sqrt(d)).
    const bare = { ...graniteJson, embedding_multiplier: undefined, residual_multiplier: undefined, attention_multiplier: undefined, logits_scaling: undefined };
    expect(configFromHF(bare)).toMatchObject({ embeddingScale: 1, residualScale: 1, attentionScale: 1, logitsScaling: 1 });
    expect(thrown(() => configFromHF({ ...graniteJson, logits_scaling: 0 })).field).toBe('logits_scaling');
    // Other families never read them.
    expect(configFromHF({ ...llamaJson, residual_multiplier: 0.5, logits_scaling: 8 })).toMatchObject({ residualScale: 1, logitsScaling: 1, attentionScale: null });
  });

  // A granitemoehybrid config.json in the form of Granite 4.0's dense checkpoints (micro, 350M):
  // the hybrid family's keys, attention on every layer, no routed experts, RoPE.
  const hybridJson = {
    ...graniteJson,
    architectures: ['GraniteMoeHybridForCausalLM'],
    model_type: 'granitemoehybrid',
    intermediate_size: 8192,
    shared_intermediate_size: 4096,
    num_hidden_layers: 4,
    layer_types: ['attention', 'attention', 'attention', 'attention'],
    num_local_experts: 0,
    num_experts_per_tok: 0,
    position_embedding_type: 'rope',
    mamba_n_heads: 128,
    mamba_d_state: 256,
  };

  it('reads a dense granitemoehybrid config.json (Granite 4.0 micro/350M) as granite, the MLP shared_intermediate_size wide', () => {
    const c = configFromHF(hybridJson);
    expect(c).toEqual({ ...configFromHF({ ...graniteJson, num_hidden_layers: 4 }), intermediateSize: 4096 });
    // The class alone names it too; transformers' default shared size is 1024.
    expect(configFromHF({ ...hybridJson, model_type: undefined, shared_intermediate_size: undefined })).toMatchObject({ arch: 'granite', intermediateSize: 1024 });
  });

  it('refuses a granitemoehybrid config.json with routed experts, naming the key (Mamba layers: config-hybrid.test.ts)', () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ num_local_experts: 62 }, 'num_local_experts', /routed experts/],
      // GraniteMoeHybridConfig's default is 8 experts.
      [{ num_local_experts: undefined }, 'num_local_experts', /num_local_experts 8/],
    ];
    for (const [change, field, message] of cases) {
      const e = thrown(() => configFromHF({ ...hybridJson, ...change }));
      expect([e.code, e.field]).toEqual(['unsupported_arch', field]);
      expect(e.message).toMatch(message);
      expect(e.message).toMatch(/granitemoehybrid/);
    }
  });

  it("reads GGUF metadata: llama.cpp's four keys, interleaved RoPE (the converter permutes q/k as for llama)", () => {
    const meta = (extra: [string, unknown][]) =>
      new Map<string, unknown>([
        ['general.architecture', 'granite'],
        ['granite.embedding_length', 2048],
        ['granite.feed_forward_length', 8192],
        ['granite.block_count', 40],
        ['granite.attention.head_count', 32],
        ['granite.attention.head_count_kv', 8],
        ['granite.attention.layer_norm_rms_epsilon', 1e-5],
        ['granite.rope.freq_base', 1e7],
        ['granite.vocab_size', 49159],
        ...extra,
      ]);
    const c = configFromGGUF(
      meta([
        ['granite.embedding_scale', 12],
        ['granite.residual_scale', 0.22],
        ['granite.attention.scale', 0.015625],
        ['granite.logit_scale', 8],
      ]),
    );
    expect(c).toMatchObject({ arch: 'granite', embeddingScale: 12, residualScale: 0.22, attentionScale: 0.015625, logitsScaling: 8, ropeStyle: 'interleaved' });
    // Absent keys, or llama.cpp's unset 0 for the attention scale: 1, and 1/sqrt(head_dim).
    expect(configFromGGUF(meta([['granite.attention.scale', 0]]))).toMatchObject({ embeddingScale: 1, residualScale: 1, attentionScale: null, logitsScaling: 1 });
  });
});

describe('Phi-3', () => {
  // microsoft/Phi-4-mini-instruct's config.json (the keys the reader uses; its 48 factors replaced by ramps).
  const ramp = (n: number, top: number) => Array.from({ length: n }, (_, i) => 1 + (top * i) / (n - 1));
  const phi4Json = {
    architectures: ['Phi3ForCausalLM'],
    model_type: 'phi3',
    vocab_size: 200064,
    hidden_size: 3072,
    intermediate_size: 8192,
    num_hidden_layers: 32,
    num_attention_heads: 24,
    num_key_value_heads: 8,
    partial_rotary_factor: 0.75,
    max_position_embeddings: 131072,
    original_max_position_embeddings: 4096,
    rope_theta: 10000.0,
    rope_scaling: { type: 'longrope', long_factor: ramp(48, 40), short_factor: ramp(48, 0.5) },
    rms_norm_eps: 1e-5,
    sliding_window: 262144,
    tie_word_embeddings: true,
  };

  it("reads Phi-4-mini's config.json: 96 of 128 dimensions rotary, LongRoPE with transformers' attention factor, no window", () => {
    const c = configFromHF(phi4Json);
    expect(c).toMatchObject({ arch: 'phi3', headDim: 128, rotaryDim: 96, ropeStyle: 'neox', slidingWindow: null, tieWordEmbeddings: true });
    expect(c.ropeScaling).toMatchObject({ type: 'longrope', originalMaxPositionEmbeddings: 4096, longFactor: ramp(48, 40), shortFactor: ramp(48, 0.5) });
    // sqrt(1 + ln(131072 / 4096) / ln(4096)), as MODELS.md quotes llama.cpp's converter: 1.190238.
    expect(c.ropeScaling?.type === 'longrope' && c.ropeScaling.attentionFactor).toBeCloseTo(1.190238, 6);
    // A stated attention_factor wins; "su" is LongRoPE's first name.
    const stated = configFromHF({ ...phi4Json, rope_scaling: { ...phi4Json.rope_scaling, type: 'su', attention_factor: 1.5 } });
    expect(stated.ropeScaling).toMatchObject({ type: 'longrope', attentionFactor: 1.5 });
    // Phi-3.5-mini: the whole head of 96 rotates (48 factors), untied.
    const phi35 = configFromHF({ ...phi4Json, vocab_size: 32064, num_attention_heads: 32, num_key_value_heads: 32, partial_rotary_factor: undefined, tie_word_embeddings: false });
    expect(phi35).toMatchObject({ headDim: 96, rotaryDim: null, tieWordEmbeddings: false });
  });

  it('refuses factor lists of the wrong length and LongRoPE without an original context, naming the key', () => {
    expect(thrown(() => configFromHF({ ...phi4Json, rope_scaling: { ...phi4Json.rope_scaling, long_factor: ramp(64, 1) } })).field).toBe('rope_scaling.long_factor');
    expect(thrown(() => configFromHF({ ...phi4Json, original_max_position_embeddings: undefined })).field).toBe('original_max_position_embeddings');
    // 0.7 of 128 is int(89.6) = 89 dimensions: odd, so not pairs.
    expect(thrown(() => configFromHF({ ...phi4Json, partial_rotary_factor: 0.7 })).field).toBe('partial_rotary_factor');
  });

  // What llama.cpp's converter writes for Phi-4-mini (its Phi-3 class: no rope.scaling.type).
  const phi4Gguf = (extra: [string, unknown][] = []) =>
    new Map<string, unknown>([
      ['general.architecture', 'phi3'],
      ['phi3.embedding_length', 3072],
      ['phi3.feed_forward_length', 8192],
      ['phi3.block_count', 32],
      ['phi3.attention.head_count', 24],
      ['phi3.attention.head_count_kv', 8],
      ['phi3.attention.layer_norm_rms_epsilon', 1e-5],
      ['phi3.attention.sliding_window', 262144],
      ['phi3.context_length', 131072],
      ['phi3.rope.dimension_count', 96],
      ['phi3.rope.freq_base', 10000],
      ['phi3.rope.scaling.attn_factor', 1.190238],
      ['phi3.rope.scaling.original_context_length', 4096],
      ['phi3.vocab_size', 200064],
      ...extra,
    ]);
  const factors = [
    { name: 'rope_factors_long.weight', shape: [48] },
    { name: 'rope_factors_short.weight', shape: [48] },
  ];

  it("reads GGUF metadata: rope.dimension_count, LongRoPE from its tensors and keys, the window ignored as llama.cpp does", () => {
    const meta = phi4Gguf();
    const c = configFromGGUF(meta, [{ name: 'token_embd.weight', shape: [200064, 3072] }, ...factors]);
    expect(c).toMatchObject({ arch: 'phi3', rotaryDim: 96, slidingWindow: null, ropeStyle: 'neox', tieWordEmbeddings: true });
    // The factor lists are filled in by openModel from the two tensors.
    expect(c.ropeScaling).toEqual({ type: 'longrope', longFactor: [], shortFactor: [], originalMaxPositionEmbeddings: 4096, attentionFactor: 1.190238 });
    // Without the tensors: no LongRoPE; without attn_factor, llama.cpp's 1.
    expect(configFromGGUF(meta).ropeScaling).toBeNull();
    meta.delete('phi3.rope.scaling.attn_factor');
    expect(configFromGGUF(meta, factors).ropeScaling).toMatchObject({ attentionFactor: 1 });
    meta.set('phi3.rope.dimension_count', 129);
    expect(thrown(() => configFromGGUF(meta)).field).toBe('phi3.rope.dimension_count');
  });

  it('reads rope.scaling.type "longrope" (the converter\'s generic path) as the tensors alone; refuses it without them', () => {
    const meta = phi4Gguf;
    const typed = configFromGGUF(meta([['phi3.rope.scaling.type', 'longrope']]), factors);
    expect(typed).toEqual(configFromGGUF(meta([]), factors));
    expect(typed.ropeScaling).toEqual({ type: 'longrope', longFactor: [], shortFactor: [], originalMaxPositionEmbeddings: 4096, attentionFactor: 1.190238 });
    const e = thrown(() => configFromGGUF(meta([['phi3.rope.scaling.type', 'longrope']]), []));
    expect([e.code, e.field]).toEqual(['missing_field', 'rope_factors_long.weight']);
    const other = thrown(() => configFromGGUF(meta([['phi3.rope.scaling.type', 'dynamic']]), factors));
    expect(other.field).toBe('phi3.rope.scaling.type');
    expect(other.message).toMatch(/"dynamic".*none, linear, yarn, longrope/);
  });
});

describe('YaRN', () => {
  // Qwen/Qwen3-8B's config.json with the rope_scaling its model card gives for 131072 tokens.
  const qwen3Json = {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    vocab_size: 151936,
    hidden_size: 4096,
    intermediate_size: 12288,
    num_hidden_layers: 36,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    head_dim: 128,
    max_position_embeddings: 40960,
    rope_theta: 1000000,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: false,
    rope_scaling: { rope_type: 'yarn', factor: 4.0, original_max_position_embeddings: 32768 },
  };
  const recipe = { type: 'yarn', factor: 4, originalMaxPositionEmbeddings: 32768, betaFast: 32, betaSlow: 1, truncate: true };
  // 0.1 ln(4) + 1, the YaRN paper's sqrt(1/t).
  const mscale4 = 1.1386294361;
  const yarnOf = (rope_scaling: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const s = configFromHF({ ...qwen3Json, ...extra, rope_scaling }).ropeScaling;
    if (s?.type !== 'yarn') throw new Error(`expected YaRN, got ${JSON.stringify(s)}`);
    return s;
  };

  it("reads config.json as transformers does: the stated factor, betas 32/1, attention factor 0.1 ln(factor) + 1", () => {
    const s = yarnOf(qwen3Json.rope_scaling);
    expect(s).toMatchObject(recipe);
    expect(s.attentionFactor).toBeCloseTo(mscale4, 9);
    // The old `type` spelling, and transformers v5's rope_parameters (rope_theta inside).
    expect(configFromHF({ ...qwen3Json, rope_scaling: { type: 'yarn', factor: 4.0, original_max_position_embeddings: 32768 } }).ropeScaling).toEqual(s);
    const v5 = configFromHF({ ...qwen3Json, rope_scaling: undefined, rope_theta: undefined, rope_parameters: { rope_type: 'yarn', rope_theta: 1000000, factor: 4.0, original_max_position_embeddings: 32768 } });
    expect([v5.ropeScaling, v5.ropeTheta]).toEqual([s, 1000000]);
  });

  it('takes stated betas, attention factor and truncate (gpt-oss), 0 betas as unset, and mscale / mscale_all_dim (DeepSeek)', () => {
    expect(yarnOf({ ...qwen3Json.rope_scaling, beta_fast: 16, beta_slow: 2, attention_factor: 1.25, truncate: false })).toMatchObject({
      betaFast: 16,
      betaSlow: 2,
      attentionFactor: 1.25,
      truncate: false,
    });
    expect(yarnOf({ ...qwen3Json.rope_scaling, beta_fast: 0, beta_slow: null })).toMatchObject({ betaFast: 32, betaSlow: 1 });
    // factor 40: (0.1 · 0.5 · ln 40 + 1) / (0.1 · 1 · ln 40 + 1) = 1.184444 / 1.368888; one of the two unset: mscale(40).
    expect(yarnOf({ rope_type: 'yarn', factor: 40, mscale: 0.5, mscale_all_dim: 1 }).attentionFactor).toBeCloseTo(0.8652596, 6);
    expect(yarnOf({ rope_type: 'yarn', factor: 40, mscale: 0.5, mscale_all_dim: 0 }).attentionFactor).toBeCloseTo(1.3688879, 6);
  });

  it('defaults the original context to max_position_embeddings and the factor to their ratio (transformers v5)', () => {
    expect(yarnOf({ rope_type: 'yarn', factor: 2 })).toMatchObject({ factor: 2, originalMaxPositionEmbeddings: 40960 });
    expect(yarnOf({ rope_type: 'yarn', original_max_position_embeddings: 10240 })).toMatchObject({ factor: 4, originalMaxPositionEmbeddings: 10240 });
    expect(yarnOf({ rope_type: 'yarn', factor: 1 }).attentionFactor).toBe(1);
  });

  it('refuses a non-positive factor and a non-boolean truncate, naming the key', () => {
    expect(thrown(() => configFromHF({ ...qwen3Json, rope_scaling: { rope_type: 'yarn', factor: -4 } })).field).toBe('rope_scaling.factor');
    expect(thrown(() => configFromHF({ ...qwen3Json, rope_scaling: { ...qwen3Json.rope_scaling, truncate: 'no' } })).field).toBe('rope_scaling.truncate');
  });

  // What llama.cpp's converter writes for that config.json (its generic rope-scaling keys).
  const ggufMeta = (extra: [string, unknown][] = []) =>
    new Map<string, unknown>([
      ['general.architecture', 'qwen3'],
      ['qwen3.embedding_length', 4096],
      ['qwen3.feed_forward_length', 12288],
      ['qwen3.block_count', 36],
      ['qwen3.attention.head_count', 32],
      ['qwen3.attention.head_count_kv', 8],
      ['qwen3.attention.key_length', 128],
      ['qwen3.attention.layer_norm_rms_epsilon', 1e-6],
      ['qwen3.context_length', 40960],
      ['qwen3.rope.freq_base', 1000000],
      ['qwen3.rope.scaling.type', 'yarn'],
      ['qwen3.rope.scaling.factor', 4],
      ['qwen3.rope.scaling.original_context_length', 32768],
      ['qwen3.vocab_size', 151936],
      ...extra,
    ]);
  const ggufYarn = (extra: [string, unknown][] = []) => {
    const s = configFromGGUF(ggufMeta(extra)).ropeScaling;
    if (s?.type !== 'yarn') throw new Error(`expected YaRN, got ${JSON.stringify(s)}`);
    return s;
  };

  it('reads the GGUF the converter writes from it as the same scaling', () => {
    expect(ggufYarn()).toEqual(yarnOf(qwen3Json.rope_scaling));
  });

  it("reads GGUF's yarn_beta_fast/slow, yarn_attn_factor (config.json's attention_factor) times attn_factor, and yarn_log_multiplier", () => {
    expect(ggufYarn([['qwen3.rope.scaling.yarn_beta_fast', 16], ['qwen3.rope.scaling.yarn_beta_slow', 2]])).toMatchObject({ betaFast: 16, betaSlow: 2 });
    expect(ggufYarn([['qwen3.rope.scaling.yarn_attn_factor', 1.25]]).attentionFactor).toBe(1.25);
    expect(ggufYarn([['qwen3.rope.scaling.attn_factor', 2]]).attentionFactor).toBeCloseTo(2 * mscale4, 9);
    // llama.cpp: mscale(factor) / mscale(factor, log multiplier) (DeepSeek's mscale_all_dim, mscale 1).
    expect(ggufYarn([['qwen3.rope.scaling.factor', 40], ['qwen3.rope.scaling.yarn_log_multiplier', 0.5]]).attentionFactor).toBeCloseTo(1.3688879 / 1.1844440, 6);
    // Without original_context_length: llama.cpp's n_ctx_train.
    const m = ggufMeta();
    m.delete('qwen3.rope.scaling.original_context_length');
    expect(configFromGGUF(m).ropeScaling).toMatchObject({ originalMaxPositionEmbeddings: 40960 });
  });

  it('refuses a GGUF YaRN extrapolation factor other than 1 and a missing factor, naming the key', () => {
    expect(thrown(() => configFromGGUF(ggufMeta([['qwen3.rope.scaling.yarn_ext_factor', 0.5]]))).field).toBe('qwen3.rope.scaling.yarn_ext_factor');
    expect(ggufYarn([['qwen3.rope.scaling.yarn_ext_factor', 1]])).toEqual(ggufYarn());
    const m = ggufMeta();
    m.delete('qwen3.rope.scaling.factor');
    expect(thrown(() => configFromGGUF(m)).field).toBe('qwen3.rope.scaling.factor');
  });
});

describe('the architecture table', () => {
  // The keys every family's config.json states; each row adds its model_type or class.
  // (MoE families also need their experts' keys; the others ignore them.)
  const sizes = {
    vocab_size: 300,
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 3,
    num_attention_heads: 4,
    sliding_window: 8,
    num_experts: 4,
    num_experts_per_tok: 2,
    moe_intermediate_size: 32,
    shared_expert_intermediate_size: 64,
  };

  it('names each HF class once', () => {
    expect(new Set(ARCHES.map((a) => ARCH[a].hfClass)).size).toBe(ARCHES.length);
  });

  it.each(ARCHES)('%s: config.json finds its row by model_type or by class alone, with its defaults and flags', (arch) => {
    const row = ARCH[arch];
    const modelType = row.hfModelType ?? arch;
    const byType = configFromHF({ ...sizes, model_type: modelType });
    expect(configFromHF({ ...sizes, architectures: ['SomethingElse', row.hfClass] })).toEqual(byType);
    expect(byType).toMatchObject({
      arch,
      rmsNormEps: row.hfDefaults.rmsNormEps,
      maxPositionEmbeddings: row.hfDefaults.maxPositionEmbeddings,
      ropeStyle: 'neox',
      qkNorm: row.qkNorm,
      qkNormScope: row.qkNormScope,
      normPlacement: row.normPlacement,
      attentionBias: row.attentionBias === 'always',
    });
    expect(configFromHF({ ...sizes, model_type: modelType, attention_bias: true }).attentionBias).toBe(true);
    // The window follows the row's style: never, on every layer, or only with use_sliding_window.
    // A layer-pattern family (Gemma) windows its pattern's layers either way.
    const pattern = { size: 8, layers: [0, 1, 2].filter((l) => l % row.swaPattern! < row.swaPattern! - 1) };
    const windowed = configFromHF({ ...sizes, model_type: modelType, use_sliding_window: true, max_window_layers: 0 }).slidingWindow;
    expect(windowed).toEqual(row.hfSlidingWindow === null ? null : row.hfSlidingWindow === 'pattern' ? pattern : { size: 8, layers: [0, 1, 2] });
    const plain = configFromHF({ ...sizes, model_type: modelType }).slidingWindow;
    expect(plain).toEqual(row.hfSlidingWindow === 'sliding_window' ? { size: 8, layers: [0, 1, 2] } : row.hfSlidingWindow === 'pattern' ? pattern : null);
  });

  it.each(ARCHES)('%s: its GGUF name reads back as a family with the same GGUF flags', (arch) => {
    const row = ARCH[arch];
    const g = row.gguf;
    const meta = new Map<string, unknown>([
      ['general.architecture', g],
      [`${g}.embedding_length`, 64],
      [`${g}.feed_forward_length`, 128],
      [`${g}.block_count`, 2],
      [`${g}.attention.head_count`, 4],
      [`${g}.attention.layer_norm_rms_epsilon`, 1e-6],
      [`${g}.vocab_size`, 300],
      [`${g}.expert_count`, 4],
      [`${g}.expert_used_count`, 2],
      [`${g}.expert_shared_feed_forward_length`, 64],
      // Qwen3.5's DeltaNet layers (both of two, at the default interval 4)
      [`${g}.ssm.conv_kernel`, 4],
      [`${g}.ssm.state_size`, 16],
      [`${g}.ssm.group_count`, 2],
      [`${g}.ssm.time_step_rank`, 4],
      [`${g}.ssm.inner_size`, 64],
    ]);
    const c = configFromGGUF(meta);
    expect(c.moe === null).toBe(row.moe === null);
    // A file cannot tell families that share its GGUF name apart: they must mean the same graph.
    expect(ARCH[c.arch].gguf).toBe(g);
    expect({ ropeStyle: c.ropeStyle, qkNorm: c.qkNorm, qkNormScope: c.qkNormScope, normPlacement: c.normPlacement, attentionBias: c.attentionBias }).toEqual({
      ropeStyle: row.ggufRopeStyle,
      qkNorm: row.qkNorm,
      qkNormScope: row.qkNormScope,
      normPlacement: row.normPlacement,
      attentionBias: row.attentionBias === 'always',
    });
  });

  it('reads NoPE layers: SmolLM3 from no_rope_layers, its interval or the default 4; GGUF every 4th; others none', () => {
    const smol = { ...sizes, model_type: 'smollm3', num_hidden_layers: 8 };
    expect(configFromHF(smol).noRopeLayers).toEqual([3, 7]);
    expect(configFromHF({ ...smol, no_rope_layer_interval: 3 }).noRopeLayers).toEqual([2, 5]);
    // 1: RoPE, 0: NoPE; a longer list is cut to the layers.
    expect(configFromHF({ ...smol, no_rope_layers: [1, 0, 1, 1, 0, 1, 1, 1, 0] }).noRopeLayers).toEqual([1, 4]);
    expect(configFromHF({ ...smol, no_rope_layers: [1, 1, 1, 1, 1, 1, 1, 1] }).noRopeLayers).toEqual([]);
    expect(thrown(() => configFromHF({ ...smol, no_rope_layers: [1, 0] })).field).toBe('no_rope_layers');
    expect(thrown(() => configFromHF({ ...smol, no_rope_layers: [1, 2, 1, 1, 1, 1, 1, 1] })).field).toBe('no_rope_layers');
    // Only the rows that have NoPE read the keys.
    expect(configFromHF({ ...sizes, model_type: 'llama', num_hidden_layers: 8, no_rope_layers: [0, 0, 0, 0, 0, 0, 0, 0] }).noRopeLayers).toEqual([]);
    const gguf = (arch: string) =>
      configFromGGUF(
        new Map<string, unknown>([
          ['general.architecture', arch],
          [`${arch}.embedding_length`, 64],
          [`${arch}.feed_forward_length`, 128],
          [`${arch}.block_count`, 9],
          [`${arch}.attention.head_count`, 4],
          [`${arch}.attention.layer_norm_rms_epsilon`, 1e-6],
          [`${arch}.vocab_size`, 300],
        ]),
      );
    expect(gguf('smollm3')).toMatchObject({ arch: 'smollm3', ropeStyle: 'interleaved', noRopeLayers: [3, 7] });
    expect(gguf('llama').noRopeLayers).toEqual([]);
  });

  it('refuses a sliding window in olmo2 GGUF files (OLMo 3 windows 3 layers in 4), and takes 0 as none', () => {
    const olmo = (window: number) =>
      configFromGGUF(
        new Map<string, unknown>([
          ['general.architecture', 'olmo2'],
          ['olmo2.embedding_length', 64],
          ['olmo2.feed_forward_length', 128],
          ['olmo2.block_count', 4],
          ['olmo2.attention.head_count', 4],
          ['olmo2.attention.layer_norm_rms_epsilon', 1e-6],
          ['olmo2.vocab_size', 300],
          ['olmo2.attention.sliding_window', window],
        ]),
      );
    expect(thrown(() => olmo(4096)).field).toBe('olmo2.attention.sliding_window');
    expect(olmo(0)).toMatchObject({ arch: 'olmo2', slidingWindow: null, normPlacement: 'post', qkNormScope: 'full', ropeStyle: 'neox' });
  });

  it('lists the supported families in its errors', () => {
    expect(thrown(() => configFromHF({ ...sizes, model_type: 'falcon' })).message).toBe(
      'config.json: model_type "falcon" is not supported (supported: llama, qwen2, qwen3, mistral, smollm3, olmo2, gemma2, gemma3_text, granite, qwen2_moe, qwen3_moe, olmoe, phi3, lfm2, qwen3_5_text)',
    );
    expect(thrown(() => configFromHF({ ...sizes, architectures: ['FalconForCausalLM'] })).message).toBe(
      'config.json: architectures ["FalconForCausalLM"] are not supported (supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, SmolLM3ForCausalLM, Olmo2ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, GraniteForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, OlmoeForCausalLM, Phi3ForCausalLM, Lfm2ForCausalLM, Qwen3_5ForCausalLM)',
    );
    expect(thrown(() => configFromGGUF(new Map([['general.architecture', 'falcon']]))).message).toBe(
      'GGUF general.architecture "falcon" is not supported (supported: llama (also mistral), qwen2, qwen3, smollm3, olmo2, gemma2, gemma3, granite, qwen2moe, qwen3moe, olmoe, phi3, lfm2, qwen35)',
    );
  });
});

describe('configFromGGUF', () => {
  const meta = (arch: string, extra: [string, unknown][] = []) =>
    new Map<string, unknown>([
      ['general.architecture', arch],
      [`${arch}.embedding_length`, 64],
      [`${arch}.feed_forward_length`, 128],
      [`${arch}.block_count`, 2],
      [`${arch}.attention.head_count`, 4],
      [`${arch}.attention.head_count_kv`, 2],
      [`${arch}.attention.layer_norm_rms_epsilon`, 1e-6],
      [`${arch}.rope.freq_base`, 10000],
      [`${arch}.context_length`, 1024n],
      ['tokenizer.ggml.bos_token_id', 1],
      ['tokenizer.ggml.eos_token_id', 2],
      ['tokenizer.ggml.eot_token_id', 3],
      ['tokenizer.ggml.tokens', Array.from({ length: 300 }, (_, i) => `t${i}`)],
      ...extra,
    ]);

  it('reads llama metadata with interleaved rope and takes vocab, ties and biases from the tensors', () => {
    const c = configFromGGUF(meta('llama'), [
      { name: 'token_embd.weight', shape: [300, 64] },
      { name: 'blk.0.attn_q.weight', shape: [64, 64] },
    ]);
    expect(c).toMatchObject({
      arch: 'llama',
      vocabSize: 300,
      headDim: 16,
      ropeStyle: 'interleaved',
      maxPositionEmbeddings: 1024,
      tieWordEmbeddings: true,
      attentionBias: false,
      bosTokenId: 1,
      eosTokenIds: [2, 3],
    });
  });

  it('reads qwen2 and qwen3 with neox rope; qwen3 has q/k norms and its own key_length', () => {
    const q2 = configFromGGUF(meta('qwen2'), [
      { name: 'token_embd.weight', shape: [300, 64] },
      { name: 'output.weight', shape: [300, 64] },
      { name: 'blk.0.attn_q.bias', shape: [64] },
    ]);
    expect(q2).toMatchObject({ arch: 'qwen2', ropeStyle: 'neox', attentionBias: true, tieWordEmbeddings: false });
    const q3 = configFromGGUF(meta('qwen3', [['qwen3.attention.key_length', 32]]), []);
    expect(q3).toMatchObject({ arch: 'qwen3', ropeStyle: 'neox', qkNorm: true, headDim: 32 });
  });

  it('reads attention.sliding_window as a window on every layer; absent or 0 is none', () => {
    expect(configFromGGUF(meta('llama', [['llama.attention.sliding_window', 4096]])).slidingWindow).toEqual({ size: 4096, layers: [0, 1] });
    expect(configFromGGUF(meta('qwen2', [['qwen2.attention.sliding_window', 0]])).slidingWindow).toBeNull();
    expect(configFromGGUF(meta('qwen2')).slidingWindow).toBeNull();
    expect(thrown(() => configFromGGUF(meta('llama', [['llama.attention.sliding_window', 'x']]))).field).toBe('llama.attention.sliding_window');
  });

  it('rejects an unsupported architecture and a missing key, naming them', () => {
    const e = thrown(() => configFromGGUF(meta('falcon')));
    expect(e.code).toBe('unsupported_arch');
    expect(e.field).toBe('general.architecture');
    const m = meta('llama');
    m.delete('llama.block_count');
    const e2 = thrown(() => configFromGGUF(m));
    expect(e2.code).toBe('missing_field');
    expect(e2.field).toBe('llama.block_count');
  });
});

describe('mixture of experts', () => {
  // The shapes of Qwen3-30B-A3B's, Qwen1.5-MoE-A2.7B's and OLMoE-1B-7B-0924's config.json.
  const qwen3moeJson = {
    architectures: ['Qwen3MoeForCausalLM'],
    model_type: 'qwen3_moe',
    vocab_size: 151936,
    hidden_size: 2048,
    intermediate_size: 6144,
    moe_intermediate_size: 768,
    num_experts: 128,
    num_experts_per_tok: 8,
    norm_topk_prob: true,
    decoder_sparse_step: 1,
    mlp_only_layers: [],
    num_hidden_layers: 48,
    num_attention_heads: 32,
    num_key_value_heads: 4,
    head_dim: 128,
    rms_norm_eps: 1e-6,
    rope_theta: 1e6,
    max_position_embeddings: 40960,
    tie_word_embeddings: false,
  };
  const qwen2moeJson = {
    architectures: ['Qwen2MoeForCausalLM'],
    model_type: 'qwen2_moe',
    vocab_size: 151936,
    hidden_size: 2048,
    intermediate_size: 5632,
    moe_intermediate_size: 1408,
    shared_expert_intermediate_size: 5632,
    num_experts: 60,
    num_experts_per_tok: 4,
    norm_topk_prob: false,
    num_hidden_layers: 24,
    num_attention_heads: 16,
    num_key_value_heads: 16,
    rms_norm_eps: 1e-6,
    rope_theta: 1e6,
    max_position_embeddings: 8192,
    tie_word_embeddings: false,
  };
  const olmoeJson = {
    architectures: ['OlmoeForCausalLM'],
    model_type: 'olmoe',
    vocab_size: 50304,
    hidden_size: 2048,
    intermediate_size: 1024,
    num_experts: 64,
    num_experts_per_tok: 8,
    norm_topk_prob: false,
    num_hidden_layers: 16,
    num_attention_heads: 16,
    num_key_value_heads: 16,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    max_position_embeddings: 4096,
    clip_qkv: null,
  };

  it('reads each family\'s experts from config.json (the expert size under its own key)', () => {
    expect(configFromHF(qwen3moeJson)).toMatchObject({
      arch: 'qwen3moe',
      qkNorm: true,
      qkNormScope: 'head',
      moe: { numExperts: 128, numExpertsUsed: 8, expertIntermediateSize: 768, normTopkProb: true, sharedExpertIntermediateSize: null },
    });
    expect(configFromHF(qwen2moeJson)).toMatchObject({
      arch: 'qwen2moe',
      attentionBias: true,
      moe: { numExperts: 60, numExpertsUsed: 4, expertIntermediateSize: 1408, normTopkProb: false, sharedExpertIntermediateSize: 5632 },
    });
    expect(configFromHF(olmoeJson)).toMatchObject({
      arch: 'olmoe',
      qkNorm: true,
      qkNormScope: 'full',
      normPlacement: 'pre',
      moe: { numExperts: 64, numExpertsUsed: 8, expertIntermediateSize: 1024, normTopkProb: false, sharedExpertIntermediateSize: null },
    });
    // transformers' defaults when norm_topk_prob is absent: false for all three classes.
    const { norm_topk_prob: _, ...noNorm } = qwen3moeJson;
    expect(configFromHF(noNorm).moe?.normTopkProb).toBe(false);
    expect(configFromHF(llamaJson).moe).toBeNull();
  });

  it("reads Qwen-MoE's dense layers: mlp_only_layers, and those decoder_sparse_step leaves dense; OLMoE has neither key", () => {
    const dense = (extra: object) => configFromHF({ ...qwen3moeJson, num_hidden_layers: 6, ...extra }).moe!.denseLayers;
    expect(dense({})).toEqual([]);
    expect(dense({ mlp_only_layers: [0, 3] })).toEqual([0, 3]);
    // transformers: layer l is sparse when (l + 1) % step == 0 (and it is not mlp-only).
    expect(dense({ decoder_sparse_step: 2 })).toEqual([0, 2, 4]);
    expect(dense({ decoder_sparse_step: 3, mlp_only_layers: [5] })).toEqual([0, 1, 3, 4, 5]);
    expect(configFromHF({ ...qwen2moeJson, mlp_only_layers: [0] }).moe!.denseLayers).toEqual([0]);
    expect(configFromHF({ ...olmoeJson, mlp_only_layers: [0], decoder_sparse_step: 2 }).moe!.denseLayers).toEqual([]);
  });

  it('names each layer its blocks: attention, then the experts on a MoE layer and the dense MLP elsewhere', () => {
    const blocks = (c: ReturnType<typeof configFromHF>) => Array.from({ length: c.numLayers }, (_, l) => layerBlocks(c, l));
    const mixed = blocks(configFromHF({ ...qwen3moeJson, num_hidden_layers: 3, mlp_only_layers: [1] }));
    expect(mixed).toEqual([
      { mixer: 'attention', ffn: 'moe' },
      { mixer: 'attention', ffn: 'mlp' },
      { mixer: 'attention', ffn: 'moe' },
    ]);
    expect(blocks(configFromHF(llamaJson)).every((b) => b.mixer === 'attention' && b.ffn === 'mlp')).toBe(true);
  });

  it('refuses bad dense-layer keys and more experts per token than experts, naming the key', () => {
    expect(thrown(() => configFromHF({ ...qwen3moeJson, decoder_sparse_step: 0 })).field).toBe('decoder_sparse_step');
    expect(thrown(() => configFromHF({ ...qwen3moeJson, mlp_only_layers: [48] })).field).toBe('mlp_only_layers');
    expect(thrown(() => configFromHF({ ...qwen3moeJson, mlp_only_layers: 'all' })).field).toBe('mlp_only_layers');
    expect(thrown(() => configFromHF({ ...qwen3moeJson, num_experts_per_tok: 129 })).field).toBe('num_experts_per_tok');
    expect(thrown(() => configFromHF({ ...qwen2moeJson, shared_expert_intermediate_size: undefined })).field).toBe('shared_expert_intermediate_size');
  });

  const base = (arch: string, extra: [string, unknown][]) =>
    new Map<string, unknown>([
      ['general.architecture', arch],
      [`${arch}.embedding_length`, 2048],
      [`${arch}.block_count`, 2],
      [`${arch}.attention.head_count`, 16],
      [`${arch}.attention.layer_norm_rms_epsilon`, 1e-6],
      [`${arch}.vocab_size`, 1000],
      ...extra,
    ]);

  it('reads llama.cpp\'s expert keys, with its fixed renormalisation per architecture', () => {
    const q3 = configFromGGUF(
      base('qwen3moe', [
        ['qwen3moe.feed_forward_length', 6144],
        ['qwen3moe.expert_feed_forward_length', 768],
        ['qwen3moe.expert_count', 128],
        ['qwen3moe.expert_used_count', 8],
      ]),
    );
    expect(q3.moe).toEqual({ numExperts: 128, numExpertsUsed: 8, expertIntermediateSize: 768, normTopkProb: true, sharedExpertIntermediateSize: null, denseLayers: [] });
    const q2 = configFromGGUF(
      base('qwen2moe', [
        ['qwen2moe.feed_forward_length', 5632],
        ['qwen2moe.expert_feed_forward_length', 1408],
        ['qwen2moe.expert_shared_feed_forward_length', 5632],
        ['qwen2moe.expert_count', 60],
        ['qwen2moe.expert_used_count', 4],
      ]),
    );
    expect(q2.moe).toEqual({ numExperts: 60, numExpertsUsed: 4, expertIntermediateSize: 1408, normTopkProb: false, sharedExpertIntermediateSize: 5632, denseLayers: [] });
    // OLMoE files state only feed_forward_length: the experts' size.
    const olmoe = configFromGGUF(base('olmoe', [['olmoe.feed_forward_length', 1024], ['olmoe.expert_count', 64], ['olmoe.expert_used_count', 8]]));
    expect(olmoe.moe).toEqual({ numExperts: 64, numExpertsUsed: 8, expertIntermediateSize: 1024, normTopkProb: false, sharedExpertIntermediateSize: null, denseLayers: [] });
    // llama.cpp's leading dense blocks: the first n layers run the dense MLP (feed_forward_length wide).
    const leading = (n: unknown) => base('qwen3moe', [['qwen3moe.feed_forward_length', 6144], ['qwen3moe.expert_feed_forward_length', 768], ['qwen3moe.expert_count', 128], ['qwen3moe.expert_used_count', 8], ['qwen3moe.leading_dense_block_count', n]]);
    expect(configFromGGUF(leading(1)).moe!.denseLayers).toEqual([0]);
    expect(configFromGGUF(leading(1)).intermediateSize).toBe(6144);
    expect(thrown(() => configFromGGUF(leading(3))).field).toBe('qwen3moe.leading_dense_block_count');
    expect(thrown(() => configFromGGUF(base('olmoe', [['olmoe.feed_forward_length', 1024], ['olmoe.expert_count', 64]]))).field).toBe('olmoe.expert_used_count');
  });
});
