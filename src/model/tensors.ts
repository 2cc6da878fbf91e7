/**
 * The tensor table: every tensor a model may hold, once, with its names in each format, its shape
 * from the config, when it is present and what it is. The expected-tensor check, the safetensors
 * name mapping, the GPU upload (engine/gpu-weights.ts), the CPU reference (reference/forward.ts)
 * and the fixture writer all read it, so a new tensor is one row here (plus the step of the
 * forward pass that uses it).
 */
import { ARCH, type Arch } from './arch';
import { deltaNetConvDim, layerBlocks, mamba2ConvDim, layerIsMoe, rotaryDim, type MixerKind, type ModelConfig } from './config';
import { ModelError } from './errors';

/**
 * What a tensor is. Matrices ('embedding', 'linear', 'attn_out', 'mlp_out', 'lm_head') keep their
 * file's type on the GPU; the others are vectors read as f32. 'attn_out' and 'mlp_out' are the
 * linears that write into the residual stream; 'rope_freqs' holds Llama 3 rope scaling as
 * per-frequency divisors, and LongRoPE's long and short factors (Phi-3) are the same kind.
 * 'conv' is a short convolution's depthwise kernel [channels, taps], read as f32 (LFM2).
 */
export type TensorKind = 'embedding' | 'linear' | 'attn_out' | 'mlp_out' | 'lm_head' | 'norm' | 'bias' | 'rope_freqs' | 'conv';

const MATRIX_KINDS = ['embedding', 'linear', 'attn_out', 'mlp_out', 'lm_head'] as const satisfies readonly TensorKind[];
type MatrixKind = (typeof MATRIX_KINDS)[number];

export function isMatrix(kind: TensorKind): kind is MatrixKind {
  return (MATRIX_KINDS as readonly TensorKind[]).includes(kind);
}

export interface TensorRow {
  /** The weight's key in the GPU and reference weight sets (absent: read by openModel itself). */
  field?: string;
  /** Hugging Face name (after `model.layers.N.` for a layer's); null when only GGUF files carry it. */
  hf: string | null;
  /**
   * The same tensor's name in a hybrid family's checkpoints of this row (ArchInfo.hfHybrid:
   * Granite 4.0's dense MLP is its shared one, `shared_mlp.output_linear`), read as `hf`.
   */
  hfHybrid?: string;
  /** llama.cpp name, the canonical one (after `blk.N.` for a layer's). */
  gguf: string;
  /** Outermost first, as in TensorInfo (a linear layer is [out, in]). */
  shape: (c: ModelConfig) => number[];
  kind: TensorKind;
  /**
   * Present only when this holds for the config (the file must then hold it); a layer's row is
   * asked about each layer (a MoE model's dense layers hold the dense MLP, the others the
   * experts), and without `layer` whether it holds on some layer.
   */
  when?: (c: ModelConfig, layer?: number) => boolean;
  /** Used when the file has it, never required. */
  optional?: true;
  /**
   * Held only by the layers whose token mixer is this kind (layerBlocks): attention's tensors are
   * absent from a hybrid model's conv layers. Unlike `when`, the field stays required in
   * LayerWeights: the mixer's own block is the only reader.
   */
  mixer?: MixerKind;
  /** Hugging Face stores it [n, 1, k] (a depthwise Conv1d's weight), llama.cpp's converter squeezed to [n, k]: read as [n, k]. */
  hfSqueezed?: true;
  /**
   * The shape llama.cpp's converter gives it when that is not the table's (the same values in the
   * same order: Mamba-2's ssm_a and ssm_d [heads, 1], its grouped norm [groups, inner / groups]);
   * read as the table's shape.
   */
  ggufShape?: (c: ModelConfig) => number[];
  /** A norm applied by the plain w in every file, never ModelConfig.normWeightOffset + w (Qwen3.5's DeltaNet output norm). */
  plainNorm?: true;
  /** The rows are q or k heads, rotated by RoPE (llama.cpp permutes them in `llama` files). */
  rotary?: 'q' | 'k';
  /**
   * The GPU joins this with its layer's other rows of the same group (engine/gpu-weights.ts): one
   * dispatch. 'qkv' rows concatenated (and their biases); 'gate_up' rows interleaved, gate row i
   * then up row i, for the matvec's GLU epilogue.
   */
  fuse?: 'qkv' | 'gate_up';
  /**
   * One matrix per expert, stacked outermost ([experts, out, in]): GGUF stores the stack as one
   * 3-D tensor; Hugging Face stores each expert apart, `{e}` in `hf` standing for its index, and
   * openModel stacks them (`expertPiece`).
   */
  experts?: true;
}

