import { ModelError } from './errors';

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
  hfMultimodal?: { modelType: string; hfClass: string; textDefaults: Readonly<Record<string, unknown>> };
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
  hfDefaults: { maxPositionEmbeddings: number; rmsNormEps: number; /** When config.json leaves it out (default false). */ tieWordEmbeddings?: boolean };
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
  ggufRopeStyle: ModelConfig['ropeStyle'];
  /** q/k/v biases: 'always' (Qwen2), or as config.json's `attention_bias` says (GGUF: as the tensors say). */
  attentionBias: 'always' | 'attention_bias';
  /** RMSNorm of q and k before RoPE. */
  qkNorm: boolean;
  /** Over what the q/k norm runs: each head (Qwen3) or the whole projection (OLMo 2). */
  qkNormScope: ModelConfig['qkNormScope'];
  /** Where each block's RMSNorm sits: on its input (Llama) or on its output (OLMo 2). */
  normPlacement: ModelConfig['normPlacement'];
  /**
   * Gemma's RMSNorm scales by (1 + w): checkpoints store w, llama.cpp's converter stores w + 1
   * (so GGUF files need nothing added). false: the plain w.
   */
  normOnePlus: boolean;
  /** Token embeddings multiplied by sqrt(hidden_size) (Gemma). */
  embeddingSqrtScale: boolean;
  /** The gate's activation in the gated MLP. */
  ffnActivation: ModelConfig['ffnActivation'];
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
  ...DENSE,
} as const;

