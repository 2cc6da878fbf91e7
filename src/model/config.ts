/**
 * One normalised description of a model (`ModelConfig`), whatever file it came from, and the
 * per-layer queries every forward pass asks of it. The readers are ./config-hf.ts (config.json)
 * and ./config-gguf.ts (GGUF metadata); the architecture table they read is ./arch.ts.
 */
import type { Arch, FfnActivation, NormPlacement, QkNormScope, RopeStyle } from './arch';
import type { EmbeddingConfig } from './embedding';
import { ModelError } from './errors';

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
  ropeStyle: RopeStyle;
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
  qkNormScope: QkNormScope;
  /**
   * 'pre': RMSNorm on each block's input, x += block(norm(x)) (Llama). 'post': none on the input,
   * RMSNorm on the block's output before the residual add, x += norm(block(x)) (OLMo 2).
   * 'sandwich': both, x += norm2(block(norm1(x))) (Gemma).
   */
  normPlacement: NormPlacement;
  /**
   * Every RMSNorm scales by (normWeightOffset + w): 1 where the file stores Gemma's w (HF), 0
   * where it stores the weight as applied (every other family, and Gemma GGUF files, whose
   * converter added the 1).
   */
  normWeightOffset: number;
  /** Token embeddings are multiplied by this (Gemma: sqrt(hidden_size)); 1 elsewhere. */
  embeddingScale: number;
  /** Gated MLP: act(gate) * up, act silu (SwiGLU) or GELU with the tanh approximation (GeGLU, Gemma). */
  ffnActivation: FfnActivation;
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
  /** LFM2's gated short convolutions in place of attention on some layers; null: attention on every layer. */
  shortConv: ShortConvConfig | null;
  /** Qwen3.5's gated DeltaNet in place of attention on some layers; null: attention on every layer. */
  deltaNet: DeltaNetConfig | null;
  /** Granite 4.0-H's Mamba-2 layers (Mamba2Config); null: none. */
  mamba2: Mamba2Config | null;
  /**
   * Gated attention (Qwen3.5): q_proj's rows are, per head, its query then a gate of as many rows;
   * the attention output of each head is multiplied by sigmoid(gate) before o_proj.
   */
  attnOutputGate: boolean;
  /**
   * Multi-token-prediction layers after the trunk (Qwen3.5's MTP head, ArchInfo.mtp; 0 or 1):
   * from the trunk's final hidden state at position t (after the output norm, as vLLM's
   * Qwen3NextMTP takes it) and token t+1's embedding, each RMSNorm'd by its own weight,
   * fc · [embedding | hidden] feeds one full-attention decoder layer of the trunk's kind (its own
   * KV), then its own norm and the shared LM head: logits for token t+2 (reference/mtp.ts).
   * Absent or 0: none, or the file's are not read.
   */
  mtpLayers?: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  /**
   * A sentence-embedding model (./embedding.ts: sentence-transformers' Pooling module, GGUF
   * `pooling_type`): `/v1/embeddings` pools its last layer's rows; absent or null: a generative model.
   */
  embedding?: EmbeddingConfig | null;
  /**
   * Every token attends both ways (EmbeddingGemma: gemma3 text with `use_bidirectional_attention`,
   * GGUF `gemma-embedding`); windowed layers see half their window on each side. The CPU reference
   * runs it (reference/bidirectional.ts); on the GPU the encoder backend does (engine/forward/gemma-encoder.ts), the causal decoder refuses it. Absent: causal.
   */
  bidirectional?: boolean;
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
  shortConv: null,
  deltaNet: null,
  mamba2: null,
  attnOutputGate: false,
} as const satisfies Partial<ModelConfig>;

/**
 * LFM2's gated short convolution (the `shortconv` mixer): in_proj's 3·hidden rows are B, C and x;
 * y = out_proj(C ⊙ conv(B ⊙ x)), where conv is causal and depthwise over `kernel` taps:
 * conv(u)[t, c] = Σ_j w[c, j] · u[t − (kernel − 1) + j, c], the inputs before the sequence zero.
 * A sequence keeps the last kernel − 1 inputs u as its state. No biases (conv_bias false).
 */
export interface ShortConvConfig {
  /** Taps of the depthwise kernel: config.json's `conv_L_cache`, GGUF's `shortconv.l_cache` (LFM2: 3). */
  kernel: number;
  /** The layers that convolve instead of attending, ascending. */
  layers: readonly number[];
}