const qDim = (c: ModelConfig) => c.numHeads * c.headDim;
// Gated attention (Qwen3.5): q_proj holds each head's query and gate rows.
const qRows = (c: ModelConfig) => qDim(c) * (c.attnOutputGate ? 2 : 1);
const dnVDim = (c: ModelConfig) => c.deltaNet!.numVHeads * c.deltaNet!.headVDim;
const kvDim = (c: ModelConfig) => c.numKvHeads * c.headDim;
// The dense MLP on a dense model's layers and a MoE model's dense ones (MoeConfig.denseLayers); the experts on the others.
const anyLayer = (c: ModelConfig, holds: (l: number) => boolean) => Array.from({ length: c.numLayers }, (_, l) => l).some(holds);
const dense = (c: ModelConfig, l?: number) => (l === undefined ? anyLayer(c, (x) => !layerIsMoe(c, x)) : !layerIsMoe(c, l));
const moe = (c: ModelConfig, l?: number) => (l === undefined ? anyLayer(c, (x) => layerIsMoe(c, x)) : layerIsMoe(c, l));
const shared = (c: ModelConfig, l?: number) => (c.moe?.sharedExpertIntermediateSize ?? null) !== null && moe(c, l);
const experts = (c: ModelConfig) => c.moe!.numExperts;
const expertSize = (c: ModelConfig) => c.moe!.expertIntermediateSize;
const sharedSize = (c: ModelConfig) => c.moe!.sharedExpertIntermediateSize!;
const preNorm = (c: ModelConfig) => c.normPlacement !== 'post';
const conv = (c: ModelConfig, l?: number) => c.shortConv !== null && (l === undefined || layerBlocks(c, l).mixer === 'shortconv');
const mamba2 = (c: ModelConfig, l?: number) => c.mamba2 !== null && (l === undefined || layerBlocks(c, l).mixer === 'mamba2');
const mbInner = (c: ModelConfig) => c.mamba2!.numHeads * c.mamba2!.headDim;
const deltaNet = (c: ModelConfig, l?: number) => c.deltaNet !== null && (l === undefined || layerBlocks(c, l).mixer === 'deltanet');
const postNorm = (c: ModelConfig) => c.normPlacement !== 'pre';