const ARCH_ROWS = {
  llama: {
    hfClass: 'LlamaForCausalLM',
    hfDefaults: { maxPositionEmbeddings: 2048, rmsNormEps: 1e-6 },
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
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'neox',
    attentionBias: 'attention_bias',
    qkNorm: true,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
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
    ggufSlidingWindow: 'every_layer',
    swaPattern: null,
    ggufRopeStyle: 'neox',
    attentionBias: 'attention_bias',
    qkNorm: true,
    qkNormScope: 'head',
    normPlacement: 'pre',
    noRopeLayerStep: null,
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
} satisfies Record<string, ArchInfo>;

/** The architectures we run: the table's rows. */
export type Arch = keyof typeof ARCH_ROWS;
export const ARCH: Readonly<Record<Arch, ArchInfo>> = ARCH_ROWS;
export const ARCHES = Object.keys(ARCH_ROWS) as readonly Arch[];

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
  | { /** Positions divided by factor. */ type: 'linear'; factor: number }
  | {
      /**
       * LongRoPE (Phi-3/4): each frequency divided by its own factor, the long set when the
       * context exceeds originalMaxPositionEmbeddings, else the short set (see model/rope.ts);
       * cos and sin multiplied by attentionFactor. rotaryDim/2 factors each.
       */
      type: 'longrope';
      longFactor: readonly number[];
      shortFactor: readonly number[];
      originalMaxPositionEmbeddings: number;
      attentionFactor: number;
    }
  | {
      /**
       * YaRN (Qwen 2.5/3 long context, gpt-oss): frequencies blended between theta^(-2i/d)
       * (extrapolated) and that over `factor` (interpolated) by a ramp over the pairs that turn
       * between betaFast and betaSlow times within the original context (see model/rope.ts); cos
       * and sin multiplied by attentionFactor. `truncate`: the ramp's ends rounded to whole pairs.
       */
      type: 'yarn';
      factor: number;
      originalMaxPositionEmbeddings: number;
      betaFast: number;
      betaSlow: number;
      attentionFactor: number;
      truncate: boolean;
    };

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
   * Leading dimensions of each q/k head that RoPE rotates (Phi-4-mini: 0.75 of 128); the rest
   * pass through. null: the whole head (`rotaryDim()`).
   */
  rotaryDim: number | null;
  /**
   * 'neox': rotate pairs (i, i + headDim/2), as in HF checkpoints and GGUF qwen2/qwen3.
   * 'interleaved': pairs (2i, 2i+1), as in GGUF llama files, whose q/k rows the converter permuted.
   */
  ropeStyle: 'neox' | 'interleaved';
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  /** q/k/v projections carry biases (Qwen2 always; Llama/Qwen3 when `attention_bias`). */
  attentionBias: boolean;
  /** RMSNorm of q and k before RoPE (Qwen3, OLMo 2). */
  qkNorm: boolean;
  /**
   * 'head': each head of q and k normed on its own, weights [headDim] (Qwen3); 'full': the whole
   * q and the whole k projection, weights [numHeads·headDim] and [numKvHeads·headDim] (OLMo 2).
   */
  qkNormScope: 'head' | 'full';
  /**
   * 'pre': RMSNorm on each block's input, x += block(norm(x)) (Llama). 'post': none on the input,
   * RMSNorm on the block's output before the residual add, x += norm(block(x)) (OLMo 2).
   * 'sandwich': both, x += norm2(block(norm1(x))) (Gemma).
   */
  normPlacement: 'pre' | 'post' | 'sandwich';
  /**
   * Every RMSNorm scales by (normWeightOffset + w): 1 where the file stores Gemma's w (HF), 0
   * where it stores the weight as applied (every other family, and Gemma GGUF files, whose
   * converter added the 1).
   */
  normWeightOffset: number;
  /** Token embeddings are multiplied by this (Gemma: sqrt(hidden_size)); 1 elsewhere. */
  embeddingScale: number;
  /** Gated MLP: act(gate) * up, act silu (SwiGLU) or GELU with the tanh approximation (GeGLU, Gemma). */
  ffnActivation: 'silu' | 'gelu_tanh';
  /** What q·k is multiplied by before the soft-cap and softmax; null: 1/sqrt(headDim) (see `attentionScale()`). */
  attentionScale: number | null;
  /**
   * RoPE base of the sliding-window layers, which rotate unscaled (Gemma 3: 10000); the other
   * layers use ropeTheta and ropeScaling. null: every layer alike (`layerRope()`).
   */
  ropeLocalTheta: number | null;
  /** Each block's output is multiplied by this before the residual add (Granite's residual_multiplier); 1 elsewhere. */
  residualScale: number;
  /** Logits are divided by this (Granite's logits_scaling), before any final soft-cap; 1 elsewhere. */
  logitsScaling: number;
  /** Attention scores s become tanh(s / cap) * cap before the mask and softmax (Gemma 2); null: none. */
  attnLogitSoftcap: number | null;
  /** Logits x become tanh(x / cap) * cap (Gemma 2); null: none. */
  finalLogitSoftcap: number | null;
  /**
   * Sliding-window attention (Mistral; Qwen2/Qwen3 with `use_sliding_window`): on the listed
   * layers a query at position p sees only keys j with p - size < j <= p, the current one
   * included (transformers' `sliding_window_overlay` on top of the causal mask; llama.cpp's
   * standard SWA masks p - j >= n_swa). null: every layer sees its whole causal context.
   */
  slidingWindow: SlidingWindow | null;
  /**
   * Layers that attend without positions (NoPE, SmolLM3): q and k are not rotated there, ascending.
   * Empty: RoPE on every layer.
   */
  noRopeLayers: readonly number[];
  /** Mixture-of-experts FFN (Qwen2-MoE, Qwen3-MoE, OLMoE), on every layer but its `denseLayers`; null: the dense MLP. */
  moe: MoeConfig | null;
  bosTokenId: number | null;
  eosTokenIds: number[];
}

/** ModelConfig's math fields as Llama has them (no Gemma piece): where a config built by hand starts. */
export const PLAIN_MATH = {
  ropeLocalTheta: null,
  normWeightOffset: 0,
  embeddingScale: 1,
  ffnActivation: 'silu',
  attentionScale: null,
  rotaryDim: null,
  residualScale: 1,
  logitsScaling: 1,
  attnLogitSoftcap: null,
  finalLogitSoftcap: null,
  moe: null,
} as const satisfies Partial<ModelConfig>;

