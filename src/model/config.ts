import { ModelError } from './errors';

/** The architectures we run. Mistral is Llama's graph with its own config defaults. */
export type Arch = 'llama' | 'qwen2' | 'qwen3' | 'mistral';
export const ARCHES: readonly Arch[] = ['llama', 'qwen2', 'qwen3', 'mistral'];

export type RopeScaling =
  | null
  | {
      /** Llama 3.1+: per-frequency smooth interpolation between factor and 1. */
      type: 'llama3';
      factor: number;
      lowFreqFactor: number;
      highFreqFactor: number;
      originalMaxPositionEmbeddings: number;
    }
  | { /** Positions divided by factor. */ type: 'linear'; factor: number };

/** One normalised description of a model, whatever file it came from. */
export interface ModelConfig {
  arch: Arch;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling;
  /**
   * 'neox': rotate pairs (i, i + headDim/2), as in HF checkpoints and GGUF qwen2/qwen3.
   * 'interleaved': pairs (2i, 2i+1), as in GGUF llama files, whose q/k rows the converter permuted.
   */
  ropeStyle: 'neox' | 'interleaved';
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  /** q/k/v projections carry biases (Qwen2 always; Llama/Qwen3 when `attention_bias`). */
  attentionBias: boolean;
  /** Per-head RMSNorm of q and k before RoPE (Qwen3). */
  qkNorm: boolean;
  /**
   * Sliding-window attention (Mistral; Qwen2/Qwen3 with `use_sliding_window`): on the listed
   * layers a query at position p sees only keys j with p - size < j <= p, the current one
   * included (transformers' `sliding_window_overlay` on top of the causal mask; llama.cpp's
   * standard SWA masks p - j >= n_swa). null: every layer sees its whole causal context.
   */
  slidingWindow: SlidingWindow | null;
  bosTokenId: number | null;
  eosTokenIds: number[];
}

export interface SlidingWindow {
  /** Keys a query sees, its own included. */
  size: number;
  /** Layer indices that use the window, ascending; the others attend fully. */
  layers: readonly number[];
}

/** The attention window of layer `layer`: a key count, or null for full causal attention. */
export function layerWindow(config: Pick<ModelConfig, 'slidingWindow'>, layer: number): number | null {
  const w = config.slidingWindow;
  return w && w.layers.includes(layer) ? w.size : null;
}

type Json = Record<string, unknown>;

// HF class names, for configs that carry `architectures` but no `model_type`.
const HF_ARCHITECTURES: Record<string, Arch> = {
  LlamaForCausalLM: 'llama',
  MistralForCausalLM: 'mistral',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
};

// Defaults of transformers' config classes for keys a config.json may leave out.
const HF_DEFAULTS: Record<Arch, { maxPositionEmbeddings: number; rmsNormEps: number }> = {
  llama: { maxPositionEmbeddings: 2048, rmsNormEps: 1e-6 },
  mistral: { maxPositionEmbeddings: 4096 * 32, rmsNormEps: 1e-6 },
  qwen2: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6 },
  qwen3: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6 },
};

/**
 * Normalises a Hugging Face `config.json` (plus `generation_config.json`, whose eos ids are the
 * ones `generate()` stops on). Throws `ModelError` naming the key for anything we cannot run.
 */
