/**
 * The Hugging Face reader: config.json (and generation_config.json) into a ModelConfig, each family
 * as its row of the architecture table (./arch.ts) says.
 */
import { ARCH, ARCHES, type Arch, type ArchInfo } from './arch';
import { everyNth, mtpLayerCount, patternLayers, unique, type DeltaNetConfig, type Mamba2Config, type ModelConfig, type MoeConfig, type RopeScaling, type ShortConvConfig, type SlidingWindow } from './config';
import { ModelError } from './errors';
import { yarnMscale } from './rope';

type Json = Record<string, unknown>;

/**
 * Normalises a Hugging Face `config.json` (plus `generation_config.json`, whose eos ids are the
 * ones `generate()` stops on). Throws `ModelError` naming the key for anything we cannot run.
 */
export function configFromHF(configJson: unknown, generationConfigJson?: unknown): ModelConfig {
  if (!isObject(configJson)) throw new ModelError('invalid_field', 'config.json is not a JSON object', 'config.json');
  const text = textConfig(configJson);
  const c = denseOfHybrid(text);
  // Granite 4.0-H: the hybrid's Mamba-2 layers, and attention without RoPE unless it says "rope".
  const hybrid = hybridArch(text) !== undefined;
  const arch = hfArch(c);
  const row = ARCH[arch];
  const field = (key: string) => `config.json: ${key}`;
  // EmbeddingGemma (gemma3 text, use_bidirectional_attention): every token sees both ways; read as
  // ModelConfig.bidirectional. Other families' bidirectional configs are refused rather than run
  // causally. ("vision": only image tokens, Gemma 4.)
  const bidirectional = isBidirectionalConfig(c);
  if (bidirectional && arch !== 'gemma3')
    throw new ModelError('unsupported_arch', `${field('use_bidirectional_attention')}: bidirectional ${arch} models are not supported (EmbeddingGemma's gemma3 is)`, 'use_bidirectional_attention');

  const positive = (key: string, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (v === undefined || v === null) throw new ModelError('missing_field', `${field(key)} is required for ${arch} models`, key);
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
      throw new ModelError('invalid_field', `${field(key)} must be a positive integer, got ${JSON.stringify(v)}`, key);
    return v;
  };
  const positiveReal = (key: string, fallback: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !(v > 0))
      throw new ModelError('invalid_field', `${field(key)} must be a positive number, got ${JSON.stringify(v)}`, key);
    return v;
  };

  const positiveRealAt = (v: unknown, key: string, fallback: number): number => {
    const x = v ?? fallback;
    if (typeof x !== 'number' || !(x > 0)) throw new ModelError('invalid_field', `${field(key)} must be a positive number, got ${JSON.stringify(x)}`, key);
    return x;
  };
  // Absent or null: off.
  const optionalPositive = (key: string): number | null => (c[key] === undefined || c[key] === null ? null : positiveReal(key, 0));

  const hiddenSize = positive('hidden_size');
  const numHeads = positive('num_attention_heads');
  const numKvHeads = positive('num_key_value_heads', numHeads);
  if (numHeads % numKvHeads !== 0)
    throw new ModelError('invalid_field', `${field('num_key_value_heads')} (${numKvHeads}) must divide num_attention_heads (${numHeads})`, 'num_key_value_heads');
  // head_dim may be absent or null; transformers then uses hidden_size / num_attention_heads.
  const headDim = positive('head_dim', c.head_dim == null ? hiddenSize / numHeads : undefined);
  if (headDim % 2 !== 0) throw new ModelError('invalid_field', `${field('head_dim')} must be even for RoPE, got ${headDim}`, 'head_dim');

  // transformers v5 moved rope_theta and rope_scaling into `rope_parameters`, per layer type
  // where those differ (Gemma 3: full_attention, sliding_attention).
  const byType = isObject(c.rope_parameters) && isObject(c.rope_parameters.full_attention) ? c.rope_parameters : undefined;
  const ropeParams = byType ? (byType.full_attention as Json) : isObject(c.rope_parameters) ? c.rope_parameters : undefined;
  const localParams = byType && isObject(byType.sliding_attention) ? byType.sliding_attention : undefined;
  const ropeTheta = ropeParams?.rope_theta ?? c.rope_theta ?? 10000;
  if (typeof ropeTheta !== 'number' || !(ropeTheta > 0))
    throw new ModelError('invalid_field', `${field('rope_theta')} must be a positive number, got ${JSON.stringify(ropeTheta)}`, 'rope_theta');

  const numLayers = positive('num_hidden_layers');
  const gen = isObject(generationConfigJson) ? generationConfigJson : {};
  // Partial rotary (Phi-4-mini's partial_rotary_factor 0.75; Qwen3.5's 0.25, which transformers v5
  // keeps in rope_parameters): the leading dimensions of each head. int(head_dim * factor), as
  // transformers truncates it.
  const factor = positiveRealAt(c.partial_rotary_factor ?? ropeParams?.partial_rotary_factor, 'partial_rotary_factor', row.hfDefaults.partialRotaryFactor ?? 1);
  const rotary = Math.trunc(headDim * factor);
  if (rotary % 2 !== 0 || rotary > headDim)
    throw new ModelError('invalid_field', `${field('partial_rotary_factor')} must rotate an even number of dimensions up to head_dim (${headDim}), got ${rotary}`, 'partial_rotary_factor');
  const maxPositionEmbeddings = positive('max_position_embeddings', row.hfDefaults.maxPositionEmbeddings);
  const bos = gen.bos_token_id ?? c.bos_token_id;
  return {
    arch,
    vocabSize: positive('vocab_size'),
    hiddenSize,
    intermediateSize: row.shortConv ? lfm2FfnWidth(c, positive) : positive('intermediate_size'),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    // LFM2 names its eps norm_eps.
    rmsNormEps: positiveReal(row.shortConv ? 'norm_eps' : 'rms_norm_eps', row.hfDefaults.rmsNormEps),
    ropeTheta,
    ropeScaling: hfRopeScaling(ropeParams ?? c.rope_scaling, ropeParams ? 'rope_parameters' : 'rope_scaling', { c, maxPositionEmbeddings, rotary }),
    rotaryDim: rotary === headDim ? null : rotary,
    ropeStyle: 'neox',
    maxPositionEmbeddings,
    // LFM2's config.json says tie_embedding.
    tieWordEmbeddings: (c.tie_word_embeddings ?? (row.shortConv ? c.tie_embedding : undefined) ?? row.hfDefaults.tieWordEmbeddings) === true,
    attentionBias: row.attentionBias === 'always' || c.attention_bias === true,
    qkNorm: row.qkNorm,
    qkNormScope: row.qkNormScope,
    normPlacement: row.normPlacement,
    ropeLocalTheta: row.ropeLocalBase === null ? null : positiveRealAt(localParams?.rope_theta ?? c.rope_local_base_freq, 'rope_local_base_freq', row.ropeLocalBase),
    normWeightOffset: row.normOnePlus ? 1 : 0,
    embeddingScale: row.embeddingSqrtScale ? Math.sqrt(hiddenSize) : row.multipliers ? positiveReal('embedding_multiplier', 1) : 1,
    ffnActivation: row.ffnActivation,
    // transformers' Gemma2Config default query_pre_attn_scalar is 256; Granite's attention_multiplier replaces 1/sqrt(d) (default 1).
    attentionScale: row.queryPreAttnScalar
      ? 1 / Math.sqrt(positiveReal('query_pre_attn_scalar', 256))
      : row.multipliers
        ? positiveReal('attention_multiplier', 1)
        : null,
    residualScale: row.multipliers ? positiveReal('residual_multiplier', 1) : 1,
    logitsScaling: row.multipliers ? positiveReal('logits_scaling', 1) : 1,
    attnLogitSoftcap: row.logitSoftcaps ? optionalPositive('attn_logit_softcapping') : null,
    finalLogitSoftcap: row.logitSoftcaps ? optionalPositive('final_logit_softcapping') : null,
    // config.json may state its own pattern (Gemma 3's sliding_window_pattern).
    slidingWindow: hfSlidingWindow(c, row.hfSlidingWindow, numLayers, typeof c.sliding_window_pattern === 'number' ? c.sliding_window_pattern : row.swaPattern),
    noRopeLayers: hybrid && c.position_embedding_type !== 'rope' ? Array.from({ length: numLayers }, (_, l) => l) : hfNoRopeLayers(c, row.noRopeLayerStep, numLayers),
    moe: hfMoe(c, row.moe, positive, numLayers),
    shortConv: row.shortConv ? hfShortConv(c, positive, numLayers) : null,
    deltaNet: row.gatedDeltaNet ? hfDeltaNet(c, positive, numLayers) : null,
    mamba2: hybrid ? hfMamba2(c, positive, numLayers, hiddenSize) : null,
    attnOutputGate: row.gatedDeltaNet,
    ...(row.mtp ? { mtpLayers: mtpLayerCount(c.mtp_num_hidden_layers, field('mtp_num_hidden_layers'), 'mtp_num_hidden_layers') } : {}),
    bosTokenId: typeof bos === 'number' ? bos : null,
    eosTokenIds: unique([...tokenIds(gen.eos_token_id), ...tokenIds(c.eos_token_id)]),
    ...(bidirectional ? { bidirectional: true } : {}),
  };
}