/**
 * A mixture-of-experts FFN: per token, router logits x · Wᵀ (E of them), softmax over all E,
 * the top k kept (ties: the lower expert id first), optionally renormalised to sum 1; the output
 * is Σ weight · down(act(gate(x)) · up(x)) over the k experts, plus (with a shared expert)
 * sigmoid(x · w_shexp_gate) · the shared expert's MLP.
 */
export interface MoeConfig {
  numExperts: number;
  /** k: experts each token runs. */
  numExpertsUsed: number;
  /** One expert's intermediate size. */
  expertIntermediateSize: number;
  /** Renormalise the k routing weights to sum 1 (Qwen3-MoE); else they stay softmax probabilities. */
  normTopkProb: boolean;
  /** The shared expert's intermediate size (Qwen2-MoE), or null when there is none. */
  sharedExpertIntermediateSize: number | null;
  /**
   * Layers that run the dense MLP (ffn_gate/up/down, `intermediateSize` wide) instead of the
   * experts, ascending: config.json's `mlp_only_layers` and the layers `decoder_sparse_step`
   * leaves dense (Qwen-MoE's), GGUF's leading `{arch}.leading_dense_block_count`. Empty: experts
   * on every layer (the released checkpoints).
   */
  denseLayers: readonly number[];
}

/** Whether layer `layer` runs the experts (a MoE model's layer not among its dense ones). */
export function layerIsMoe(config: Pick<ModelConfig, 'moe'>, layer: number): boolean {
  return config.moe !== null && !config.moe.denseLayers.includes(layer);
}

/**
 * The blocks of one layer, in order: its token mixer, then its feed-forward block. Each kind is
 * one block of the GPU forward pass (src/engine/forward/, its table in blocks.ts) and one paragraph
 * of the CPU reference (src/reference/forward.ts). Every family here attends on every layer; a
 * hybrid family's recurrent layers would be another mixer kind, named here per layer.
 */
export interface LayerBlocks {
  mixer: 'attention';
  /** The dense MLP, or the mixture of experts (a MoE model's layers not among its dense ones). */
  ffn: 'mlp' | 'moe';
}

export type MixerKind = LayerBlocks['mixer'];
export type FfnKind = LayerBlocks['ffn'];