/** One layer's tensors, in file order. */
export const LAYER_TENSORS = [
  { field: 'attnNorm', hf: 'input_layernorm.weight', gguf: 'attn_norm.weight', kind: 'norm', shape: (c) => [c.hiddenSize], when: preNorm },
  { field: 'wq', mixer: 'attention', hf: 'self_attn.q_proj.weight', gguf: 'attn_q.weight', kind: 'linear', shape: (c) => [qRows(c), c.hiddenSize], rotary: 'q', fuse: 'qkv' },
  { field: 'wk', mixer: 'attention', hf: 'self_attn.k_proj.weight', gguf: 'attn_k.weight', kind: 'linear', shape: (c) => [kvDim(c), c.hiddenSize], rotary: 'k', fuse: 'qkv' },
  { field: 'wv', mixer: 'attention', hf: 'self_attn.v_proj.weight', gguf: 'attn_v.weight', kind: 'linear', shape: (c) => [kvDim(c), c.hiddenSize], fuse: 'qkv' },
  { field: 'bq', mixer: 'attention', hf: 'self_attn.q_proj.bias', gguf: 'attn_q.bias', kind: 'bias', shape: (c) => [qDim(c)], when: (c) => c.attentionBias, rotary: 'q', fuse: 'qkv' },
  { field: 'bk', mixer: 'attention', hf: 'self_attn.k_proj.bias', gguf: 'attn_k.bias', kind: 'bias', shape: (c) => [kvDim(c)], when: (c) => c.attentionBias, rotary: 'k', fuse: 'qkv' },
  { field: 'bv', mixer: 'attention', hf: 'self_attn.v_proj.bias', gguf: 'attn_v.bias', kind: 'bias', shape: (c) => [kvDim(c)], when: (c) => c.attentionBias, fuse: 'qkv' },
  // Per head (Qwen3) or over the whole projection (OLMo 2).
  { field: 'qNorm', mixer: 'attention', hf: 'self_attn.q_norm.weight', gguf: 'attn_q_norm.weight', kind: 'norm', shape: (c) => [c.qkNormScope === 'full' ? qDim(c) : c.headDim], when: (c) => c.qkNorm },
  { field: 'kNorm', mixer: 'attention', hf: 'self_attn.k_norm.weight', gguf: 'attn_k_norm.weight', kind: 'norm', shape: (c) => [c.qkNormScope === 'full' ? kvDim(c) : c.headDim], when: (c) => c.qkNorm },
  { field: 'wo', mixer: 'attention', hf: 'self_attn.o_proj.weight', gguf: 'attn_output.weight', kind: 'attn_out', shape: (c) => [c.hiddenSize, qDim(c)] },
  // Llama/Qwen3 with attention_bias also bias o_proj; Qwen2 never does.
  { field: 'bo', mixer: 'attention', hf: 'self_attn.o_proj.bias', gguf: 'attn_output.bias', kind: 'bias', shape: (c) => [c.hiddenSize], optional: true },
  // LFM2's gated short convolution (ShortConvConfig): in_proj's rows B, C, x; the depthwise kernel; out_proj into the stream.
  { field: 'convIn', hf: 'conv.in_proj.weight', gguf: 'shortconv.in_proj.weight', kind: 'linear', shape: (c) => [3 * c.hiddenSize, c.hiddenSize], when: conv },
  { field: 'convKernel', hf: 'conv.conv.weight', gguf: 'shortconv.conv.weight', kind: 'conv', shape: (c) => [c.hiddenSize, c.shortConv!.kernel], when: conv, hfSqueezed: true },
  { field: 'convOut', hf: 'conv.out_proj.weight', gguf: 'shortconv.out_proj.weight', kind: 'attn_out', shape: (c) => [c.hiddenSize, c.hiddenSize], when: conv },
  // Qwen3.5's gated DeltaNet (DeltaNetConfig): q, k, v rows (conv'd together); z; β's and α's rows
  // (kept F32 in llama.cpp's files); the conv; dt_bias; the decay (HF A_log, GGUF ssm_a =
  // −exp(A_log)); the output norm (plain w); out_proj into the stream. GGUF orders every
  // per-value-head tensor's heads its own way (DeltaNetConfig.vHeadOrder).
  { field: 'dnQkv', hf: 'linear_attn.in_proj_qkv.weight', gguf: 'attn_qkv.weight', kind: 'linear', shape: (c) => [deltaNetConvDim(c.deltaNet!), c.hiddenSize], when: deltaNet },
  { field: 'dnZ', hf: 'linear_attn.in_proj_z.weight', gguf: 'attn_gate.weight', kind: 'linear', shape: (c) => [dnVDim(c), c.hiddenSize], when: deltaNet },
  { field: 'dnBeta', hf: 'linear_attn.in_proj_b.weight', gguf: 'ssm_beta.weight', kind: 'linear', shape: (c) => [c.deltaNet!.numVHeads, c.hiddenSize], when: deltaNet },
  { field: 'dnAlpha', hf: 'linear_attn.in_proj_a.weight', gguf: 'ssm_alpha.weight', kind: 'linear', shape: (c) => [c.deltaNet!.numVHeads, c.hiddenSize], when: deltaNet },
  { field: 'dnConv', hf: 'linear_attn.conv1d.weight', gguf: 'ssm_conv1d.weight', kind: 'conv', shape: (c) => [deltaNetConvDim(c.deltaNet!), c.deltaNet!.convKernel], hfSqueezed: true, when: deltaNet },
  { field: 'dnDtBias', hf: 'linear_attn.dt_bias', gguf: 'ssm_dt.bias', kind: 'bias', shape: (c) => [c.deltaNet!.numVHeads], when: deltaNet },
  { field: 'dnDecay', hf: 'linear_attn.A_log', gguf: 'ssm_a', kind: 'bias', shape: (c) => [c.deltaNet!.numVHeads], when: deltaNet },
  { field: 'dnNorm', hf: 'linear_attn.norm.weight', gguf: 'ssm_norm.weight', kind: 'norm', shape: (c) => [c.deltaNet!.headVDim], plainNorm: true, when: deltaNet },
  { field: 'dnOut', hf: 'linear_attn.out_proj.weight', gguf: 'ssm_out.weight', kind: 'attn_out', shape: (c) => [c.hiddenSize, dnVDim(c)], when: deltaNet },
  // Granite 4.0-H's Mamba-2 (Mamba2Config): in_proj's rows z, xBC, dt; the conv biased; A_log (GGUF: −exp(A_log)), D.
  // llama.cpp's converter writes ssm_a and ssm_d as [heads, 1] and the norm as [groups, inner / groups].
  { field: 'mbIn', hf: 'mamba.in_proj.weight', gguf: 'ssm_in.weight', kind: 'linear', shape: (c) => [mbInner(c) + mamba2ConvDim(c.mamba2!) + c.mamba2!.numHeads, c.hiddenSize], when: mamba2 },
  { field: 'mbConv', hf: 'mamba.conv1d.weight', gguf: 'ssm_conv1d.weight', kind: 'conv', shape: (c) => [mamba2ConvDim(c.mamba2!), c.mamba2!.convKernel], hfSqueezed: true, when: mamba2 },
  { field: 'mbConvBias', hf: 'mamba.conv1d.bias', gguf: 'ssm_conv1d.bias', kind: 'bias', shape: (c) => [mamba2ConvDim(c.mamba2!)], when: mamba2 },
  { field: 'mbDtBias', hf: 'mamba.dt_bias', gguf: 'ssm_dt.bias', kind: 'bias', shape: (c) => [c.mamba2!.numHeads], when: mamba2 },
  { field: 'mbDecay', hf: 'mamba.A_log', gguf: 'ssm_a', kind: 'bias', shape: (c) => [c.mamba2!.numHeads], ggufShape: (c) => [c.mamba2!.numHeads, 1], when: mamba2 },
  { field: 'mbD', hf: 'mamba.D', gguf: 'ssm_d', kind: 'bias', shape: (c) => [c.mamba2!.numHeads], ggufShape: (c) => [c.mamba2!.numHeads, 1], when: mamba2 },
  { field: 'mbNorm', hf: 'mamba.norm.weight', gguf: 'ssm_norm.weight', kind: 'norm', shape: (c) => [mbInner(c)], ggufShape: (c) => [c.mamba2!.numGroups, mbInner(c) / c.mamba2!.numGroups], when: mamba2 },
  { field: 'mbOut', hf: 'mamba.out_proj.weight', gguf: 'ssm_out.weight', kind: 'attn_out', shape: (c) => [c.hiddenSize, mbInner(c)], when: mamba2 },
  // HF calls Llama's pre-FFN norm `post_attention_layernorm`; with post-norms (OLMo 2, and
  // Gemma's sandwich) the same name is the attention output's norm, llama.cpp's
  // post_attention_norm, and Gemma's pre-FFN norm is `pre_feedforward_layernorm`.
  { field: 'ffnNorm', hf: 'post_attention_layernorm.weight', gguf: 'ffn_norm.weight', kind: 'norm', shape: (c) => [c.hiddenSize], when: (c) => c.normPlacement === 'pre' },
  { field: 'ffnNorm', hf: 'pre_feedforward_layernorm.weight', gguf: 'ffn_norm.weight', kind: 'norm', shape: (c) => [c.hiddenSize], when: (c) => c.normPlacement === 'sandwich' },
  { field: 'postAttnNorm', hf: 'post_attention_layernorm.weight', gguf: 'post_attention_norm.weight', kind: 'norm', shape: (c) => [c.hiddenSize], when: postNorm },
  { field: 'wGate', hf: 'mlp.gate_proj.weight', gguf: 'ffn_gate.weight', kind: 'linear', shape: (c) => [c.intermediateSize, c.hiddenSize], when: dense, fuse: 'gate_up' },
  { field: 'wUp', hf: 'mlp.up_proj.weight', gguf: 'ffn_up.weight', kind: 'linear', shape: (c) => [c.intermediateSize, c.hiddenSize], when: dense, fuse: 'gate_up' },
  { field: 'wDown', hf: 'mlp.down_proj.weight', hfHybrid: 'shared_mlp.output_linear.weight', gguf: 'ffn_down.weight', kind: 'mlp_out', shape: (c) => [c.hiddenSize, c.intermediateSize], when: dense },
  // Mixture of experts (config.moe): the router's logits (kept F32 in GGUF files), the experts'
  // stacked SwiGLU matrices, and Qwen2-MoE's shared expert with its sigmoid gate ([1, hidden]).
  { field: 'wRouter', hf: 'mlp.gate.weight', gguf: 'ffn_gate_inp.weight', kind: 'linear', shape: (c) => [experts(c), c.hiddenSize], when: moe },
  { field: 'wGateExps', hf: 'mlp.experts.{e}.gate_proj.weight', gguf: 'ffn_gate_exps.weight', kind: 'linear', shape: (c) => [experts(c), expertSize(c), c.hiddenSize], when: moe, experts: true },
  { field: 'wUpExps', hf: 'mlp.experts.{e}.up_proj.weight', gguf: 'ffn_up_exps.weight', kind: 'linear', shape: (c) => [experts(c), expertSize(c), c.hiddenSize], when: moe, experts: true },
  { field: 'wDownExps', hf: 'mlp.experts.{e}.down_proj.weight', gguf: 'ffn_down_exps.weight', kind: 'mlp_out', shape: (c) => [experts(c), c.hiddenSize, expertSize(c)], when: moe, experts: true },
  { field: 'wSharedGateInp', hf: 'mlp.shared_expert_gate.weight', gguf: 'ffn_gate_inp_shexp.weight', kind: 'linear', shape: (c) => [1, c.hiddenSize], when: shared },
  { field: 'wGateShexp', hf: 'mlp.shared_expert.gate_proj.weight', gguf: 'ffn_gate_shexp.weight', kind: 'linear', shape: (c) => [sharedSize(c), c.hiddenSize], when: shared },
  { field: 'wUpShexp', hf: 'mlp.shared_expert.up_proj.weight', gguf: 'ffn_up_shexp.weight', kind: 'linear', shape: (c) => [sharedSize(c), c.hiddenSize], when: shared },
  { field: 'wDownShexp', hf: 'mlp.shared_expert.down_proj.weight', gguf: 'ffn_down_shexp.weight', kind: 'mlp_out', shape: (c) => [c.hiddenSize, sharedSize(c)], when: shared },
  { field: 'postFfnNorm', hf: 'post_feedforward_layernorm.weight', gguf: 'post_ffw_norm.weight', kind: 'norm', shape: (c) => [c.hiddenSize], when: postNorm },
] as const satisfies readonly TensorRow[];