/** Whether config.json asks for attention both ways on every token (`use_bidirectional_attention`: true or "all"; "vision" is Gemma 4's image tokens only). */
export function isBidirectionalConfig(c: Record<string, unknown>): boolean {
  return c.use_bidirectional_attention === true || c.use_bidirectional_attention === 'all';
}

/**
 * The text model's config: config.json itself, or for a multimodal checkpoint (ArchInfo's
 * hfMultimodal) its `text_config` over the text config class's defaults, with the top level's
 * token ids and tying where the nested one leaves them out.
 */
function textConfig(c: Json): Json {
  const archs = Array.isArray(c.architectures) ? c.architectures : [];
  const arch = ARCHES.find((a) => {
    const mm = ARCH[a].hfMultimodal;
    return mm && [mm, ...(mm.also ?? [])].some((m) => (c.model_type === undefined ? archs.includes(m.hfClass) : c.model_type === m.modelType));
  });
  if (!arch) return c;
  const mm = ARCH[arch].hfMultimodal!;
  if (!isObject(c.text_config))
    throw new ModelError('missing_field', `config.json: text_config is required for ${String(c.model_type ?? mm.modelType)} (multimodal) models`, 'text_config');
  const top = Object.fromEntries(['bos_token_id', 'eos_token_id', 'tie_word_embeddings'].filter((k) => c[k] !== undefined).map((k) => [k, c[k]]));
  return { ...mm.textDefaults, ...top, ...c.text_config, model_type: ARCH[arch].hfModelType ?? arch, architectures: [ARCH[arch].hfClass] };
}