/**
 * Qwen3.5's gated DeltaNet (the `deltanet` mixer), per token x (HF's Qwen3_5GatedDeltaNet,
 * llama.cpp's qwen35 graph):
 * - qkv = conv(in_proj_qkv · x) with SiLU: a causal depthwise conv over `convKernel` taps of the
 *   2·kDim + vDim channels (q, k, v rows in that order), the state its last convKernel − 1 inputs;
 * - per key head q and k L2-normalised, x·rsqrt(Σx² + eps) with eps the RMSNorm eps, q times 1/√headKDim;
 * - per value head h (numVHeads of them, reading key head `keyHead(c, h)`): β = sigmoid(b_h),
 *   g = −A·softplus(a_h + dt_bias_h) with A = exp(A_log); the state S (headKDim × headVDim) becomes
 *   S·exp(g), then S += k ⊗ β(v − Sᵀk); the head's output is Sᵀq;
 * - each head's output RMSNorm'd by the plain w (never 1 + w), times SiLU(z_h), z = in_proj_z · x;
 * - out_proj into the stream.
 */
export interface DeltaNetConfig {
  /** The layers that run the DeltaNet instead of attention, ascending. */
  layers: readonly number[];
  /** Taps of the conv: config.json's `linear_conv_kernel_dim`, GGUF's `ssm.conv_kernel` (4). */
  convKernel: number;
  numKHeads: number;
  numVHeads: number;
  headKDim: number;
  headVDim: number;
  /**
   * Which key head value head h reads: HF groups the value heads by key head (h reads h // r,
   * r = numVHeads / numKHeads: 'grouped'); llama.cpp's converter reorders every per-value-head
   * tensor so that h reads h % numKHeads ('tiled').
   */
  vHeadOrder: 'grouped' | 'tiled';
  /** What the decay tensor holds: HF's A_log ('log': A = exp(A_log)), or GGUF's ssm_a = −exp(A_log) ('neg'). */
  aStored: 'log' | 'neg';
}

/** The key head that value head `h` of a DeltaNet reads (DeltaNetConfig.vHeadOrder). */
export function deltaNetKeyHead(d: DeltaNetConfig, h: number): number {
  return d.vHeadOrder === 'tiled' ? h % d.numKHeads : Math.floor(h / (d.numVHeads / d.numKHeads));
}

/** Channels of a DeltaNet's conv: q and k (numKHeads · headKDim each), then v (numVHeads · headVDim). */
export function deltaNetConvDim(d: DeltaNetConfig): number {
  return 2 * d.numKHeads * d.headKDim + d.numVHeads * d.headVDim;
}

/**
 * Granite 4.0-H's Mamba-2 mixer (HF's GraniteMoeHybridMambaLayer, llama.cpp's mamba2 layer in its
 * granite-hybrid graph), per token x:
 * - in_proj · x gives, in order, z (numHeads · headDim), xBC (numHeads · headDim + 2 · numGroups ·
 *   stateSize) and dt (numHeads);
 * - xBC = SiLU(conv(xBC) + conv bias), the conv causal and depthwise over `convKernel` taps (the state
 *   its last convKernel − 1 inputs), then split into x (per head), B and C (stateSize per group);
 * - per head h, reading group h // (numHeads / numGroups): dt = softplus(dt_h + dt_bias_h),
 *   A = −exp(A_log_h); the state S (headDim × stateSize) becomes S·exp(dt·A) + dt · x_h ⊗ B; the
 *   head's output is S·C + D_h · x_h;
 * - y ⊙ SiLU(z), then an RMSNorm per group of numHeads · headDim / numGroups channels (times w):
 *   llama.cpp's grouping; transformers' gated norm (as mlx-lm's port) spans all channels, the same
 *   when numGroups = 1, the only value Granite 4.0-H ships;
 * - out_proj into the stream.
 * transformers' time_step_limit defaults to (0, ∞), a clamp that never acts: not modelled.
 */