/** The tensors before the layers, in file order. */
export const HEAD_TENSORS = [
  { field: 'tokenEmbd', hf: 'model.embed_tokens.weight', gguf: 'token_embd.weight', kind: 'embedding', shape: (c) => [c.vocabSize, c.hiddenSize] },
  // llama.cpp's converter writes Llama 3 rope scaling as per-frequency divisors, and Phi-3's
  // LongRoPE factors as two such tensors (read by openModel into the config's ropeScaling).
  { hf: null, gguf: 'rope_freqs.weight', kind: 'rope_freqs', shape: (c) => [rotaryDim(c) / 2], optional: true },
  { hf: null, gguf: 'rope_factors_long.weight', kind: 'rope_freqs', shape: (c) => [rotaryDim(c) / 2], optional: true, when: (c) => c.ropeScaling?.type === 'longrope' },
  { hf: null, gguf: 'rope_factors_short.weight', kind: 'rope_freqs', shape: (c) => [rotaryDim(c) / 2], optional: true, when: (c) => c.ropeScaling?.type === 'longrope' },
] as const satisfies readonly TensorRow[];

/** The tensors after the layers, in file order. */
export const TAIL_TENSORS = [
  { field: 'outputNorm', hf: 'model.norm.weight', gguf: 'output_norm.weight', kind: 'norm', shape: (c) => [c.hiddenSize] },
  // When tied, output.weight may still be in the file (some HF exports keep lm_head); it is ignored.
  { field: 'output', hf: 'lm_head.weight', gguf: 'output.weight', kind: 'lm_head', shape: (c) => [c.vocabSize, c.hiddenSize], when: (c) => !c.tieWordEmbeddings },
] as const satisfies readonly TensorRow[];

