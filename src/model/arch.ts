/**
 * The architecture table: what a model family is to each reader (./config-hf.ts,
 * ./config-gguf.ts), one row per architecture we run. The types a config is made of are in
 * ./config.ts.
 */

/** RoPE's pairs: (i, i + headDim/2) ('neox'), or (2i, 2i+1) ('interleaved'; ModelConfig.ropeStyle). */
export type RopeStyle = 'neox' | 'interleaved';
/** q/k norms per head or over the whole projection (ModelConfig.qkNormScope). */
export type QkNormScope = 'head' | 'full';
/** Where a block's RMSNorms sit (ModelConfig.normPlacement). */
export type NormPlacement = 'pre' | 'post' | 'sandwich';
/** The gated MLP's activation (ModelConfig.ffnActivation). */
export type FfnActivation = 'silu' | 'gelu_tanh';

/**
 * What a model family is to each reader: one row per architecture we run. The forward pass never
 * looks at `arch`; it reads the flags a row turns into `ModelConfig` (`attentionBias`, `qkNorm`, `qkNormScope`,
 * `normPlacement`, `noRopeLayers`, `ropeStyle`, `slidingWindow`). A family whose graph these flags describe is one new row here;
 * the test fixtures then need its `CHECKPOINTS` row (the compiler asks) and a tokenizer flavour
 * (src/testing/fixtures/). New math also needs its flag, its tensors' rows (tensors.ts) and kernels.
 */