export interface Mamba2Config {
  /** The layers that run Mamba-2 instead of attention, ascending. */
  layers: readonly number[];
  /** Taps of the conv: config.json's `mamba_d_conv`, GGUF's `ssm.conv_kernel` (4). */
  convKernel: number;
  /** config.json's `mamba_n_heads`, GGUF's `ssm.time_step_rank`. */
  numHeads: number;
  /** config.json's `mamba_d_head`; GGUF: `ssm.inner_size` / `ssm.time_step_rank`. */
  headDim: number;
  /** config.json's `mamba_d_state`, GGUF's `ssm.state_size`. */
  stateSize: number;
  /** config.json's `mamba_n_groups`, GGUF's `ssm.group_count` (Granite 4.0-H: 1). */
  numGroups: number;
  /** What the decay tensor holds: HF's A_log ('log': A = −exp(A_log)), or GGUF's ssm_a = −exp(A_log) ('neg'). */
  aStored: 'log' | 'neg';
}

/** Channels of a Mamba-2 conv: x (numHeads · headDim), then B and C (numGroups · stateSize each). */
export function mamba2ConvDim(m: Mamba2Config): number {
  return m.numHeads * m.headDim + 2 * m.numGroups * m.stateSize;
}

/** The B/C group that head `h` of a Mamba-2 reads (heads in consecutive blocks per group, as HF's repeat_interleave). */
export function mamba2Group(m: Mamba2Config, h: number): number {
  return Math.floor(h / (m.numHeads / m.numGroups));
}

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
 * of the CPU reference (src/reference/forward.ts). A hybrid family's recurrent layers are another
 * mixer kind, named here per layer.
 */
export interface LayerBlocks {
  /** Attention, LFM2's gated short convolution (ShortConvConfig), Qwen3.5's gated DeltaNet (DeltaNetConfig) or Granite 4.0-H's Mamba-2 (Mamba2Config). */
  mixer: 'attention' | 'shortconv' | 'deltanet' | 'mamba2';
  /** The dense MLP, or the mixture of experts (a MoE model's layers not among its dense ones). */
  ffn: 'mlp' | 'moe';
}

export type MixerKind = LayerBlocks['mixer'];
export type FfnKind = LayerBlocks['ffn'];

/** Layer `layer`'s blocks (LayerBlocks). */
export function layerBlocks(config: Pick<ModelConfig, 'moe' | 'shortConv' | 'deltaNet' | 'mamba2'>, layer: number): LayerBlocks {
  const mixer = config.shortConv?.layers.includes(layer)
    ? 'shortconv'
    : config.deltaNet?.layers.includes(layer)
      ? 'deltanet'
      : config.mamba2?.layers.includes(layer)
        ? 'mamba2'
        : 'attention';
  return { mixer, ffn: layerIsMoe(config, layer) ? 'moe' : 'mlp' };
}

/**
 * ModelConfig.mtpLayers from the count a file states (`what`: where it says so, for errors;
 * absent: 0). Qwen3.5 ships one layer, the only count read: more are refused by name.
 */
export function mtpLayerCount(v: unknown, what: string, key: string): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new ModelError('invalid_field', `${what} must be a non-negative integer, got ${JSON.stringify(v)}`, key);
  if (v > 1) throw new ModelError('unsupported_arch', `${what} is ${v}: only one multi-token-prediction layer is supported`, key);
  return v;
}

/** Whether some layer keeps a recurrent state per sequence instead of K/V rows (a hybrid model): its prefix cannot be rewound or shared. */
export function hasRecurrentLayers(config: Pick<ModelConfig, 'moe' | 'shortConv' | 'deltaNet' | 'mamba2' | 'numLayers'>): boolean {
  return Array.from({ length: config.numLayers }, (_, l) => layerBlocks(config, l).mixer).some((m) => m !== 'attention');
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
export function everyNth(step: number | null, numLayers: number): number[] {
  if (step === null) return [];
  return Array.from({ length: numLayers }, (_, l) => l).filter((l) => (l + 1) % step === 0);
}

/** Layers l with l % n < n - 1: llama.cpp's `set_swa_pattern(n)` (n = 2: the even layers). */
export function patternLayers(n: number | null, numLayers: number): number[] {
  if (n === null) throw new Error('a sliding-window pattern family needs swaPattern');
  return Array.from({ length: numLayers }, (_, l) => l).filter((l) => l % n < n - 1);
}

/** `ids` without repeats, first occurrence kept. */
export function unique(ids: number[]): number[] {
  return [...new Set(ids)];
}