/**
 * A hybrid family's config.json (ArchInfo.hfHybrid: Granite 4.0's `granitemoehybrid`) as its
 * plain row's config, transformers' reading (GraniteMoeHybridConfig: `num_local_experts` defaults
 * to 8, `shared_intermediate_size` to 1024); its Mamba-2 layers and NoPE attention are read by
 * configFromHF (hfMamba2). Routed experts are refused. Any other config.json comes back as it is.
 */
function denseOfHybrid(c: Json): Json {
  const arch = hybridArch(c);
  if (!arch) return c;
  const type = ARCH[arch].hfHybrid!.modelType;
  const experts = c.num_local_experts ?? 8;
  if (experts !== 0)
    throw new ModelError('unsupported_arch', `config.json: ${type} with routed experts (num_local_experts ${JSON.stringify(experts)}) is not supported; only its dense form runs (num_local_experts 0)`, 'num_local_experts');
  return {
    ...c,
    model_type: ARCH[arch].hfModelType ?? arch,
    architectures: [ARCH[arch].hfClass],
    // The dense MLP is the shared one.
    intermediate_size: c.shared_intermediate_size ?? 1024,
  };
}

/** The row whose hybrid config.json this is (ArchInfo.hfHybrid), if any. */
function hybridArch(c: Json): Arch | undefined {
  const archs = Array.isArray(c.architectures) ? c.architectures : [];
  return ARCHES.find((a) => {
    const h = ARCH[a].hfHybrid;
    return h && (c.model_type === undefined ? archs.includes(h.hfClass) : c.model_type === h.modelType);
  });
}

/**
 * Granite 4.0-H's Mamba-2 layers as transformers reads config.json (GraniteMoeHybridConfig):
 * `layer_types` ("mamba" or "attention" per layer; absent: Mamba on every layer), `mamba_*` sizes
 * with its defaults (128 heads, d_head "auto" = mamba_expand (2) · hidden / heads, d_state 256,
 * 1 group, d_conv 4), the conv biased and in_proj not. HF stores A_log. null: no Mamba layer.
 */