export interface ArchInfo {
  /** transformers' class, as config.json's `architectures` names it (read when `model_type` is absent). */
  hfClass: string;
  /** config.json's `model_type` when it is not the row's key (Gemma 3's text model: `gemma3_text`). */
  hfModelType?: string;
  /**
   * The family's multimodal checkpoints, whose config.json nests the text model's in `text_config`
   * (and whose tensors sit under `language_model.`; tensors.ts's canonicalName strips that and
   * skips the vision tower's): their `model_type` and class, and the text config class's defaults
   * for the keys such a nested config leaves out. The text model then reads as the row's own.
   */
  hfMultimodal?: {
    modelType: string;
    hfClass: string;
    textDefaults: Readonly<Record<string, unknown>>;
    /** Later classes of the same checkpoint layout and text config (SmolVLM2's `smolvlm` beside Idefics3's). */
    also?: ReadonlyArray<{ modelType: string; hfClass: string }>;
  };
  /**
   * A hybrid family's config.json that describes this row's graph: Granite 4.0's dense checkpoints
   * (micro, 350M) say `granitemoehybrid`, whose layers may be Mamba-2 or attention and whose MLP
   * may add routed experts. With attention on every layer (`layer_types`), no routed experts
   * (`num_local_experts` 0) and RoPE (`position_embedding_type` "rope") it is this row (llama.cpp's
   * converter writes such a model as `granite`), its MLP stored as the shared one (`shared_mlp.*`,
   * `shared_intermediate_size` wide; tensors.ts reads those names). Anything else is refused,
   * naming the key.
   */
  hfHybrid?: { modelType: string; hfClass: string };
  /** Defaults of that transformers config class for keys a config.json may leave out. */
  hfDefaults: {
    maxPositionEmbeddings: number;
    rmsNormEps: number;
    /** When config.json leaves it out (default false). */
    tieWordEmbeddings?: boolean;
    /** When config.json (or its rope_parameters) leaves it out (default 1: the whole head rotates). */
    partialRotaryFactor?: number;
  };
  /**
   * How config.json asks for sliding-window attention (transformers' own reading):
   * - null: never (LlamaConfig has no window);
   * - 'sliding_window': `sliding_window` on every layer; absent means 4096, null turns it off (Mistral);
   * - 'use_sliding_window': only when `use_sliding_window` is true (default false); then
   *   `sliding_window` (default 4096) on layers i >= `max_window_layers` (default 28) (Qwen2/Qwen3).
   * - 'pattern': `sliding_window` (default 4096) on the layers `swaPattern` picks (Gemma 2).
   * Either non-null style takes an explicit `layer_types` list instead when there is one.
   */
  hfSlidingWindow: null | 'sliding_window' | 'use_sliding_window' | 'pattern';
  /** `general.architecture` of this family's GGUF files. Families sharing one read back as the first such row. */
  gguf: string;
  /**
   * `general.architecture` of this family's bidirectional (embedding) GGUFs, read with their own
   * key prefix as ModelConfig.bidirectional: llama.cpp's `gemma-embedding` (EmbeddingGemma).
   */
  ggufBidirectional?: string;
  /**
   * `general.architecture` of this family's hybrid GGUFs, read with their own key prefix: llama.cpp's
   * `granitehybrid` (Granite 4.0-H): per-layer `attention.head_count_kv` (0 on a Mamba-2 layer),
   * `ssm.*` sizes, ssm_a stored as −exp(A_log), and `rope.scaling.finetuned` false for NoPE attention.
   */
  ggufHybrid?: string;
  /**
   * What `{arch}.attention.sliding_window` means in this family's GGUF files: 'every_layer' (the
   * window on every layer), 'refused' where it asks for a layer pattern we do not run (OLMo 3
   * is written as olmo2 with windows on 3 layers of 4), or 'ignored' where llama.cpp ignores it
   * (Phi-3: the converter writes config.json's window, llama.cpp turns it off).
   */
  ggufSlidingWindow: 'every_layer' | 'pattern' | 'refused' | 'ignored';
  /**
   * Sliding-window layer pattern of 'pattern' families (llama.cpp's `set_swa_pattern(n)`,
   * transformers' older `is_sliding`): layer l is windowed when l % n < n - 1, so n = 2 windows
   * the even layers (Gemma 2). null: no pattern.
   */
  swaPattern: number | null;
  /** RoPE pairs in GGUF files: llama.cpp's converter permutes `llama` q/k rows into interleaved pairs. */
  ggufRopeStyle: RopeStyle;
  /** q/k/v biases: 'always' (Qwen2), or as config.json's `attention_bias` says (GGUF: as the tensors say). */
  attentionBias: 'always' | 'attention_bias';
  /** RMSNorm of q and k before RoPE. */
  qkNorm: boolean;
  /** Over what the q/k norm runs: each head (Qwen3) or the whole projection (OLMo 2). */
  qkNormScope: QkNormScope;
  /** Where each block's RMSNorm sits: on its input (Llama) or on its output (OLMo 2). */
  normPlacement: NormPlacement;
  /**
   * Gemma's RMSNorm scales by (1 + w): checkpoints store w, llama.cpp's converter stores w + 1
   * (so GGUF files need nothing added). false: the plain w.
   */
  normOnePlus: boolean;
  /** Token embeddings multiplied by sqrt(hidden_size) (Gemma). */
  embeddingSqrtScale: boolean;
  /** The gate's activation in the gated MLP. */
  ffnActivation: FfnActivation;
  /**
   * Attention and final logit soft-capping as config.json (`attn_logit_softcapping`,
   * `final_logit_softcapping`) and GGUF (`{arch}.attn_logit_softcapping`,
   * `{arch}.final_logit_softcapping`) state them (Gemma 2). false: never read.
   */
  logitSoftcaps: boolean;
  /**
   * Gemma's query scale: config.json's `query_pre_attn_scalar` s gives 1/sqrt(s); GGUF has no
   * key, and llama.cpp takes 1/sqrt(head_dim) except on the 27B model, recognised by this many
   * layers, which takes 1/sqrt(hidden_size / num_heads). null: 1/sqrt(head_dim) everywhere.
   */
  queryPreAttnScalar: { ggufWideLayers: number } | null;
  /**
   * Gemma 3: sliding-window layers rotate with their own RoPE base and no scaling; this base
   * when config.json states no `rope_local_base_freq`, and llama.cpp's fixed one (no GGUF key).
   * null: every layer rotates alike.
   */
  ropeLocalBase: number | null;
  /**
   * NoPE layers (SmolLM3): layer l skips RoPE when (l + 1) % step == 0. llama.cpp hard-codes the
   * step (no GGUF key); config.json lists the layers in `no_rope_layers` (1: RoPE, 0: NoPE) or
   * states `no_rope_layer_interval`, this step being transformers' default. null: RoPE everywhere.
   */
  noRopeLayerStep: number | null;
  /**
   * Granite's four scalars: embeddings times `embedding_multiplier`, each block's output times
   * `residual_multiplier` before the residual add, q·k times `attention_multiplier` (instead of
   * 1/sqrt(head_dim)), logits divided by `logits_scaling` (GraniteConfig's defaults: 1 each);
   * GGUF `{arch}.embedding_scale`, `residual_scale`, `attention.scale`, `logit_scale`. false: never read.
   */
  multipliers: boolean;
  /**
   * Checkpoints fuse q/k/v into one matrix (HF `qkv_proj`, GGUF `attn_qkv`) and gate/up into
   * another (HF `gate_up_proj`, GGUF `ffn_up` of twice the rows): the loader splits them by rows
   * into the per-projection tensors every family has (tensors.ts's FUSED_LAYER_TENSORS; Phi-3).
   */
  fusedProjections: boolean;
  /**
   * LFM2's gated short convolutions on the layers that do not attend (the `shortconv` mixer):
   * config.json's `layer_types` ("conv" / "full_attention"; older configs `full_attn_idxs`) and
   * `conv_L_cache`, GGUF's per-layer `attention.head_count_kv` array (0 on a conv layer) and
   * `shortconv.l_cache`. Such a family's config.json derives the FFN width (`block_auto_adjust_ff_dim`,
   * `block_ffn_dim_multiplier`, `block_multiple_of`), names its eps `norm_eps` and its tying
   * `tie_embedding`. false: attention on every layer.
   */
  shortConv: boolean;
  /**
   * Qwen3.5's gated DeltaNet on the layers that do not attend (the `deltanet` mixer,
   * DeltaNetConfig), and gated attention on those that do (ModelConfig.attnOutputGate):
   * config.json's `layer_types` ("linear_attention" / "full_attention"; else every
   * `full_attention_interval`-th layer attends) and `linear_*` sizes; GGUF's
   * `full_attention_interval` and `ssm.*` keys, its value heads in llama.cpp's tiled order and the
   * decay stored as −exp(A_log). false: attention on every layer, ungated.
   */
  gatedDeltaNet: boolean;
  /**
   * The family's checkpoints may ship a multi-token-prediction layer after the trunk (Qwen3.5's
   * `mtp.*`: ModelConfig.mtpLayers): config.json's `mtp_num_hidden_layers`, GGUF's
   * `nextn_predict_layers` (its block_count counts them). Absent: never read.
   */
  mtp?: true;
  /**
   * The family's own Hugging Face tensor names where they differ from the table's (tensors.ts's
   * `hf`, the part after `model.layers.N.` for a layer's): standard name -> the family's.
   */
  hfTensorNames?: Readonly<Record<string, string>>;
  /**
   * The family's own GGUF tensor names where they differ from the canonical ones: canonical -> the
   * family's (a layer's without its `blk.N.`, as tensors.ts's ggufFileName places them).
   */
  ggufTensorNames?: Readonly<Record<string, string>>;
  /**
   * Mixture-of-experts FFN (every layer): a router picks `expert_used_count` of `expert_count`
   * SwiGLU experts per token by softmax over all experts, then top-k. null: the dense FFN.
   * - `sharedExpert`: a shared SwiGLU expert added to the routed sum, scaled by
   *   sigmoid(x · ffn_gate_inp_shexp) (Qwen2-MoE: config.json's `shared_expert_intermediate_size`,
   *   GGUF `{arch}.expert_shared_feed_forward_length`).
   * - `hfExpertSize`: config.json's key for one expert's intermediate size (OLMoE's experts use
   *   `intermediate_size`; Qwen's `moe_intermediate_size`). GGUF: `{arch}.expert_feed_forward_length`,
   *   else `feed_forward_length` (OLMoE's converter writes only that).
   * - `normTopkProb`: whether the k weights are renormalised to sum 1: config.json's
   *   `norm_topk_prob` (this is transformers' default when it is absent); GGUF has no key, so
   *   `ggufNormTopkProb` is llama.cpp's fixed choice per architecture.
   * - `hfDenseLayers`: config.json may make layers dense (the dense MLP, `intermediate_size` wide):
   *   `mlp_only_layers` and `decoder_sparse_step` (Qwen-MoE's config classes; OLMoE's has neither).
   *   GGUF files state leading dense layers as `{arch}.leading_dense_block_count` in every family.
   */
  moe: null | {
    sharedExpert: boolean;
    hfExpertSize: 'moe_intermediate_size' | 'intermediate_size';
    hfNormTopkProb: boolean;
    ggufNormTopkProb: boolean;
    hfDenseLayers: boolean;
  };
}