export function configFromHF(configJson: unknown, generationConfigJson?: unknown): ModelConfig {
  if (!isObject(configJson)) throw new ModelError('invalid_field', 'config.json is not a JSON object', 'config.json');
  const c = configJson;
  const arch = hfArch(c);
  const field = (key: string) => `config.json: ${key}`;

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

  const hiddenSize = positive('hidden_size');
  const numHeads = positive('num_attention_heads');
  const numKvHeads = positive('num_key_value_heads', numHeads);
  if (numHeads % numKvHeads !== 0)
    throw new ModelError('invalid_field', `${field('num_key_value_heads')} (${numKvHeads}) must divide num_attention_heads (${numHeads})`, 'num_key_value_heads');
  // head_dim may be absent or null; transformers then uses hidden_size / num_attention_heads.
  const headDim = positive('head_dim', c.head_dim == null ? hiddenSize / numHeads : undefined);
  if (headDim % 2 !== 0) throw new ModelError('invalid_field', `${field('head_dim')} must be even for RoPE, got ${headDim}`, 'head_dim');

  // transformers v5 moved rope_theta and rope_scaling into `rope_parameters`.
  const ropeParams = isObject(c.rope_parameters) ? c.rope_parameters : undefined;
  const ropeTheta = ropeParams?.rope_theta ?? c.rope_theta ?? 10000;
  if (typeof ropeTheta !== 'number' || !(ropeTheta > 0))
    throw new ModelError('invalid_field', `${field('rope_theta')} must be a positive number, got ${JSON.stringify(ropeTheta)}`, 'rope_theta');

  const numLayers = positive('num_hidden_layers');
  const gen = isObject(generationConfigJson) ? generationConfigJson : {};
  const bos = gen.bos_token_id ?? c.bos_token_id;
  return {
    arch,
    vocabSize: positive('vocab_size'),
    hiddenSize,
    intermediateSize: positive('intermediate_size'),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: positiveReal('rms_norm_eps', HF_DEFAULTS[arch].rmsNormEps),
    ropeTheta,
    ropeScaling: hfRopeScaling(ropeParams ?? c.rope_scaling, ropeParams ? 'rope_parameters' : 'rope_scaling'),
    ropeStyle: 'neox',
    maxPositionEmbeddings: positive('max_position_embeddings', HF_DEFAULTS[arch].maxPositionEmbeddings),
    tieWordEmbeddings: c.tie_word_embeddings === true,
    // Qwen2's q/k/v projections always have biases; the others follow `attention_bias`.
    attentionBias: arch === 'qwen2' || c.attention_bias === true,
    qkNorm: arch === 'qwen3',
    slidingWindow: hfSlidingWindow(c, arch, numLayers),
    bosTokenId: typeof bos === 'number' ? bos : null,
    eosTokenIds: unique([...tokenIds(gen.eos_token_id), ...tokenIds(c.eos_token_id)]),
  };
}

function hfArch(c: Json): Arch {
  const modelType = c.model_type;
  if (typeof modelType === 'string') {
    if ((ARCHES as readonly string[]).includes(modelType)) return modelType as Arch;
    throw new ModelError(
      'unsupported_arch',
      `config.json: model_type "${modelType}" is not supported (supported: ${ARCHES.join(', ')})`,
      'model_type',
    );
  }
  const archs = Array.isArray(c.architectures) ? c.architectures : [];
  for (const a of archs) if (typeof a === 'string' && a in HF_ARCHITECTURES) return HF_ARCHITECTURES[a];
  if (archs.length > 0)
    throw new ModelError(
      'unsupported_arch',
      `config.json: architectures ${JSON.stringify(archs)} are not supported (supported: ${Object.keys(HF_ARCHITECTURES).join(', ')})`,
      'architectures',
    );
  throw new ModelError('missing_field', 'config.json has neither model_type nor architectures', 'model_type');
}

/**
 * The sliding window as transformers builds it from config.json:
 * - mistral: `sliding_window` on every layer; an absent key means MistralConfig's default, 4096,
 *   and null turns it off.
 * - qwen2/qwen3: only when `use_sliding_window` is true (default false); then `sliding_window`
 *   (default 4096) applies to layers i >= `max_window_layers` (default 28).
 * - any arch: an explicit `layer_types` list ("sliding_attention" / "full_attention") names the
 *   windowed layers itself.
 * - llama: LlamaConfig has no window.
 */
function hfSlidingWindow(c: Json, arch: Arch, numLayers: number): SlidingWindow | null {
  if (arch === 'llama') return null;
  const qwen = arch === 'qwen2' || arch === 'qwen3';
  if (qwen && c.use_sliding_window !== true) return null;
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
  } else if (qwen) {
    const from = c.max_window_layers ?? 28;
    if (typeof from !== 'number' || !Number.isInteger(from) || from < 0)
      throw new ModelError('invalid_field', `config.json: max_window_layers must be a non-negative integer, got ${JSON.stringify(from)}`, 'max_window_layers');
    layers = Array.from({ length: Math.max(0, numLayers - from) }, (_, i) => from + i);
  } else {
    layers = Array.from({ length: numLayers }, (_, i) => i);
  }
  return layers.length > 0 ? { size: raw, layers } : null;
}

function hfRopeScaling(raw: unknown, key: string): RopeScaling {
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
    default:
      throw new ModelError(
        'invalid_field',
        `config.json: ${key} type "${String(type)}" is not supported (supported: default, linear, llama3)`,
        `${key}.rope_type`,
      );
  }
}

/** What configFromGGUF needs to know of the file's tensors (names and shapes, outermost first). */
export interface GGUFTensorShape {
  name: string;
  shape: readonly number[];
}

/**
 * Normalises GGUF metadata. Mistral files say `llama` (same graph), so they come back as
 * arch 'llama'. `tensors`, when given, settles what the metadata may leave out: the vocabulary
 * size (rows of token_embd), tied embeddings (no output.weight) and q/k/v biases.
 */
