/**
 * The GGUF reader: a file's metadata (and its tensors' shapes) into a ModelConfig, each family as
 * its row of the architecture table (./arch.ts) says.
 */
import { ARCH, ARCHES, type ArchInfo } from './arch';
import { everyNth, mtpLayerCount, patternLayers, unique, type DeltaNetConfig, type Mamba2Config, type ModelConfig, type MoeConfig, type RopeScaling } from './config';
import { denseFromGGUF, embeddingFromGGUF, type EmbeddingConfig } from './embedding';
import { ModelError } from './errors';
import { yarnMscale } from './rope';

/** What configFromGGUF needs to know of the file's tensors (names and shapes, outermost first). */
export interface GGUFTensorShape {
  name: string;
  shape: readonly number[];
}

/**
 * Normalises GGUF metadata. A `general.architecture` that several families share reads back as
 * the first (Mistral files say `llama`, the same graph, so they come back as arch 'llama').
 * `tensors`, when given, settles what the metadata may leave out: the vocabulary size (rows of
 * token_embd), tied embeddings (no output.weight) and q/k/v biases.
 */
export function configFromGGUF(metadata: Map<string, unknown>, tensors?: readonly GGUFTensorShape[]): ModelConfig {
  const archKey = 'general.architecture';
  const rawArch = metadata.get(archKey);
  if (rawArch === undefined) throw new ModelError('missing_field', `GGUF metadata has no ${archKey}`, archKey);
  const family = ARCHES.find((a) => ARCH[a].gguf === rawArch || ARCH[a].ggufBidirectional === rawArch || ARCH[a].ggufHybrid === rawArch);
  if (!family) throw new ModelError('unsupported_arch', `GGUF ${archKey} "${String(rawArch)}" is not supported (supported: ${ggufSupported()})`, archKey);
  const row = ARCH[family];
  // Metadata keys are named `{general.architecture}.…` (EmbeddingGemma's: `gemma-embedding.…`).
  const bidirectional = rawArch === row.ggufBidirectional;
  const hybrid = rawArch === row.ggufHybrid;
  const prefix = bidirectional ? row.ggufBidirectional! : hybrid ? row.ggufHybrid! : row.gguf;
  const byName = new Map((tensors ?? []).map((t) => [t.name, t]));
  // Granite 4.0-H Tiny / Small route experts: refused by name until the hybrid MoE runs.
  const expertsKey = `${prefix}.expert_count`;
  if (hybrid && (toNumber(metadata.get(expertsKey)) ?? 0) > 0)
    throw new ModelError('unsupported_arch', `GGUF ${String(rawArch)} with routed experts (${expertsKey} ${String(metadata.get(expertsKey))}) is not supported; only its dense form runs`, expertsKey);

  const get = (key: string, fallback?: number): number => {
    const full = `${prefix}.${key}`;
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
  // An embedding model (llama.cpp's converter writes the pooling of sentence-transformers' files).
  const embedding = embeddingFromGGUF(metadata, prefix);
  const numHeads = get('attention.head_count');
  // block_count counts the multi-token-prediction layers after the trunk (llama.cpp's nextn).
  const nextnKey = `${prefix}.nextn_predict_layers`;
  const mtpLayers = row.mtp ? mtpLayerCount(toNumber(metadata.get(nextnKey)) ?? metadata.get(nextnKey), `GGUF ${nextnKey}`, nextnKey) : 0;
  const numLayers = get('block_count') - mtpLayers;
  // LFM2 and Granite 4.0-H: head_count_kv is a per-layer array, 0 on the conv (Mamba-2) layers.
  const kvKey = `${prefix}.attention.head_count_kv`;
  const perLayerKv = (row.shortConv || hybrid) && metadata.has(kvKey) ? ggufPerLayerKv(metadata.get(kvKey), numLayers, kvKey) : null;
  const numKvHeads = perLayerKv?.numKvHeads ?? get('attention.head_count_kv', numHeads);
  const headDim = get('attention.key_length', hiddenSize / numHeads);
  const tokens = metadata.get('tokenizer.ggml.tokens');
  const embd = byName.get('token_embd.weight');
  const vocabFallback = embd?.shape[0] ?? (Array.isArray(tokens) ? tokens.length : undefined);

  const ropeScaling = ggufRopeScaling(metadata, prefix, get, byName, tensors !== undefined);
  // Partial rotary: llama.cpp's n_rot.
  const rotary = get('rope.dimension_count', headDim);
  if (rotary % 2 !== 0 || rotary > headDim)
    throw new ModelError('invalid_field', `GGUF ${prefix}.rope.dimension_count must be even and at most the head dimension (${headDim}), got ${rotary}`, `${prefix}.rope.dimension_count`);

  // `{arch}.attention.sliding_window`: absent or 0 means full attention.
  const windowKey = `${prefix}.attention.sliding_window`;
  const rawWindow = metadata.get(windowKey);
  let window: number | undefined;
  if (rawWindow !== undefined) {
    const v = toNumber(rawWindow);
    if (v === undefined || !Number.isInteger(v) || v < 0)
      throw new ModelError('invalid_field', `GGUF ${windowKey} must be a non-negative integer, got ${String(rawWindow)}`, windowKey);
    if (v > 0) window = v;
    if (window !== undefined && row.ggufSlidingWindow === 'refused')
      throw new ModelError('invalid_field', `GGUF ${windowKey} is not supported on ${prefix} files (a sliding-window layer pattern, as OLMo 3's)`, windowKey);
    // llama.cpp turns Phi-3's window off (its converter writes config.json's, unchecked).
    if (row.ggufSlidingWindow === 'ignored') window = undefined;
  }

  // Soft-caps: absent or 0 means none.
  const softcap = (key: string): number | null => {
    if (!row.logitSoftcaps || metadata.get(`${prefix}.${key}`) === undefined) return null;
    return get(key);
  };
  // Gemma's query scale: llama.cpp's rule (its 27B by layer count), no metadata key.
  const wide = row.queryPreAttnScalar !== null && numLayers === row.queryPreAttnScalar.ggufWideLayers;
  // Granite's multipliers: absent (or 0, llama.cpp's "unset") means 1, and for attention.scale 1/sqrt(d).
  const stated = (key: string): boolean => row.multipliers && metadata.get(`${prefix}.${key}`) !== undefined && toNumber(metadata.get(`${prefix}.${key}`)) !== 0;
  const multiplier = (key: string): number => (stated(key) ? get(key) : 1);

  const bos = toNumber(metadata.get('tokenizer.ggml.bos_token_id'));
  // llama.cpp stops on any end-of-generation token: eos, end-of-turn and end-of-message.
  const eos = ['eos', 'eot', 'eom']
    .map((k) => toNumber(metadata.get(`tokenizer.ggml.${k}_token_id`)))
    .filter((v): v is number => v !== undefined);

  return {
    arch: family,
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
    rotaryDim: rotary === headDim ? null : rotary,
    ropeStyle: row.ggufRopeStyle,
    maxPositionEmbeddings: get('context_length', 2048),
    tieWordEmbeddings: tensors ? !byName.has('output.weight') : false,
    attentionBias: tensors ? byName.has('blk.0.attn_q.bias') : row.attentionBias === 'always',
    qkNorm: row.qkNorm,
    qkNormScope: row.qkNormScope,
    normPlacement: row.normPlacement,
    // llama.cpp fixes the local layers' base (no key).
    ropeLocalTheta: row.ropeLocalBase,
    // llama.cpp's converter stored Gemma's norm weights as 1 + w already.
    normWeightOffset: 0,
    embeddingScale: row.embeddingSqrtScale ? Math.sqrt(hiddenSize) : multiplier('embedding_scale'),
    ffnActivation: row.ffnActivation,
    attentionScale: wide ? 1 / Math.sqrt(hiddenSize / numHeads) : stated('attention.scale') ? get('attention.scale') : null,
    residualScale: multiplier('residual_scale'),
    logitsScaling: multiplier('logit_scale'),
    attnLogitSoftcap: softcap('attn_logit_softcapping'),
    finalLogitSoftcap: softcap('final_logit_softcapping'),
    // GGUF states one window: on every layer, or on the family's fixed layer pattern.
    slidingWindow:
      window === undefined
        ? null
        : { size: window, layers: row.ggufSlidingWindow === 'pattern' ? patternLayers(row.swaPattern, numLayers) : Array.from({ length: numLayers }, (_, i) => i) },
    // No metadata key: llama.cpp fixes the step per architecture.
    // Granite 4.0-H: llama.cpp's converter writes rope.scaling.finetuned = (position_embedding_type == "rope").
    noRopeLayers: hybrid && metadata.get(`${prefix}.rope.scaling.finetuned`) !== true ? Array.from({ length: numLayers }, (_, l) => l) : everyNth(row.noRopeLayerStep, numLayers),
    // llama.cpp's keys; renormalisation is fixed per architecture (no key).
    moe: row.moe === null ? null : ggufMoe(row.moe, get, numLayers, prefix, metadata),
    shortConv: row.shortConv && perLayerKv?.convLayers.length ? { kernel: get('shortconv.l_cache'), layers: perLayerKv.convLayers } : null,
    deltaNet: row.gatedDeltaNet ? ggufDeltaNet(get, numLayers, prefix) : null,
    mamba2: hybrid && perLayerKv?.convLayers.length ? ggufMamba2(get, perLayerKv.convLayers, prefix) : null,
    attnOutputGate: row.gatedDeltaNet,
    ...(row.mtp ? { mtpLayers } : {}),
    bosTokenId: bos ?? null,
    eosTokenIds: unique(eos),
    ...(embedding ? { embedding: bidirectional ? withGGUFDense(embedding, tensors ?? [], hiddenSize) : embedding } : {}),
    ...(bidirectional ? { bidirectional: true } : {}),
  };
}

/** EmbeddingGemma's Dense modules from the file's `dense_<n>` tensors (the decoders' GGUFs have none). */
function withGGUFDense(embedding: EmbeddingConfig, tensors: readonly GGUFTensorShape[], hiddenSize: number): EmbeddingConfig {
  const dense = denseFromGGUF(new Map(tensors.map((t) => [t.name, { info: t }])), hiddenSize);
  return dense.length ? { ...embedding, dense } : embedding;
}

/**
 * The rope scaling as llama.cpp reads it: `{arch}.rope.scaling.type` (absent: none) and its keys.
 * - LongRoPE's factor lists travel as two tensors, which openModel() reads: llama.cpp's Phi-3
 *   converter writes them with the original context and attn_factor but no type, writers that go
 *   through its generic path add type "longrope"; the tensors decide, as in llama.cpp (absent
 *   attn_factor: its 1).
 * - Llama 3 scaling has no type: rope_freqs.weight, which openModel() hands on as ropeFreqFactors.
 * - YaRN: the converter's keys (factor, original_context_length, yarn_beta_fast/slow; its
 *   yarn_attn_factor is config.json's attention_factor). Unstated, the attention factor is
 *   mscale(factor), or mscale(factor) / mscale(factor, yarn_log_multiplier) (mscale_all_dim), as
 *   transformers and llama.cpp compute it; times attn_factor, llama.cpp's generic multiplier.
 *   llama.cpp itself ignores a stated yarn_attn_factor (it recomputes mscale); we keep the
 *   checkpoint's, as transformers runs it. Its ramp is always truncated (no key for gpt-oss's
 *   `truncate: false`), and an extrapolation factor other than 1 has no transformers counterpart.
 */
function ggufRopeScaling(
  metadata: Map<string, unknown>,
  prefix: string,
  get: (key: string, fallback?: number) => number,
  byName: ReadonlyMap<string, GGUFTensorShape>,
  tensorsKnown: boolean,
): RopeScaling {
  const typeKey = `${prefix}.rope.scaling.type`;
  const type = metadata.get(typeKey) ?? 'none';
  const factors = byName.has('rope_factors_long.weight') && byName.has('rope_factors_short.weight');
  const attnFactor = get('rope.scaling.attn_factor', 1);
  if (type === 'longrope' && tensorsKnown && !factors)
    throw new ModelError('missing_field', `GGUF ${typeKey} is "longrope" but the file has no rope_factors_long.weight and rope_factors_short.weight`, 'rope_factors_long.weight');
  if (type === 'longrope' || (factors && (type === 'none' || type === 'linear')))
    return { type: 'longrope', longFactor: [], shortFactor: [], originalMaxPositionEmbeddings: get('rope.scaling.original_context_length'), attentionFactor: attnFactor };
  if (type === 'none') return null;
  if (type === 'linear') return { type: 'linear', factor: get('rope.scaling.factor') };
  if (type === 'yarn') {
    const factor = get('rope.scaling.factor');
    if (get('rope.scaling.yarn_ext_factor', 1) !== 1)
      throw new ModelError('invalid_field', `GGUF ${prefix}.rope.scaling.yarn_ext_factor other than 1 is not supported`, `${prefix}.rope.scaling.yarn_ext_factor`);
    const logMul = toNumber(metadata.get(`${prefix}.rope.scaling.yarn_log_multiplier`)) ?? 0;
    const mscale = metadata.has(`${prefix}.rope.scaling.yarn_attn_factor`)
      ? get('rope.scaling.yarn_attn_factor')
      : logMul !== 0
        ? yarnMscale(factor) / yarnMscale(factor, logMul)
        : yarnMscale(factor);
    return {
      type: 'yarn',
      factor,
      originalMaxPositionEmbeddings: get('rope.scaling.original_context_length', get('context_length', 2048)),
      betaFast: get('rope.scaling.yarn_beta_fast', 32),
      betaSlow: get('rope.scaling.yarn_beta_slow', 1),
      attentionFactor: mscale * attnFactor,
      truncate: true,
    };
  }
  throw new ModelError('invalid_field', `GGUF ${typeKey} "${String(type)}" is not supported (supported: none, linear, yarn, longrope)`, typeKey);
}

/**
 * The experts as llama.cpp reads a MoE file's metadata (`{arch}.expert_*`), and its leading dense
 * layers (`{arch}.leading_dense_block_count`, absent: 0).
 */
function ggufMoe(moe: NonNullable<ArchInfo['moe']>, get: (key: string, fallback?: number) => number, numLayers: number, prefix: string, metadata: Map<string, unknown>): MoeConfig {
  const leadingKey = `${prefix}.leading_dense_block_count`;
  const rawLeading = metadata.get(leadingKey);
  const leading = rawLeading === undefined ? 0 : toNumber(rawLeading);
  if (leading === undefined || !Number.isInteger(leading) || leading < 0 || leading > numLayers)
    throw new ModelError('invalid_field', `GGUF ${leadingKey} must be an integer from 0 to the block count (${numLayers}), got ${String(rawLeading)}`, leadingKey);
  const numExperts = get('expert_count');
  const numExpertsUsed = get('expert_used_count');
  if (numExpertsUsed > numExperts)
    throw new ModelError('invalid_field', `GGUF expert_used_count (${numExpertsUsed}) must be at most expert_count (${numExperts})`, 'expert_used_count');
  return {
    numExperts,
    numExpertsUsed,
    // OLMoE files state only feed_forward_length, the experts' size.
    expertIntermediateSize: get('expert_feed_forward_length', get('feed_forward_length')),
    normTopkProb: moe.ggufNormTopkProb,
    sharedExpertIntermediateSize: moe.sharedExpert ? get('expert_shared_feed_forward_length') : null,
    denseLayers: Array.from({ length: leading }, (_, l) => l),
  };
}

/**
 * Qwen3.5's DeltaNet from llama.cpp's keys: every `full_attention_interval`-th layer (default 4)
 * attends, the others are linear; `ssm.conv_kernel` taps, `ssm.group_count` key heads of
 * `ssm.state_size`, `ssm.time_step_rank` value heads sharing `ssm.inner_size`. The converter
 * reorders the value heads (tiled over the key heads) and stores ssm_a = −exp(A_log).
 */
function ggufDeltaNet(get: (key: string, fallback?: number) => number, numLayers: number, prefix: string): DeltaNetConfig | null {
  const every = get('full_attention_interval', 4);
  const layers = Array.from({ length: numLayers }, (_, l) => l).filter((l) => (l + 1) % every !== 0);
  if (layers.length === 0) return null;
  const numKHeads = get('ssm.group_count');
  const numVHeads = get('ssm.time_step_rank');
  const inner = get('ssm.inner_size');
  if (numVHeads % numKHeads !== 0 || inner % numVHeads !== 0)
    throw new ModelError('invalid_field', `GGUF ${prefix}.ssm.group_count (${numKHeads}) must divide ssm.time_step_rank (${numVHeads}), which must divide ssm.inner_size (${inner})`, `${prefix}.ssm.time_step_rank`);
  return { layers, convKernel: get('ssm.conv_kernel'), numKHeads, numVHeads, headKDim: get('ssm.state_size'), headVDim: inner / numVHeads, vHeadOrder: 'tiled', aStored: 'neg' };
}

/**
 * LFM2's `attention.head_count_kv`: one count per layer, 0 where the layer convolves (llama.cpp's
 * converter); the attention layers' counts must agree. A single number: attention everywhere.
 */
/**
 * Granite 4.0-H's Mamba-2 sizes as llama.cpp's converter writes them: `ssm.conv_kernel`,
 * `ssm.time_step_rank` (the heads), `ssm.inner_size` (heads · head dim), `ssm.state_size`,
 * `ssm.group_count`; ssm_a holds −exp(A_log).
 */
function ggufMamba2(get: (key: string, fallback?: number) => number, layers: number[], prefix: string): Mamba2Config {
  const numHeads = get('ssm.time_step_rank');
  const inner = get('ssm.inner_size');
  const numGroups = get('ssm.group_count', 1);
  if (inner % numHeads !== 0 || numHeads % numGroups !== 0)
    throw new ModelError('invalid_field', `GGUF ${prefix}.ssm.time_step_rank (${numHeads}) must divide ssm.inner_size (${inner}), and ssm.group_count the heads`, `${prefix}.ssm.inner_size`);
  return { layers, convKernel: get('ssm.conv_kernel'), numHeads, headDim: inner / numHeads, stateSize: get('ssm.state_size'), numGroups, aStored: 'neg' };
}

function ggufPerLayerKv(raw: unknown, numLayers: number, key: string): { numKvHeads: number; convLayers: number[] } {
  const list = Array.isArray(raw) ? raw.map(toNumber) : [toNumber(raw)];
  const counts = list.length === 1 && !Array.isArray(raw) ? new Array<number | undefined>(numLayers).fill(list[0]) : list;
  const kv = [...new Set(counts.filter((n) => n !== 0))];
  if (counts.length !== numLayers || counts.some((n) => n === undefined || !Number.isInteger(n) || n < 0) || kv.length !== 1)
    throw new ModelError('invalid_field', `GGUF ${key} must give each of the ${numLayers} layers its KV head count (0 on a conv layer), the attention layers one count`, key);
  return { numKvHeads: kv[0]!, convLayers: counts.flatMap((n, l) => (n === 0 ? [l] : [])) };
}

/** "llama (also mistral), qwen2, qwen3": each GGUF name once, with the families that share it. */
function ggufSupported(): string {
  const names = [...new Set(ARCHES.map((a) => ARCH[a].gguf))];
  return names
    .map((g) => {
      const others = ARCHES.filter((a) => ARCH[a].gguf === g && a !== g);
      return others.length ? `${g} (also ${others.join(', ')})` : g;
    })
    .join(', ');
}

// GGUF integers may come back as bigint (u64/i64).
function toNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  return undefined;
}