function hfMamba2(c: Json, positive: (key: string, fallback?: number) => number, numLayers: number, hiddenSize: number): Mamba2Config | null {
  const types = c.layer_types ?? new Array<string>(numLayers).fill('mamba');
  if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'mamba' || t === 'attention'))
    throw new ModelError('invalid_field', `config.json: layer_types must list "mamba" or "attention" for each of the ${numLayers} layers`, 'layer_types');
  const layers = types.flatMap((t, l) => (t === 'mamba' ? [l] : []));
  if (layers.length === 0) return null;
  if (c.mamba_proj_bias === true || c.mamba_conv_bias === false)
    throw new ModelError('unsupported_arch', 'config.json: Mamba-2 layers with mamba_proj_bias true or mamba_conv_bias false are not supported', c.mamba_proj_bias === true ? 'mamba_proj_bias' : 'mamba_conv_bias');
  const numHeads = positive('mamba_n_heads', 128);
  const inner = positive('mamba_expand', 2) * hiddenSize;
  const headDim = c.mamba_d_head === undefined || c.mamba_d_head === 'auto' ? inner / numHeads : positive('mamba_d_head');
  const numGroups = positive('mamba_n_groups', 1);
  if (!Number.isInteger(headDim) || headDim * numHeads !== inner || numHeads % numGroups !== 0)
    throw new ModelError('invalid_field', `config.json: mamba_n_heads (${numHeads}) · mamba_d_head must be mamba_expand · hidden_size (${inner}), and mamba_n_groups must divide the heads`, 'mamba_d_head');
  return { layers, convKernel: positive('mamba_d_conv', 4), numHeads, headDim, stateSize: positive('mamba_d_state', 256), numGroups, aStored: 'log' };
}

function hfArch(c: Json): Arch {
  const modelType = c.model_type;
  if (typeof modelType === 'string') {
    const arch = ARCHES.find((a) => (ARCH[a].hfModelType ?? a) === modelType);
    if (arch) return arch;
    throw new ModelError(
      'unsupported_arch',
      `config.json: model_type "${modelType}" is not supported (supported: ${ARCHES.map((a) => ARCH[a].hfModelType ?? a).join(', ')})`,
      'model_type',
    );
  }
  const archs = Array.isArray(c.architectures) ? c.architectures : [];
  for (const a of archs) {
    const arch = ARCHES.find((x) => ARCH[x].hfClass === a);
    if (arch) return arch;
  }
  if (archs.length > 0)
    throw new ModelError(
      'unsupported_arch',
      `config.json: architectures ${JSON.stringify(archs)} are not supported (supported: ${ARCHES.map((a) => ARCH[a].hfClass).join(', ')})`,
      'architectures',
    );
  throw new ModelError('missing_field', 'config.json has neither model_type nor architectures', 'model_type');
}

/** The sliding window as transformers builds it from config.json, in the family's `style` (ArchInfo.hfSlidingWindow). */
function hfSlidingWindow(c: Json, style: ArchInfo['hfSlidingWindow'], numLayers: number, pattern: number | null): SlidingWindow | null {
  if (style === null) return null;
  if (style === 'use_sliding_window' && c.use_sliding_window !== true) return null;
  const raw = 'sliding_window' in c ? c.sliding_window : 4096;
  if (raw === null) return null;
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw <= 0)
    throw new ModelError('invalid_field', `config.json: sliding_window must be a positive integer or null, got ${JSON.stringify(raw)}`, 'sliding_window');

  let layers: number[];
  if (c.layer_types !== undefined && c.layer_types !== null) {
    const types = c.layer_types;
    if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'sliding_attention' || t === 'full_attention'))
      throw new ModelError(
        'invalid_field',
        `config.json: layer_types must list "sliding_attention" or "full_attention" for each of the ${numLayers} layers`,
        'layer_types',
      );
    layers = types.flatMap((t, i) => (t === 'sliding_attention' ? [i] : []));
  } else if (style === 'use_sliding_window') {
    const from = c.max_window_layers ?? 28;
    if (typeof from !== 'number' || !Number.isInteger(from) || from < 0)
      throw new ModelError('invalid_field', `config.json: max_window_layers must be a non-negative integer, got ${JSON.stringify(from)}`, 'max_window_layers');
    layers = Array.from({ length: Math.max(0, numLayers - from) }, (_, i) => from + i);
  } else if (style === 'pattern') {
    layers = patternLayers(pattern, numLayers);
  } else {
    layers = Array.from({ length: numLayers }, (_, i) => i);
  }
  return layers.length > 0 ? { size: raw, layers } : null;
}