/**
 * A multi-token-prediction head's own tensors (Qwen3.5's `mtp.*`, ModelConfig.mtpLayers), HF names
 * after `mtp.`, llama.cpp's after `blk.{numLayers}.` (its converter numbers the head's layer after
 * the trunk's and names these `nextn.*`, as for DeepSeek and GLM: enorm the embedding's norm,
 * hnorm the hidden state's, eh_proj the fc over [embedding | hidden], shared_head_norm the last
 * norm). The head's decoder layer is LAYER_TENSORS' rows (mtpTensors); its embedding and LM head
 * are the trunk's.
 */
export const MTP_TENSORS = [
  { field: 'embNorm', hf: 'pre_fc_norm_embedding.weight', gguf: 'nextn.enorm.weight', kind: 'norm', shape: (c) => [c.hiddenSize] },
  { field: 'hiddenNorm', hf: 'pre_fc_norm_hidden.weight', gguf: 'nextn.hnorm.weight', kind: 'norm', shape: (c) => [c.hiddenSize] },
  { field: 'fc', hf: 'fc.weight', gguf: 'nextn.eh_proj.weight', kind: 'linear', shape: (c) => [c.hiddenSize, 2 * c.hiddenSize] },
  { field: 'norm', hf: 'norm.weight', gguf: 'nextn.shared_head_norm.weight', kind: 'norm', shape: (c) => [c.hiddenSize] },
] as const satisfies readonly TensorRow[];

/**
 * A matrix some checkpoints hold fused: its rows are the listed per-projection tensors one after
 * another (`parts`, canonical names with their row counts). The loader splits it by rows into
 * those tensors (model/open.ts), so the rest of the code sees the usual rows of LAYER_TENSORS.
 */
export interface FusedRow {
  /** Hugging Face name (after `model.layers.N.`). */
  hf: string;
  /** llama.cpp name (after `blk.N.`); may equal a part's (GGUF `ffn_up` holds gate then up). */
  gguf: string;
  parts: readonly { gguf: string; rows: (c: ModelConfig) => number }[];
  when: (c: ModelConfig) => boolean;
  /** Only a hybrid family's checkpoints of the row hold it fused (ArchInfo.hfHybrid); the row's own hold the parts. */
  hybrid?: true;
}

const fused = (c: ModelConfig) => ARCH[c.arch].fusedProjections;

/** Phi-3's fused q/k/v (q, k, v rows in order) and gate/up (gate rows, then up rows). */
export const FUSED_LAYER_TENSORS: readonly FusedRow[] = [
  {
    hf: 'self_attn.qkv_proj.weight',
    gguf: 'attn_qkv.weight',
    parts: [
      { gguf: 'attn_q.weight', rows: qDim },
      { gguf: 'attn_k.weight', rows: kvDim },
      { gguf: 'attn_v.weight', rows: kvDim },
    ],
    when: fused,
  },
  {
    hf: 'mlp.gate_up_proj.weight',
    gguf: 'ffn_up.weight',
    parts: [
      { gguf: 'ffn_gate.weight', rows: (c) => c.intermediateSize },
      { gguf: 'ffn_up.weight', rows: (c) => c.intermediateSize },
    ],
    when: fused,
  },
  // Granite 4.0's dense checkpoints (granitemoehybrid): the MLP is the shared one, gate rows then
  // up rows in `shared_mlp.input_linear`. Granite 3.x folders and GGUF files hold the parts
  // (the loader then finds ffn_up of the parts' size and leaves it).
  {
    hf: 'shared_mlp.input_linear.weight',
    gguf: 'ffn_up.weight',
    parts: [
      { gguf: 'ffn_gate.weight', rows: (c) => c.intermediateSize },
      { gguf: 'ffn_up.weight', rows: (c) => c.intermediateSize },
    ],
    when: (c) => c.moe === null && ARCH[c.arch].hfHybrid !== undefined,
    hybrid: true,
  },
];