/** Llama's math where Gemma differs: plain norm weights, unscaled embeddings, SwiGLU, no caps. */
const LLAMA_MATH = {
  ropeLocalBase: null,
  normOnePlus: false,
  embeddingSqrtScale: false,
  ffnActivation: 'silu',
  logitSoftcaps: false,
  queryPreAttnScalar: null,
  multipliers: false,
  fusedProjections: false,
  shortConv: false,
  gatedDeltaNet: false,
} as const;

/**
 * Qwen3's attention, which its MoE sibling, LFM2's attention layers and Qwen3.5's gated ones share:
 * per-head q/k norms, NEOX RoPE, pre-norm blocks, no window unless the config states one.
 */
const QWEN3_ATTENTION = {
  ggufSlidingWindow: 'every_layer',
  swaPattern: null,
  ggufRopeStyle: 'neox',
  attentionBias: 'attention_bias',
  qkNorm: true,
  qkNormScope: 'head',
  normPlacement: 'pre',
  noRopeLayerStep: null,
} as const;

/** The dense families' FFN: one SwiGLU/GeGLU MLP per layer. */
const DENSE = { moe: null } as const;

/**
 * Gemma's graph (2 and 3): sandwich norms by (1 + w), sqrt(hidden)-scaled embeddings, GeGLU, the
 * soft-caps its config states, windows on a layer pattern, NEOX RoPE in GGUF too.
 */