/**
 * The experts as transformers reads config.json: `num_experts`, `num_experts_per_tok`, the
 * expert size under the family's key, `norm_topk_prob`, the shared expert's size, and the dense
 * layers: Qwen2-MoE/Qwen3-MoE run the experts on layer l when l is not in `mlp_only_layers` and
 * (l + 1) % `decoder_sparse_step` == 0 (defaults [] and 1), the dense MLP elsewhere.
 */
function hfMoe(c: Json, moe: ArchInfo['moe'], positive: (key: string, fallback?: number) => number, numLayers: number): MoeConfig | null {
  if (moe === null) return null;
  // Families whose config class has no such keys run the experts on every layer (transformers ignores them).
  const step = moe.hfDenseLayers ? (c.decoder_sparse_step ?? 1) : 1;
  if (typeof step !== 'number' || !Number.isInteger(step) || step < 1)
    throw new ModelError('invalid_field', `config.json: decoder_sparse_step must be a positive integer, got ${JSON.stringify(step)}`, 'decoder_sparse_step');
  const mlpOnly = moe.hfDenseLayers ? (c.mlp_only_layers ?? []) : [];
  if (!Array.isArray(mlpOnly) || !mlpOnly.every((l) => Number.isInteger(l) && l >= 0 && l < numLayers))
    throw new ModelError('invalid_field', `config.json: mlp_only_layers must list layer indices below num_hidden_layers (${numLayers}), got ${JSON.stringify(mlpOnly)}`, 'mlp_only_layers');
  const numExperts = positive('num_experts');
  const numExpertsUsed = positive('num_experts_per_tok');
  if (numExpertsUsed > numExperts)
    throw new ModelError('invalid_field', `config.json: num_experts_per_tok (${numExpertsUsed}) must be at most num_experts (${numExperts})`, 'num_experts_per_tok');
  const norm = c.norm_topk_prob ?? moe.hfNormTopkProb;
  if (typeof norm !== 'boolean') throw new ModelError('invalid_field', `config.json: norm_topk_prob must be a boolean, got ${JSON.stringify(norm)}`, 'norm_topk_prob');
  return {
    numExperts,
    numExpertsUsed,
    expertIntermediateSize: positive(moe.hfExpertSize),
    normTopkProb: norm,
    sharedExpertIntermediateSize: moe.sharedExpert ? positive('shared_expert_intermediate_size') : null,
    denseLayers: Array.from({ length: numLayers }, (_, l) => l).filter((l) => (mlpOnly as number[]).includes(l) || (l + 1) % step !== 0),
  };
}

/**
 * LFM2's conv layers as transformers reads config.json: `layer_types` ("conv" or "full_attention"
 * per layer), else the layers missing from `full_attn_idxs` (Lfm2Config's default: every layer
 * attends, so null); `conv_L_cache` taps (default 3). Biases (`conv_bias`) are refused: no
 * released checkpoint has them.
 */
function hfShortConv(c: Json, positive: (key: string, fallback?: number) => number, numLayers: number): ShortConvConfig | null {
  if (c.conv_bias === true) throw new ModelError('invalid_field', 'config.json: conv_bias true is not supported (LFM2 checkpoints have no conv biases)', 'conv_bias');
  const types = c.layer_types;
  let layers: number[];
  if (types !== undefined && types !== null) {
    if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'conv' || t === 'full_attention'))
      throw new ModelError('invalid_field', `config.json: layer_types must list "conv" or "full_attention" for each of the ${numLayers} layers`, 'layer_types');
    layers = types.flatMap((t, l) => (t === 'conv' ? [l] : []));
  } else {
    const attn = c.full_attn_idxs ?? Array.from({ length: numLayers }, (_, l) => l);
    if (!Array.isArray(attn) || !attn.every((l) => Number.isInteger(l) && l >= 0 && l < numLayers))
      throw new ModelError('invalid_field', `config.json: full_attn_idxs must list layer indices below ${numLayers}`, 'full_attn_idxs');
    layers = Array.from({ length: numLayers }, (_, l) => l).filter((l) => !attn.includes(l));
  }
  return layers.length ? { kernel: positive('conv_L_cache', 3), layers } : null;
}