/** The fused matrices of layer `l` the config implies: canonical name and their parts' names and rows. */
export function fusedTensors(config: ModelConfig, l: number): { name: string; hfName: string; hybrid: boolean; parts: { name: string; rows: number }[] }[] {
  return FUSED_LAYER_TENSORS.filter((f) => f.when(config)).map((f) => ({
    name: `blk.${l}.${f.gguf}`,
    hybrid: f.hybrid === true,
    hfName: `model.layers.${l}.${f.hf}`,
    parts: f.parts.map((p) => ({ name: `blk.${l}.${p.gguf}`, rows: p.rows(config) })),
  }));
}

type LayerRow = (typeof LAYER_TENSORS)[number];
type Conditional = Extract<LayerRow, { when: unknown } | { optional: true }>;
type Held<R extends LayerRow, M, V> = R['kind'] extends MatrixKind ? M : V;

/**
 * One layer's weights keyed by the table's `field`s: matrices as `M`, vectors as `V`; a tensor
 * present only under a flag, or optional, may be undefined.
 */
export type LayerWeights<M, V> = { [R in Exclude<LayerRow, Conditional> as R['field']]: Held<R, M, V> } & {
  [R in Conditional as R['field']]?: Held<R, M, V>;
};

/** A row placed in a model: its canonical name and shape. */
export interface ModelTensor {
  row: TensorRow;
  /** The layer it belongs to, or null for the embedding, rope_freqs and the output's tensors. */
  layer: number | null;
  name: string;
  /** Hugging Face name (null: GGUF only). */
  hfName: string | null;
  shape: number[];
}

/** The rows of one layer the config implies (optional ones included), named for layer `l`. */
function layerTensors(config: ModelConfig, l: number): ModelTensor[] {
  return place(config, LAYER_TENSORS, l, `blk.${l}.`, `model.layers.${l}.`);
}

/** Every tensor the config implies (optional ones included), in file order. */
export function modelTensors(config: ModelConfig): ModelTensor[] {
  return [
    ...place(config, HEAD_TENSORS, null, '', ''),
    ...Array.from({ length: config.numLayers }, (_, l) => layerTensors(config, l)).flat(),
    ...place(config, TAIL_TENSORS, null, '', ''),
  ];
}

/**
 * The multi-token-prediction head's tensors (none when config.mtpLayers is 0): MTP_TENSORS, then
 * its decoder layer, layer numLayers (past the last DeltaNet layer: a full-attention one), named
 * `mtp.layers.0.` in HF. Not in modelTensors: the trunk's upload and checks never see them.
 */
export function mtpTensors(config: ModelConfig): ModelTensor[] {
  if (!config.mtpLayers) return [];
  const l = config.numLayers;
  return [...place(config, MTP_TENSORS, l, `blk.${l}.`, 'mtp.'), ...place(config, LAYER_TENSORS, l, `blk.${l}.`, 'mtp.layers.0.')];
}

function place(config: ModelConfig, rows: readonly TensorRow[], layer: number | null, ggufPrefix: string, hfPrefix: string): ModelTensor[] {
  // The family's own HF names (ArchInfo.hfTensorNames: LFM2's).
  const own = ARCH[config.arch].hfTensorNames ?? {};
  return rows
    .filter((row) => (!row.when || row.when(config, layer ?? undefined)) && (!row.mixer || layer === null || layerBlocks(config, layer).mixer === row.mixer))
    .map((row) => ({ row, layer, name: ggufPrefix + row.gguf, hfName: row.hf === null ? null : hfPrefix + (own[row.hf] ?? row.hf), shape: row.shape(config) }));
}

/**
 * The tensors llama.cpp's converter writes in a shape of its own (TensorRow.ggufShape), by
 * canonical name: the file's shape and the table's. The loader reads the first as the second; the
 * fixture writer writes the first.
 */
export function ggufReshaped(config: ModelConfig): Map<string, { file: number[]; shape: number[] }> {
  return new Map(modelTensors(config).flatMap((t) => (t.row.ggufShape ? [[t.name, { file: t.row.ggufShape(config), shape: t.shape }] as const] : [])));
}

/** A model's weights under the table's fields (matrices as `M`, vectors as `V`). */
export interface ModelWeights<M, V> {
  tokenEmbd: M;
  layers: LayerWeights<M, V>[];
  outputNorm: V;
  /** The embedding itself when tied. */
  output: M;
}