const GEMMA = {
  hfSlidingWindow: 'pattern',
  ggufSlidingWindow: 'pattern',
  ggufRopeStyle: 'neox',
  attentionBias: 'attention_bias',
  qkNormScope: 'head',
  normPlacement: 'sandwich',
  noRopeLayerStep: null,
  normOnePlus: true,
  embeddingSqrtScale: true,
  ffnActivation: 'gelu_tanh',
  logitSoftcaps: true,
  multipliers: false,
  fusedProjections: false,
  shortConv: false,
  gatedDeltaNet: false,
  ...DENSE,
} as const;

const ARCH_ROWS = {
  llama: {
    hfClass: 'LlamaForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 2048, rmsNormEps: 1e-6 },
    // Idefics3ForConditionalGeneration (SmolVLM, Idefics3) and SmolVLMForConditionalGeneration (SmolVLM2): a Llama text model under
    // `model.text_model.`; its text_config over transformers' LlamaConfig defaults (Idefics3Config
    // sets rms_norm_eps 1e-5). The vision tower is read apart (model/vision-open.ts).
    hfMultimodal: {
      modelType: 'idefics3',
      hfClass: 'Idefics3ForConditionalGeneration',
      // SmolVLM2 (transformers' SmolVLMConfig): the same text_config reading, tensors and tower.
      also: [{ modelType: 'smolvlm', hfClass: 'SmolVLMForConditionalGeneration' }],
      textDefaults: {
        vocab_size: 32000,
        hidden_size: 4096,
        intermediate_size: 11008,
        num_hidden_layers: 32,
        num_attention_heads: 32,
        max_position_embeddings: 2048,
        rms_norm_eps: 1e-5,
        rope_theta: 10000.0,
        tie_word_embeddings: false,
        hidden_act: 'silu',
      },
    },
    hfSlidingWindow: null,
    gguf: 'llama',
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'interleaved',
    attentionBias: 'attention_bias',
    qkNorm: false,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    ...DENSE,
  },
  qwen2: {
    hfClass: 'Qwen2ForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6 },
    hfSlidingWindow: 'use_sliding_window',
    gguf: 'qwen2',
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'neox',
    attentionBias: 'always',
    qkNorm: false,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    ...DENSE,
  },
  qwen3: {
    hfClass: 'Qwen3ForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6 },
    hfSlidingWindow: 'use_sliding_window',
    gguf: 'qwen3',
    ...QWEN3_ATTENTION,
    ...LLAMA_MATH,
    ...DENSE,
  },
  // Llama's graph with its own config defaults; llama.cpp writes its GGUF files as `llama`.
  mistral: {
    hfClass: 'MistralForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 4096 * 32, rmsNormEps: 1e-6 },
    hfSlidingWindow: 'sliding_window',
    gguf: 'llama',
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'interleaved',
    attentionBias: 'attention_bias',
    qkNorm: false,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    ...DENSE,
  },
  // Llama with NoPE layers: every 4th layer attends without RoPE.
  smollm3: {
    hfClass: 'SmolLM3ForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6 },
    hfSlidingWindow: 'use_sliding_window',
    gguf: 'smollm3',
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'interleaved',
    attentionBias: 'attention_bias',
    qkNorm: false,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: 4,
    ...LLAMA_MATH,
    ...DENSE,
  },
  // Norms on each block's output instead of its input, and q/k norms over the whole projection.
  olmo2: {
    hfClass: 'Olmo2ForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 2048, rmsNormEps: 1e-5 },
    hfSlidingWindow: null,
    gguf: 'olmo2',
    ggufSlidingWindow: 'refused',
    swaPattern: null,
    ggufRopeStyle: 'neox',
    attentionBias: 'attention_bias',
    qkNorm: true,
    qkNormScope: 'full',
    normPlacement: 'post',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    ...DENSE,
  },
  // Sandwich norms, (1 + w) norm weights, sqrt(hidden)-scaled embeddings, GeGLU, attention and
  // final logit soft-caps, its own query scale, a window on every other layer; tied.
  gemma2: {
    ...GEMMA,
    hfClass: 'Gemma2ForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 8192, rmsNormEps: 1e-6, tieWordEmbeddings: true },
    gguf: 'gemma2',
    swaPattern: 2,
    qkNorm: false,
    queryPreAttnScalar: { ggufWideLayers: 46 },
    ropeLocalBase: null,
  },
  // Gemma 2 without the attention soft-cap, with per-head q/k norms (1 + w too), windows on 5
  // layers of 6 and those layers' own RoPE base (10000; the global layers' rope_theta and scaling).
  gemma3: {
    ...GEMMA,
    hfClass: 'Gemma3ForCausalLM',
    hfModelType: 'gemma3_text',
    hfDefaults: { maxPositionEmbeddings: 131072, rmsNormEps: 1e-6, tieWordEmbeddings: true },
    // Gemma3ForConditionalGeneration (4B and up): transformers' Gemma3TextConfig defaults, which
    // google/gemma-3-4b-it's text_config relies on (it states little beyond sizes and its window).
    hfMultimodal: {
      modelType: 'gemma3',
      hfClass: 'Gemma3ForConditionalGeneration',
      textDefaults: {
        vocab_size: 262208,
        hidden_size: 2304,
        intermediate_size: 9216,
        num_hidden_layers: 26,
        num_attention_heads: 8,
        num_key_value_heads: 4,
        head_dim: 256,
        query_pre_attn_scalar: 256,
        rope_theta: 1000000,
        rope_local_base_freq: 10000,
        sliding_window: 4096,
        sliding_window_pattern: 6,
      },
    },
    gguf: 'gemma3',
    ggufBidirectional: 'gemma-embedding',
    swaPattern: 6,
    qkNorm: true,
    queryPreAttnScalar: { ggufWideLayers: 62 },
    ropeLocalBase: 10000,
  },
  // Llama with four scalar multipliers (embeddings, residual branches, attention, logits);
  // llama.cpp's converter permutes q/k as for llama. Granite 4.0's dense models convert to it too,
  // and their HF folders (granitemoehybrid with attention only) read as it.
  granite: {
    hfClass: 'GraniteForCausalLM',
    hfHybrid: { modelType: 'granitemoehybrid', hfClass: 'GraniteMoeHybridForCausalLM' },
    hfDefaults: { maxPositionEmbeddings: 2048, rmsNormEps: 1e-6 },
    hfSlidingWindow: null,
    gguf: 'granite',
    ggufHybrid: 'granitehybrid',
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'interleaved',
    attentionBias: 'attention_bias',
    qkNorm: false,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    multipliers: true,
    ...DENSE,
  },
  // Qwen2's attention (q/k/v biases) with routed experts plus a shared expert behind a sigmoid
  // gate; the k weights are not renormalised (transformers' norm_topk_prob default false;
  // llama.cpp's qwen2moe graph never does).
  qwen2moe: {
    hfClass: 'Qwen2MoeForCausalLM',
    hfModelType: 'qwen2_moe',
    hfDefaults: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6 },
    hfSlidingWindow: 'use_sliding_window',
    gguf: 'qwen2moe',
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'neox',
    attentionBias: 'always',
    qkNorm: false,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    moe: { sharedExpert: true, hfExpertSize: 'moe_intermediate_size', hfNormTopkProb: false, ggufNormTopkProb: false, hfDenseLayers: true },
  },
  // Qwen3's attention (per-head q/k norms) with routed experts, renormalised top-k (Qwen3-30B-A3B's
  // config.json says norm_topk_prob true; llama.cpp's qwen3moe graph always renormalises).
  qwen3moe: {
    hfClass: 'Qwen3MoeForCausalLM',
    hfModelType: 'qwen3_moe',
    hfDefaults: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6 },
    hfSlidingWindow: 'use_sliding_window',
    gguf: 'qwen3moe',
    ...QWEN3_ATTENTION,
    ...LLAMA_MATH,
    moe: { sharedExpert: false, hfExpertSize: 'moe_intermediate_size', hfNormTopkProb: false, ggufNormTopkProb: true, hfDenseLayers: true },
  },
  // OLMoE: pre-norm blocks with q/k norms over the whole projection, routed experts of
  // `intermediate_size`, no renormalisation (transformers' default; llama.cpp's olmoe graph).
  olmoe: {
    hfClass: 'OlmoeForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 4096, rmsNormEps: 1e-5 },
    hfSlidingWindow: null,
    gguf: 'olmoe',
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'neox',
    attentionBias: 'attention_bias',
    qkNorm: true,
    qkNormScope: 'full',
    normPlacement: 'pre',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    moe: { sharedExpert: false, hfExpertSize: 'intermediate_size', hfNormTopkProb: false, ggufNormTopkProb: false, hfDenseLayers: false },
  },
  // Phi-3/3.5/4-mini: Llama's graph from fused q/k/v and gate/up matrices, LongRoPE (config.json's
  // rope_scaling; GGUF's rope_factors_long/short tensors) and, on Phi-4-mini, partial rotary.
  // config.json's sliding_window is not read: Phi-3.5/4-mini's (262144) exceed their context, and
  // llama.cpp turns Phi-3's off, so both formats attend alike.
  phi3: {
    hfClass: 'Phi3ForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 4096, rmsNormEps: 1e-5 },
    hfSlidingWindow: null,
    gguf: 'phi3',
    ggufSlidingWindow: 'ignored',
    swaPattern: null,
    ggufRopeStyle: 'neox',
    attentionBias: 'attention_bias',
    qkNorm: false,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
    ...LLAMA_MATH,
    fusedProjections: true,
    ...DENSE,
  },
  // LFM2 / LFM2.5 (Liquid): most layers a gated short convolution, y = out_proj(C ⊙ conv(B ⊙ x))
  // over in_proj's rows B, C, x, the others GQA attention with per-head q/k norms and NEOX RoPE
  // (HF's rotate_half; llama.cpp's converter does not permute LFM2's q/k); every norm the plain w;
  // the final norm is `model.embedding_norm` (HF) and `token_embd_norm` (GGUF); tied.
  lfm2: {
    hfClass: 'Lfm2ForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 128000, rmsNormEps: 1e-5, tieWordEmbeddings: true },
    hfSlidingWindow: null,
    gguf: 'lfm2',
    ...QWEN3_ATTENTION,
    ...LLAMA_MATH,
    shortConv: true,
    hfTensorNames: {
      'input_layernorm.weight': 'operator_norm.weight',
      'post_attention_layernorm.weight': 'ffn_norm.weight',
      'self_attn.o_proj.weight': 'self_attn.out_proj.weight',
      'self_attn.q_norm.weight': 'self_attn.q_layernorm.weight',
      'self_attn.k_norm.weight': 'self_attn.k_layernorm.weight',
      'mlp.gate_proj.weight': 'feed_forward.w1.weight',
      'mlp.up_proj.weight': 'feed_forward.w3.weight',
      'mlp.down_proj.weight': 'feed_forward.w2.weight',
      'model.norm.weight': 'model.embedding_norm.weight',
    },
    ggufTensorNames: { 'output_norm.weight': 'token_embd_norm.weight' },
    ...DENSE,
  },
  // Qwen3.5 (dense text): three gated DeltaNet layers to one gated-attention layer (q_proj's rows
  // [query | gate] per head, output times sigmoid(gate)), per-head q/k norms, partial rotary 0.25
  // (NEOX; the mRoPE sections coincide for text), heads × head_dim ≠ hidden; every RMSNorm (1 + w)
  // in HF, stored w + 1 by llama.cpp's converter, but the DeltaNet's output norm (the plain w in
  // both). The pre-FFN norm is GGUF's attn_post_norm. Qwen3_5ForConditionalGeneration folders hold
  // the text model under `model.language_model.` (the vision tower is skipped).
  qwen35: {
    hfClass: 'Qwen3_5ForCausalLM',
    hfModelType: 'qwen3_5_text',
    // Qwen3_5TextConfig's defaults (Qwen3NextConfig's, sizes of the 9B) for what a text_config leaves out.
    hfMultimodal: {
      modelType: 'qwen3_5',
      hfClass: 'Qwen3_5ForConditionalGeneration',
      textDefaults: {
        vocab_size: 248320,
        hidden_size: 4096,
        intermediate_size: 12288,
        num_hidden_layers: 32,
        num_attention_heads: 16,
        num_key_value_heads: 4,
        head_dim: 256,
        rms_norm_eps: 1e-6,
        max_position_embeddings: 32768,
        tie_word_embeddings: false,
        partial_rotary_factor: 0.25,
        linear_conv_kernel_dim: 4,
        linear_key_head_dim: 128,
        linear_value_head_dim: 128,
        linear_num_key_heads: 16,
        linear_num_value_heads: 32,
      },
    },
    hfDefaults: { maxPositionEmbeddings: 32768, rmsNormEps: 1e-6, partialRotaryFactor: 0.25 },
    hfSlidingWindow: null,
    gguf: 'qwen35',
    ...QWEN3_ATTENTION,
    ...LLAMA_MATH,
    normOnePlus: true,
    gatedDeltaNet: true,
    mtp: true,
    ggufTensorNames: { 'ffn_norm.weight': 'attn_post_norm.weight' },
    ...DENSE,
  },
} satisfies Record<string, ArchInfo>;

/** The architectures we run: the table's rows. */
export type Arch = keyof typeof ARCH_ROWS;
export const ARCH: Readonly<Record<Arch, ArchInfo>> = ARCH_ROWS;
export const ARCHES = Object.keys(ARCH_ROWS) as readonly Arch[];