/**
 * Qwen3.5's DeltaNet layers as transformers reads config.json (Qwen3NextConfig): `layer_types`
 * ("linear_attention" or "full_attention" per layer), else every `full_attention_interval`-th
 * layer (default 4) attends and the others are linear; the `linear_*` sizes (Qwen3_5TextConfig's
 * defaults). HF groups the value heads by key head and stores A_log.
 */
function hfDeltaNet(c: Json, positive: (key: string, fallback?: number) => number, numLayers: number): DeltaNetConfig | null {
  const types = c.layer_types;
  let layers: number[];
  if (types !== undefined && types !== null) {
    if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'linear_attention' || t === 'full_attention'))
      throw new ModelError('invalid_field', `config.json: layer_types must list "linear_attention" or "full_attention" for each of the ${numLayers} layers`, 'layer_types');
    layers = types.flatMap((t, l) => (t === 'linear_attention' ? [l] : []));
  } else {
    const every = positive('full_attention_interval', 4);
    layers = Array.from({ length: numLayers }, (_, l) => l).filter((l) => (l + 1) % every !== 0);
  }
  const numKHeads = positive('linear_num_key_heads', 16);
  const numVHeads = positive('linear_num_value_heads', 32);
  if (numVHeads % numKHeads !== 0)
    throw new ModelError('invalid_field', `config.json: linear_num_key_heads (${numKHeads}) must divide linear_num_value_heads (${numVHeads})`, 'linear_num_value_heads');
  if (layers.length === 0) return null;
  return {
    layers,
    convKernel: positive('linear_conv_kernel_dim', 4),
    numKHeads,
    numVHeads,
    headKDim: positive('linear_key_head_dim', 128),
    headVDim: positive('linear_value_head_dim', 128),
    vHeadOrder: 'grouped',
    aStored: 'log',
  };
}

/**
 * LFM2's FFN width as Lfm2MLP derives it: `block_ff_dim` (else `intermediate_size`); with
 * `block_auto_adjust_ff_dim`, int(2·w/3), then with `block_ffn_dim_multiplier` int(m·w) rounded up
 * to a multiple of `block_multiple_of` (GGUF files store the result).
 */
function lfm2FfnWidth(c: Json, positive: (key: string, fallback?: number) => number): number {
  let w = c.block_ff_dim !== undefined ? positive('block_ff_dim') : positive('intermediate_size');
  if (c.block_auto_adjust_ff_dim !== true) return w;
  w = Math.trunc((2 * w) / 3);
  const m = c.block_ffn_dim_multiplier;
  if (m === undefined || m === null) return w;
  if (typeof m !== 'number' || !(m > 0)) throw new ModelError('invalid_field', `config.json: block_ffn_dim_multiplier must be a positive number, got ${JSON.stringify(m)}`, 'block_ffn_dim_multiplier');
  const of = positive('block_multiple_of', 256);
  return of * Math.ceil(Math.trunc(m * w) / of);
}

/**
 * NoPE layers as transformers reads them (SmolLM3): `no_rope_layers` has one entry per layer (at
 * least), 1 for RoPE and 0 for NoPE; without it every `no_rope_layer_interval`-th layer is NoPE.
 */
function hfNoRopeLayers(c: Json, step: ArchInfo['noRopeLayerStep'], numLayers: number): number[] {
  if (step === null) return [];
  const list = c.no_rope_layers;
  if (list !== undefined && list !== null) {
    if (!Array.isArray(list) || list.length < numLayers || !list.every((v) => v === 0 || v === 1))
      throw new ModelError('invalid_field', `config.json: no_rope_layers must list 0 or 1 for each of the ${numLayers} layers`, 'no_rope_layers');
    return list.slice(0, numLayers).flatMap((v, l) => (v === 0 ? [l] : []));
  }
  const interval = c.no_rope_layer_interval ?? step;
  if (typeof interval !== 'number' || !Number.isInteger(interval) || interval <= 0)
    throw new ModelError('invalid_field', `config.json: no_rope_layer_interval must be a positive integer, got ${JSON.stringify(interval)}`, 'no_rope_layer_interval');
  return everyNth(interval, numLayers);
}

/** What LongRoPE needs beyond rope_scaling itself: top-level keys and the rotary width. */
interface RopeContext {
  c: Json;
  maxPositionEmbeddings: number;
  rotary: number;
}