/** Layer `layer`'s blocks (LayerBlocks). */
export function layerBlocks(config: Pick<ModelConfig, 'moe'>, layer: number): LayerBlocks {
  return { mixer: 'attention', ffn: layerIsMoe(config, layer) ? 'moe' : 'mlp' };
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

/** What q·k is multiplied by: the config's own scale, else 1/sqrt(headDim). */
export function attentionScale(config: Pick<ModelConfig, 'attentionScale' | 'headDim'>): number {
  return config.attentionScale ?? 1 / Math.sqrt(config.headDim);
}

/** Which RoPE layer `layer` uses: the global one (ropeTheta, ropeScaling) or the local one of windowed layers (ropeLocalTheta). */
export function layerRope(config: Pick<ModelConfig, 'slidingWindow' | 'ropeLocalTheta'>, layer: number): 'global' | 'local' {
  return config.ropeLocalTheta !== null && layerWindow(config, layer) !== null ? 'local' : 'global';
}

/** Dimensions of each head RoPE rotates: the config's rotaryDim, else the whole head. */
export function rotaryDim(config: Pick<ModelConfig, 'rotaryDim' | 'headDim'>): number {
  return config.rotaryDim ?? config.headDim;
}

/** The engine's context when none is asked for: 4096 tokens, or the model's maximum when smaller. */
export function defaultContextLength(config: Pick<ModelConfig, 'maxPositionEmbeddings'>, requested?: number): number {
  return Math.min(requested ?? 4096, config.maxPositionEmbeddings);
}

/** Whether layer `layer` rotates q and k (false on NoPE layers). */
export function layerUsesRope(config: Pick<ModelConfig, 'noRopeLayers'>, layer: number): boolean {
  return !config.noRopeLayers.includes(layer);
}

/** Layers l with (l + 1) % step == 0: llama.cpp's NoPE pattern. */
function everyNth(step: number | null, numLayers: number): number[] {
  if (step === null) return [];
  return Array.from({ length: numLayers }, (_, l) => l).filter((l) => (l + 1) % step === 0);
}

/** Layers l with l % n < n - 1: llama.cpp's `set_swa_pattern(n)` (n = 2: the even layers). */
function patternLayers(n: number | null, numLayers: number): number[] {
  if (n === null) throw new Error('a sliding-window pattern family needs swaPattern');
  return Array.from({ length: numLayers }, (_, l) => l).filter((l) => l % n < n - 1);
}

type Json = Record<string, unknown>;

/**
 * Normalises a Hugging Face `config.json` (plus `generation_config.json`, whose eos ids are the
 * ones `generate()` stops on). Throws `ModelError` naming the key for anything we cannot run.
 */
export function configFromHF(configJson: unknown, generationConfigJson?: unknown): ModelConfig {
  if (!isObject(configJson)) throw new ModelError('invalid_field', 'config.json is not a JSON object', 'config.json');
  const c = denseOfHybrid(textConfig(configJson));
  const arch = hfArch(c);
  const row = ARCH[arch];
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
  // Partial rotary (Phi-4-mini's partial_rotary_factor 0.75): the leading dimensions of each head.
  // int(head_dim * partial_rotary_factor), as transformers truncates it.
  const rotary = Math.trunc(headDim * positiveReal('partial_rotary_factor', 1));
  if (rotary % 2 !== 0 || rotary > headDim)
    throw new ModelError('invalid_field', `${field('partial_rotary_factor')} must rotate an even number of dimensions up to head_dim (${headDim}), got ${rotary}`, 'partial_rotary_factor');
  const maxPositionEmbeddings = positive('max_position_embeddings', row.hfDefaults.maxPositionEmbeddings);
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
    rmsNormEps: positiveReal('rms_norm_eps', row.hfDefaults.rmsNormEps),
    ropeTheta,
    ropeScaling: hfRopeScaling(ropeParams ?? c.rope_scaling, ropeParams ? 'rope_parameters' : 'rope_scaling', { c, maxPositionEmbeddings, rotary }),
    rotaryDim: rotary === headDim ? null : rotary,
    ropeStyle: 'neox',
    maxPositionEmbeddings,
    tieWordEmbeddings: (c.tie_word_embeddings ?? row.hfDefaults.tieWordEmbeddings) === true,
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
    noRopeLayers: hfNoRopeLayers(c, row.noRopeLayerStep, numLayers),
    moe: hfMoe(c, row.moe, positive, numLayers),
    bosTokenId: typeof bos === 'number' ? bos : null,
    eosTokenIds: unique([...tokenIds(gen.eos_token_id), ...tokenIds(c.eos_token_id)]),
  };
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
    return mm && (c.model_type === undefined ? archs.includes(mm.hfClass) : c.model_type === mm.modelType);
  });
  if (!arch) return c;
  const mm = ARCH[arch].hfMultimodal!;
  if (!isObject(c.text_config))
    throw new ModelError('missing_field', `config.json: text_config is required for ${mm.modelType} (multimodal) models`, 'text_config');
  const top = Object.fromEntries(['bos_token_id', 'eos_token_id', 'tie_word_embeddings'].filter((k) => c[k] !== undefined).map((k) => [k, c[k]]));
  return { ...mm.textDefaults, ...top, ...c.text_config, model_type: ARCH[arch].hfModelType ?? arch, architectures: [ARCH[arch].hfClass] };
}

/**
 * A hybrid family's config.json that describes a plain row (ArchInfo.hfHybrid: Granite 4.0's
 * dense `granitemoehybrid` checkpoints) as that row's own config: transformers' reading
 * (GraniteMoeHybridConfig: no `layer_types` means Mamba on every layer, `num_local_experts`
 * defaults to 8, `position_embedding_type` to none, `shared_intermediate_size` to 1024), refusing
 * what the row cannot run. Any other config.json comes back as it is.
 */