export function configFromGGUF(metadata: Map<string, unknown>, tensors?: readonly GGUFTensorShape[]): ModelConfig {
  const archKey = 'general.architecture';
  const rawArch = metadata.get(archKey);
  if (rawArch === undefined) throw new ModelError('missing_field', `GGUF metadata has no ${archKey}`, archKey);
  if (rawArch !== 'llama' && rawArch !== 'qwen2' && rawArch !== 'qwen3')
    throw new ModelError(
      'unsupported_arch',
      `GGUF ${archKey} "${String(rawArch)}" is not supported (supported: llama (also Mistral), qwen2, qwen3)`,
      archKey,
    );
  const arch: Arch = rawArch;
  const byName = new Map((tensors ?? []).map((t) => [t.name, t]));

  const get = (key: string, fallback?: number): number => {
    const full = `${arch}.${key}`;
    const raw = metadata.get(full);
    if (raw === undefined) {
      if (fallback !== undefined) return fallback;
      throw new ModelError('missing_field', `GGUF metadata has no ${full}`, full);
    }
    const v = toNumber(raw);
    if (v === undefined || !(v > 0)) throw new ModelError('invalid_field', `GGUF ${full} must be a positive number, got ${String(raw)}`, full);
    return v;
  };

  const hiddenSize = get('embedding_length');
  const numHeads = get('attention.head_count');
  const numKvHeads = get('attention.head_count_kv', numHeads);
  const headDim = get('attention.key_length', hiddenSize / numHeads);
  const tokens = metadata.get('tokenizer.ggml.tokens');
  const embd = byName.get('token_embd.weight');
  const vocabFallback = embd?.shape[0] ?? (Array.isArray(tokens) ? tokens.length : undefined);

  let ropeScaling: RopeScaling = null;
  const scalingType = metadata.get(`${arch}.rope.scaling.type`);
  if (scalingType === 'linear') ropeScaling = { type: 'linear', factor: get('rope.scaling.factor') };
  // Llama 3 scaling has no metadata type: the converter stores rope_freqs.weight instead,
  // which openModel() hands to the reference as ropeFreqFactors.
  else if (scalingType !== undefined && scalingType !== 'none')
    throw new ModelError('invalid_field', `GGUF ${arch}.rope.scaling.type "${String(scalingType)}" is not supported (supported: none, linear)`, `${arch}.rope.scaling.type`);

  const numLayers = get('block_count');
  // `{arch}.attention.sliding_window`: absent or 0 means full attention.
  const windowKey = `${arch}.attention.sliding_window`;
  const rawWindow = metadata.get(windowKey);
  let window: number | undefined;
  if (rawWindow !== undefined) {
    const v = toNumber(rawWindow);
    if (v === undefined || !Number.isInteger(v) || v < 0)
      throw new ModelError('invalid_field', `GGUF ${windowKey} must be a non-negative integer, got ${String(rawWindow)}`, windowKey);
    if (v > 0) window = v;
  }

  const bos = toNumber(metadata.get('tokenizer.ggml.bos_token_id'));
  // llama.cpp stops on any end-of-generation token: eos, end-of-turn and end-of-message.
  const eos = ['eos', 'eot', 'eom']
    .map((k) => toNumber(metadata.get(`tokenizer.ggml.${k}_token_id`)))
    .filter((v): v is number => v !== undefined);

  return {
    arch,
    vocabSize: get('vocab_size', vocabFallback),
    hiddenSize,
    intermediateSize: get('feed_forward_length'),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: get('attention.layer_norm_rms_epsilon'),
    ropeTheta: get('rope.freq_base', 10000),
    ropeScaling,
    // llama.cpp permutes llama q/k rows so that rotated pairs are adjacent; qwen files keep HF order.
    ropeStyle: arch === 'llama' ? 'interleaved' : 'neox',
    maxPositionEmbeddings: get('context_length', 2048),
    tieWordEmbeddings: tensors ? !byName.has('output.weight') : false,
    attentionBias: tensors ? byName.has('blk.0.attn_q.bias') : arch === 'qwen2',
    qkNorm: arch === 'qwen3',
    // GGUF states one window and no layer pattern for these archs: it holds on every layer.
    slidingWindow: window === undefined ? null : { size: window, layers: Array.from({ length: numLayers }, (_, i) => i) },
    bosTokenId: bos ?? null,
    eosTokenIds: unique(eos),
  };
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// GGUF integers may come back as bigint (u64/i64).
function toNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  return undefined;
}

function tokenIds(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number');
  return [];
}

function unique(ids: number[]): number[] {
  return [...new Set(ids)];
}