function hfRopeScaling(raw: unknown, key: string, ctx: RopeContext): RopeScaling {
  if (raw === undefined || raw === null) return null;
  if (!isObject(raw)) throw new ModelError('invalid_field', `config.json: ${key} must be an object or null`, key);
  // Older configs spell it `type`, newer ones `rope_type`.
  const type = raw.rope_type ?? raw.type ?? 'default';
  const num = (name: string): number => {
    const v = raw[name];
    if (typeof v !== 'number' || !(v > 0))
      throw new ModelError('invalid_field', `config.json: ${key}.${name} must be a positive number for rope type "${String(type)}"`, `${key}.${name}`);
    return v;
  };
  switch (type) {
    case 'default':
      return null;
    case 'linear':
      return { type: 'linear', factor: num('factor') };
    case 'llama3':
      return {
        type: 'llama3',
        factor: num('factor'),
        lowFreqFactor: num('low_freq_factor'),
        highFreqFactor: num('high_freq_factor'),
        originalMaxPositionEmbeddings: num('original_max_position_embeddings'),
      };
    // Phi-3's LongRoPE, first released as "su".
    case 'longrope':
    case 'su': {
      const factors = (name: string): number[] => {
        const v = raw[name];
        if (!Array.isArray(v) || v.length !== ctx.rotary / 2 || !v.every((x) => typeof x === 'number' && x > 0))
          throw new ModelError('invalid_field', `config.json: ${key}.${name} must list ${ctx.rotary / 2} positive numbers (one per rotated pair)`, `${key}.${name}`);
        return v as number[];
      };
      // As transformers' _compute_longrope_parameters: the original context is config.json's
      // top-level original_max_position_embeddings (or rope_scaling's), the factor the ratio of
      // the maximum to it, and the attention factor sqrt(1 + ln(factor) / ln(original)) unless stated.
      const orig = ctx.c.original_max_position_embeddings ?? raw.original_max_position_embeddings;
      if (typeof orig !== 'number' || !Number.isInteger(orig) || orig <= 0)
        throw new ModelError('invalid_field', 'config.json: original_max_position_embeddings must be a positive integer for LongRoPE', 'original_max_position_embeddings');
      const factor = ctx.maxPositionEmbeddings / orig;
      const stated = raw.attention_factor;
      if (stated !== undefined && stated !== null && !(typeof stated === 'number' && stated > 0))
        throw new ModelError('invalid_field', `config.json: ${key}.attention_factor must be a positive number`, `${key}.attention_factor`);
      const attentionFactor = typeof stated === 'number' ? stated : factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(orig));
      return { type: 'longrope', longFactor: factors('long_factor'), shortFactor: factors('short_factor'), originalMaxPositionEmbeddings: orig, attentionFactor };
    }
    // As transformers' _compute_yarn_parameters: the original context is rope_scaling's (else
    // max_position_embeddings), the factor as stated (else the ratio of the two), beta_fast and
    // beta_slow 32 and 1 when absent or 0 (Python's `or`), the ramp truncated unless `truncate` is
    // false (gpt-oss), and the attention factor as stated, else mscale(factor, mscale) /
    // mscale(factor, mscale_all_dim) when both are set (DeepSeek's), else mscale(factor).
    case 'yarn': {
      const stated = (name: string): number | undefined => (raw[name] === undefined || raw[name] === null ? undefined : num(name));
      const set = (name: string): number | undefined => (raw[name] === 0 ? undefined : stated(name));
      const orig = stated('original_max_position_embeddings') ?? ctx.maxPositionEmbeddings;
      const factor = stated('factor') ?? ctx.maxPositionEmbeddings / orig;
      const [mscale, mscaleAllDim] = [set('mscale'), set('mscale_all_dim')];
      const truncate = raw.truncate ?? true;
      if (typeof truncate !== 'boolean') throw new ModelError('invalid_field', `config.json: ${key}.truncate must be true or false`, `${key}.truncate`);
      const attentionFactor =
        stated('attention_factor') ?? (mscale && mscaleAllDim ? yarnMscale(factor, mscale) / yarnMscale(factor, mscaleAllDim) : yarnMscale(factor));
      return { type: 'yarn', factor, originalMaxPositionEmbeddings: orig, betaFast: set('beta_fast') ?? 32, betaSlow: set('beta_slow') ?? 1, attentionFactor, truncate };
    }
    default:
      throw new ModelError(
        'invalid_field',
        `config.json: ${key} type "${String(type)}" is not supported (supported: default, linear, llama3, longrope, yarn)`,
        `${key}.rope_type`,
      );
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function tokenIds(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number');
  return [];
}