/**
 * Gathers the weights the config implies under their fields, each from `get` (undefined: not in
 * the file); a missing required one is a `missing_tensor` error. Rows without a field
 * (rope_freqs) are openModel's own.
 */
export function assembleWeights<M, V>(config: ModelConfig, get: (t: ModelTensor) => M | V | undefined): ModelWeights<M, V> {
  const pick = (tensors: ModelTensor[]): Record<string, M | V> => {
    const out: Record<string, M | V> = {};
    for (const t of tensors) {
      if (!t.row.field) continue;
      const w = get(t);
      if (w !== undefined) out[t.row.field] = w;
      else if (!t.row.optional) throw new ModelError('missing_tensor', `tensor ${t.name} is missing`, t.name);
    }
    return out;
  };
  const head = pick(place(config, HEAD_TENSORS, null, '', ''));
  const tail = pick(place(config, TAIL_TENSORS, null, '', ''));
  const layers = Array.from({ length: config.numLayers }, (_, l) => pick(layerTensors(config, l)) as LayerWeights<M, V>);
  return { tokenEmbd: head.tokenEmbd as M, layers, outputNorm: tail.outputNorm as V, output: (tail.output ?? head.tokenEmbd) as M };
}

/** The multi-token-prediction head's weights under MTP_TENSORS' fields and its decoder layer's. */
export interface MtpWeights<M, V> {
  embNorm: V;
  hiddenNorm: V;
  fc: M;
  norm: V;
  layer: LayerWeights<M, V>;
}

/** Gathers the MTP head's weights as assembleWeights does the trunk's; null when the config has none. */
export function assembleMtpWeights<M, V>(config: ModelConfig, get: (t: ModelTensor) => M | V | undefined): MtpWeights<M, V> | null {
  const tensors = mtpTensors(config);
  if (tensors.length === 0) return null;
  const own = new Set<string>(MTP_TENSORS.map((r) => r.gguf));
  const pick = (ts: ModelTensor[]): Record<string, M | V> => {
    const out: Record<string, M | V> = {};
    for (const t of ts) {
      const w = get(t);
      if (w !== undefined) out[t.row.field!] = w;
      else if (!t.row.optional) throw new ModelError('missing_tensor', `tensor ${t.name} is missing`, t.name);
    }
    return out;
  };
  const head = pick(tensors.filter((t) => own.has(t.row.gguf)));
  return { embNorm: head.embNorm as V, hiddenNorm: head.hiddenNorm as V, fc: head.fc as M, norm: head.norm as V, layer: pick(tensors.filter((t) => !own.has(t.row.gguf))) as LayerWeights<M, V> };
}

/** HF name -> canonical name; the first row claiming a name wins (rows present for `config` only, when given). */
const hfNames = (rows: readonly (TensorRow | FusedRow)[], config?: ModelConfig) => {
  const map = new Map<string, string>();
  for (const r of rows) {
    if (r.hf === null || ('experts' in r && r.experts) || (config && r.when && !r.when(config))) continue;
    for (const hf of [r.hf, 'hfHybrid' in r ? r.hfHybrid : undefined]) if (hf !== undefined && !map.has(hf)) map.set(hf, r.gguf);
  }
  return map;
};

/** Per-expert HF names: `mlp.experts.(\d+).gate_proj.weight` -> the stacked row. */
const EXPERT_NAMES = LAYER_TENSORS.flatMap((r: TensorRow) =>
  r.experts && r.hf ? [{ re: new RegExp(`^model\\.layers\\.(\\d+)\\.${r.hf.replace(/\./g, '\\.').replace('{e}', '(\\d+)')}$`), row: r }] : [],
);

/**
 * A Hugging Face tensor that is one expert's slice of a stacked tensor (`model.layers.3.mlp.
 * experts.5.up_proj.weight`): the stacked tensor's canonical name (`blk.3.ffn_up_exps.weight`)
 * and the expert's index; null for any other name.
 */
export function expertPiece(hfName: string): { name: string; expert: number } | null {
  for (const { re, row } of EXPERT_NAMES) {
    const m = re.exec(hfName);
    if (m) return { name: `blk.${m[1]}.${row.gguf}`, expert: Number(m[2]) };
  }
  return null;
}

/** The HF name of expert `e`'s slice of a stacked row's tensor (`ModelTensor.hfName` holds `{e}`). */
export function expertHfName(hfName: string, e: number): string {
  return hfName.replace('{e}', String(e));
}
// Fused matrices keep their llama.cpp name until the loader splits them.
const HF_LAYER_NAMES = hfNames([...LAYER_TENSORS, ...FUSED_LAYER_TENSORS]);
const HF_MODEL_NAMES = hfNames([...HEAD_TENSORS, ...TAIL_TENSORS]);

