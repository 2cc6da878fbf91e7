/**
 * Idefics3's image processing settings (SmolVLM, SmolVLM2, Idefics3), read from either form of a
 * model: the HF folder's `preprocessor_config.json` (+ the vision config), or the mmproj GGUF's
 * `clip.vision.*` keys (llama.cpp's tools/mtmd names them).
 */

export interface ImageProcessorSettings {
  kind: 'idefics3';
  /** `size.longest_edge` / `clip.vision.preproc_image_size`: the first resize's longest side (small images are upscaled to it). */
  longestEdge: number;
  /** `max_image_size.longest_edge` / `clip.vision.image_size`: the side of each tile and of the global image, the encoder's input. */
  tileSize: number;
  /** `do_image_splitting`: tiles plus a global image; false: the longest-edge resize only. */
  split: boolean;
  /** The bound on the first resize (transformers' SmolVLM processor: 4096; Idefics3's: 1820). */
  maxImageSize: number;
  /** `rescale_factor` (1/255). */
  rescale: number;
  /** `image_mean` / `image_std` per channel (0.5 each for SmolVLM). */
  mean: [number, number, number];
  std: [number, number, number];
  /** `<image>` tokens per tile: (tileSize / patchSize)² / scaleFactor². */
  imageSeqLen: number;
}

type Json = Record<string, unknown>;

const triple = (v: unknown, dflt: number): [number, number, number] => {
  if (typeof v === 'number') return [v, v, v];
  if (Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'number')) return v as [number, number, number];
  return [dflt, dflt, dflt];
};

const seqLen = (tile: number, patch: number, scale: number) => Math.floor(tile / patch) ** 2 / (scale * scale);

/**
 * From HF: `preprocessor_config.json` and `config.json` (`vision_config.patch_size`,
 * `scale_factor`); SmolVLM's processor bounds the first resize at 4096, Idefics3's at 1820.
 */
export function settingsFromHF(pre: Json, config: Json): ImageProcessorSettings {
  const vision = (config.vision_config ?? {}) as Json;
  const size = (pre.size ?? {}) as Json;
  const max = (pre.max_image_size ?? {}) as Json;
  const tileSize = Number(max.longest_edge ?? vision.image_size ?? 364);
  const patch = Number(vision.patch_size ?? 14);
  const scale = Number(config.scale_factor ?? 2);
  const smol = String(pre.image_processor_type ?? '').startsWith('SmolVLM') || config.model_type === 'smolvlm';
  return {
    kind: 'idefics3',
    longestEdge: Number(size.longest_edge ?? 4 * tileSize),
    tileSize,
    split: pre.do_image_splitting !== false,
    maxImageSize: smol ? 4096 : 1820,
    rescale: Number(pre.rescale_factor ?? 1 / 255),
    mean: triple(pre.image_mean, 0.5),
    std: triple(pre.image_std, 0.5),
    imageSeqLen: seqLen(tileSize, patch, scale),
  };
}

/** From an mmproj GGUF's metadata (`clip.projector_type` "idefics3"). */
export function settingsFromGGUF(meta: ReadonlyMap<string, unknown> | Readonly<Record<string, unknown>>): ImageProcessorSettings {
  const get = (k: string) => (meta instanceof Map ? meta.get(k) : (meta as Record<string, unknown>)[k]);
  const tileSize = Number(get('clip.vision.image_size'));
  const patch = Number(get('clip.vision.patch_size'));
  const scale = Number(get('clip.vision.projector.scale_factor') ?? 4);
  return {
    kind: 'idefics3',
    longestEdge: Number(get('clip.vision.preproc_image_size') ?? 4 * tileSize),
    tileSize,
    split: true,
    maxImageSize: 4096,
    rescale: 1 / 255,
    mean: triple(get('clip.vision.image_mean'), 0.5),
    std: triple(get('clip.vision.image_std'), 0.5),
    imageSeqLen: seqLen(tileSize, patch, scale),
  };
}
