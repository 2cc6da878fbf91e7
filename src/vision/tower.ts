/**
 * The vision tower of an Idefics3-style model (SmolVLM, SmolVLM2, Idefics3): a SigLIP encoder and
 * Idefics3's connector. Its shape, read from either form of a model (an mmproj GGUF with
 * `clip.projector_type` "idefics3", or an HF `Idefics3ForConditionalGeneration` / SmolVLM
 * folder's config.json), and its tensors under llama.cpp's mmproj names, the canonical names here
 * (tools/mtmd/clip-impl.h), with the HF names they come from.
 */

export interface VisionTowerConfig {
  projector: 'idefics3';
  /** Tile side in pixels (the encoder's input) and patch side: (imageSize / patchSize)² patches per tile. */
  imageSize: number;
  patchSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  /** Every LayerNorm's epsilon (SigLIP: 1e-6). */
  layerNormEps: number;
  /** Pixel shuffle's factor: each s × s block of patches becomes one token of s² × hiddenSize values. */
  scaleFactor: number;
  /** The projection's output: the text model's hidden size. */
  projectionDim: number;
}

/** Patches per side of a tile. */
export const patchesPerSide = (c: VisionTowerConfig) => Math.floor(c.imageSize / c.patchSize);
/** Tokens one tile becomes after the pixel shuffle. */
export const tokensPerTile = (c: VisionTowerConfig) => patchesPerSide(c) ** 2 / c.scaleFactor ** 2;

type Get = (key: string) => unknown;

/** From an mmproj GGUF's metadata; null when it is not an Idefics3 projector. */
export function towerConfigFromGGUF(get: Get): VisionTowerConfig | null {
  if (get('clip.projector_type') !== 'idefics3') return null;
  const n = (k: string) => Number(get(k));
  return {
    projector: 'idefics3',
    imageSize: n('clip.vision.image_size'),
    patchSize: n('clip.vision.patch_size'),
    hiddenSize: n('clip.vision.embedding_length'),
    intermediateSize: n('clip.vision.feed_forward_length'),
    numLayers: n('clip.vision.block_count'),
    numHeads: n('clip.vision.attention.head_count'),
    layerNormEps: Number(get('clip.vision.attention.layer_norm_epsilon') ?? 1e-6),
    scaleFactor: Number(get('clip.vision.projector.scale_factor') ?? 4),
    projectionDim: n('clip.vision.projection_dim'),
  };
}

/** From an HF config.json (`model_type` "idefics3" or "smolvlm"); null for other models. */
export function towerConfigFromHF(config: Record<string, unknown>): VisionTowerConfig | null {
  if (config.model_type !== 'idefics3' && config.model_type !== 'smolvlm') return null;
  const v = (config.vision_config ?? {}) as Record<string, unknown>;
  const t = (config.text_config ?? {}) as Record<string, unknown>;
  return {
    projector: 'idefics3',
    imageSize: Number(v.image_size ?? 224),
    patchSize: Number(v.patch_size ?? 32),
    hiddenSize: Number(v.hidden_size ?? 768),
    intermediateSize: Number(v.intermediate_size ?? 3072),
    numLayers: Number(v.num_hidden_layers ?? 12),
    numHeads: Number(v.num_attention_heads ?? 12),
    layerNormEps: Number(v.layer_norm_eps ?? 1e-6),
    scaleFactor: Number(config.scale_factor ?? 2),
    projectionDim: Number(t.hidden_size ?? 4096),
  };
}

/** One tensor of the tower: its canonical (mmproj) name, its HF name, its PyTorch shape. */
export interface TowerTensor {
  name: string;
  hf: string;
  shape: number[];
}

/** Every tensor of the tower, in order. */
export function towerTensors(c: VisionTowerConfig): TowerTensor[] {
  const { hiddenSize: d, intermediateSize: f, patchSize: p } = c;
  const hv = 'model.vision_model.';
  const out: TowerTensor[] = [
    { name: 'v.patch_embd.weight', hf: hv + 'embeddings.patch_embedding.weight', shape: [d, 3, p, p] },
    { name: 'v.patch_embd.bias', hf: hv + 'embeddings.patch_embedding.bias', shape: [d] },
    { name: 'v.position_embd.weight', hf: hv + 'embeddings.position_embedding.weight', shape: [patchesPerSide(c) ** 2, d] },
  ];
  const pairs: [string, string, number[], number[]][] = [
    ['attn_q', 'self_attn.q_proj', [d, d], [d]],
    ['attn_k', 'self_attn.k_proj', [d, d], [d]],
    ['attn_v', 'self_attn.v_proj', [d, d], [d]],
    ['attn_out', 'self_attn.out_proj', [d, d], [d]],
    ['ln1', 'layer_norm1', [d], [d]],
    ['ln2', 'layer_norm2', [d], [d]],
    // llama.cpp's converter maps SigLIP's fc1 to ffn_up and fc2 to ffn_down.
    ['ffn_up', 'mlp.fc1', [f, d], [f]],
    ['ffn_down', 'mlp.fc2', [d, f], [d]],
  ];
  for (let l = 0; l < c.numLayers; l++)
    for (const [g, h, ws, bs] of pairs) {
      out.push({ name: `v.blk.${l}.${g}.weight`, hf: `${hv}encoder.layers.${l}.${h}.weight`, shape: ws });
      out.push({ name: `v.blk.${l}.${g}.bias`, hf: `${hv}encoder.layers.${l}.${h}.bias`, shape: bs });
    }
  out.push({ name: 'v.post_ln.weight', hf: hv + 'post_layernorm.weight', shape: [d] });
  out.push({ name: 'v.post_ln.bias', hf: hv + 'post_layernorm.bias', shape: [d] });
  out.push({ name: 'mm.model.fc.weight', hf: 'model.connector.modality_projection.proj.weight', shape: [c.projectionDim, d * c.scaleFactor ** 2] });
  return out;
}