function denseOfHybrid(c: Json): Json {
  const archs = Array.isArray(c.architectures) ? c.architectures : [];
  const arch = ARCHES.find((a) => {
    const h = ARCH[a].hfHybrid;
    return h && (c.model_type === undefined ? archs.includes(h.hfClass) : c.model_type === h.modelType);
  });
  if (!arch) return c;
  const type = ARCH[arch].hfHybrid!.modelType;
  const refuse = (key: string, what: string): never => {
    throw new ModelError('unsupported_arch', `config.json: ${type} ${what} is not supported; only its dense form runs (every layer "attention", num_local_experts 0, position_embedding_type "rope")`, key);
  };
  const layers = c.num_hidden_layers;
  const types = c.layer_types;
  if (!Array.isArray(types) || types.length !== layers) refuse('layer_types', `without a layer_types list of its ${String(layers)} layers (transformers then runs Mamba-2 on every layer)`);
  const mamba = (types as unknown[]).flatMap((t, i) => (t === 'attention' ? [] : [i]));
  if (mamba.length > 0) refuse('layer_types', `with Mamba-2 (or other non-attention) layers (${mamba.join(', ')})`);
  const experts = c.num_local_experts ?? 8;
  if (experts !== 0) refuse('num_local_experts', `with routed experts (num_local_experts ${JSON.stringify(experts)})`);
  if (c.position_embedding_type !== 'rope') refuse('position_embedding_type', `without RoPE (position_embedding_type ${JSON.stringify(c.position_embedding_type ?? null)})`);
  return {
    ...c,
    model_type: ARCH[arch].hfModelType ?? arch,
    architectures: [ARCH[arch].hfClass],
    // The dense MLP is the shared one.
    intermediate_size: c.shared_intermediate_size ?? 1024,
  };
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

/** YaRN's magnitude correction 0.1·m·ln(scale) + 1 (1 at scale <= 1): transformers' and llama.cpp's get_mscale. */
export function yarnMscale(scale: number, m = 1): number {
  return scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1;
}

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
  const family = ARCHES.find((a) => ARCH[a].gguf === rawArch);
  if (!family) throw new ModelError('unsupported_arch', `GGUF ${archKey} "${String(rawArch)}" is not supported (supported: ${ggufSupported()})`, archKey);
  const row = ARCH[family];
  // Metadata keys are named `{general.architecture}.…`.
  const prefix = row.gguf;
  const byName = new Map((tensors ?? []).map((t) => [t.name, t]));

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
  const numHeads = get('attention.head_count');
  const numKvHeads = get('attention.head_count_kv', numHeads);
  const headDim = get('attention.key_length', hiddenSize / numHeads);
  const tokens = metadata.get('tokenizer.ggml.tokens');
  const embd = byName.get('token_embd.weight');
  const vocabFallback = embd?.shape[0] ?? (Array.isArray(tokens) ? tokens.length : undefined);

  const ropeScaling = ggufRopeScaling(metadata, prefix, get, byName, tensors !== undefined);
  // Partial rotary: llama.cpp's n_rot.
  const rotary = get('rope.dimension_count', headDim);
  if (rotary % 2 !== 0 || rotary > headDim)
    throw new ModelError('invalid_field', `GGUF ${prefix}.rope.dimension_count must be even and at most the head dimension (${headDim}), got ${rotary}`, `${prefix}.rope.dimension_count`);

  const numLayers = get('block_count');
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
    noRopeLayers: everyNth(row.noRopeLayerStep, numLayers),
    // llama.cpp's keys; renormalisation is fixed per architecture (no key).
    moe: row.moe === null ? null : ggufMoe(row.moe, get, numLayers, prefix, metadata),
    bosTokenId: bos ?? null,
    eosTokenIds: unique(eos),
  };
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