/**
 * Maps a safetensors (Hugging Face) tensor name to its canonical llama.cpp name, or null for
 * tensors we do not use (e.g. `rotary_emb.inv_freq`). HF reuses some names for different
 * tensors across families (`post_attention_layernorm`: Llama's pre-FFN norm, OLMo 2's attention
 * output norm): give the model's config to read them its way; without it, the pre-norm reading.
 * Multimodal checkpoints' text tensors read as the text model's.
 */
export function canonicalName(name: string, config?: ModelConfig): string | null {
  // The MTP head's (`mtp.*`, top level in every Qwen3.5 checkpoint) when the config reads it.
  if (config?.mtpLayers && name.startsWith('mtp.')) return mtpTensors(config).find((t) => t.hfName === name)?.name ?? null;
  // Multimodal checkpoints (Gemma 3 4B+) keep the text model under `language_model.` (or, as
  // newer transformers save them, `model.language_model.`); the vision tower and projector have
  // no row, so they are skipped like any unused tensor.
  // Idefics3's (SmolVLM) under `model.text_model.`.
  const mm = name.replace(/^language_model\./, '').replace(/^model\.(language_model|text_model)\./, 'model.');
  // Embedding checkpoints saved from the bare model (Qwen3-Embedding, sentence-transformers'
  // folders) name its tensors without the `model.` prefix.
  const hfName = mm.startsWith('model.') || HF_MODEL_NAMES.has(mm) ? mm : `model.${mm}`;
  // A family's own names (ArchInfo.hfTensorNames) read as the table's.
  const own = config ? ownHfNames(config) : undefined;
  const global = HF_MODEL_NAMES.get(own?.get(hfName) ?? hfName);
  if (global) return global;
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hfName);
  if (!m) return null;
  const local = (config ? hfNames([...LAYER_TENSORS, ...FUSED_LAYER_TENSORS], config) : HF_LAYER_NAMES).get(own?.get(m[2]!) ?? m[2]!);
  return local ? `blk.${m[1]}.${local}` : null;
}

/**
 * A canonical tensor name as the family's GGUF files write it (ArchInfo.ggufTensorNames: LFM2's
 * token_embd_norm, Qwen3.5's blk.N.attn_post_norm), and back (`ggufCanonicalName`).
 */
export function ggufFileName(arch: Arch, canonical: string): string {
  const own = ARCH[arch].ggufTensorNames ?? {};
  const m = /^(blk\.\d+\.)(.+)$/.exec(canonical);
  return m ? m[1]! + (own[m[2]!] ?? m[2]!) : (own[canonical] ?? canonical);
}

export function ggufCanonicalName(arch: Arch, fileName: string): string {
  const back = new Map(Object.entries(ARCH[arch].ggufTensorNames ?? {}).map(([canonical, own]) => [own, canonical]));
  const m = /^(blk\.\d+\.)(.+)$/.exec(fileName);
  return m ? m[1]! + (back.get(m[2]!) ?? m[2]!) : (back.get(fileName) ?? fileName);
}

/** The family's own HF names -> the table's (ArchInfo.hfTensorNames reversed). */
function ownHfNames(config: ModelConfig): Map<string, string> {
  return new Map(Object.entries(ARCH[config.arch].hfTensorNames ?? {}).map(([std, own]) => [own, std]));
}

// The first row of each canonical name (the pre-FFN norm has two HF names, one tensor).
const LAYER_ROWS = new Map<string, TensorRow>([...LAYER_TENSORS].reverse().map((r) => [r.gguf, r]));

/** The table row of a canonical layer tensor name (`blk.N.…`), or null. */
export function layerRow(name: string): TensorRow | null {
  const m = /^blk\.\d+\.(.+)$/.exec(name);
  return (m && LAYER_ROWS.get(m[1]!)) ?? null;
}

export interface ExpectedTensor {
  name: string;
  /** Outermost first, as in TensorInfo (a linear layer is [out, in]). */
  shape: number[];
  /** Used when present, not required (e.g. attn_output.bias, rope_freqs.weight). */
  optional?: boolean;
}

/** Every canonical tensor the config implies, with its shape. */
export function expectedTensors(config: ModelConfig): ExpectedTensor[] {
  return [...modelTensors(config), ...mtpTensors(config)].map(({ row, name, shape }) => (row.optional ? { name, shape, optional: true } : { name, shape }));
}

/**
 * Checks the file's tensors (canonical names) against the config: every required tensor present,
 * every shape as expected. Unknown extra tensors are ignored.
 */
export function validateTensors(config: ModelConfig, found: ReadonlyMap<string, { shape: readonly number[] }>): void {
  for (const want of expectedTensors(config)) {
    const got = found.get(want.name);
    if (!got) {
      if (want.optional) continue;
      throw new ModelError('missing_tensor', `tensor ${want.name} is missing (expected shape [${want.shape.join(', ')}])`, want.name);
    }
    if (!sameShape(got.shape, want.shape))
      throw new ModelError(
        'tensor_shape',
        `tensor ${want.name} has shape [${got.shape.join(', ')}], expected [${want.shape.join(', ')}]`,
        want.name,
      );
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
