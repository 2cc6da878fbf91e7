/**
 * Idefics3's image processor and prompt expansion (SmolVLM, SmolVLM2, Idefics3), as transformers'
 * `Idefics3ImageProcessor` / `SmolVLMImageProcessor` and their processors do it:
 * 1. resize so the longest edge is `longestEdge` (small images are upscaled; the other side
 *    truncated, then rounded up to even), bounded by `maxImageSize`;
 * 2. resize both sides up to multiples of the tile size (the other side from the aspect ratio);
 * 3. crop tiles row by row, then the whole image resized to one tile (the global image); an image
 *    already one tile is only the global image, with no grid;
 * 4. rescale by 1/255 and normalise by mean/std, channel-first.
 * Each resize is Pillow's LANCZOS (resample.ts).
 */
import type { RgbImage } from '../platform/decode-image';
import { resizeLanczos } from './resample';
import type { ImageProcessorSettings } from './settings';

export interface ProcessedImage {
  /** The tile grid (0 × 0: no grid, the global image only). */
  rows: number;
  cols: number;
  /** Each tile row by row, then the global image: 3 × tileSize × tileSize values, channel-first (as pixel_values). */
  tiles: Float32Array[];
}

/** transformers' `_resize_output_size_rescale_to_max_len` then `_resize_output_size_scale_below_upper_bound`. */
export function longestEdgeSize(height: number, width: number, longest: number, bound: number): [number, number] {
  let ratio = width / height;
  if (width >= height) {
    width = longest;
    height = Math.trunc(width / ratio);
    if (height % 2 !== 0) height++;
  } else {
    height = longest;
    width = Math.trunc(height * ratio);
    if (width % 2 !== 0) width++;
  }
  height = Math.max(height, 1);
  width = Math.max(width, 1);
  ratio = width / height;
  if (width >= height && width > bound) {
    width = bound;
    height = Math.trunc(width / ratio);
  } else if (height > width && height > bound) {
    height = bound;
    width = Math.trunc(height * ratio);
  }
  return [Math.max(height, 1), Math.max(width, 1)];
}

/** transformers' `resize_for_vision_encoder`: both sides up to multiples of the tile size. */
export function tileMultipleSize(height: number, width: number, tile: number): [number, number] {
  const ratio = width / height;
  if (width >= height) {
    width = Math.ceil(width / tile) * tile;
    height = Math.ceil(Math.trunc(width / ratio) / tile) * tile;
  } else {
    height = Math.ceil(height / tile) * tile;
    width = Math.ceil(Math.trunc(height * ratio) / tile) * tile;
  }
  return [height, width];
}

function crop(img: RgbImage, x0: number, y0: number, w: number, h: number): RgbImage {
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) data.set(img.data.subarray(((y0 + y) * img.width + x0) * 3, ((y0 + y) * img.width + x0 + w) * 3), y * w * 3);
  return { width: w, height: h, data };
}

/** 8-bit RGB, row-major, to rescaled and normalised values, channel-first. */
function normalise(img: RgbImage, s: ImageProcessorSettings): Float32Array {
  const n = img.width * img.height;
  const out = new Float32Array(3 * n);
  for (let c = 0; c < 3; c++) {
    // transformers rescales in float64 then stores float32, and normalises in float32.
    const mean = Math.fround(s.mean[c]!);
    const std = Math.fround(s.std[c]!);
    for (let i = 0; i < n; i++) out[c * n + i] = Math.fround(Math.fround(Math.fround(img.data[i * 3 + c]! * s.rescale) - mean) / std);
  }
  return out;
}

export function processImage(img: RgbImage, s: ImageProcessorSettings): ProcessedImage {
  const [h1, w1] = longestEdgeSize(img.height, img.width, s.longestEdge, s.maxImageSize);
  let image = resizeLanczos(img, w1, h1);
  if (!s.split) return { rows: 0, cols: 0, tiles: [normalise(image, s)] };
  const [h2, w2] = tileMultipleSize(image.height, image.width, s.tileSize);
  image = resizeLanczos(image, w2, h2);
  const t = s.tileSize;
  if (image.height <= t && image.width <= t) return { rows: 0, cols: 0, tiles: [normalise(image, s)] };
  const rows = Math.ceil(image.height / t);
  const cols = Math.ceil(image.width / t);
  const th = Math.ceil(image.height / rows);
  const tw = Math.ceil(image.width / cols);
  const tiles: Float32Array[] = [];
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) {
      const x0 = c * tw;
      const y0 = r * th;
      tiles.push(normalise(crop(image, x0, y0, Math.min(tw, image.width - x0), Math.min(th, image.height - y0)), s));
    }
  tiles.push(normalise(resizeLanczos(image, t, t), s));
  return { rows, cols, tiles };
}

/** The special tokens of Idefics3's prompt expansion. */
export const IDEFICS3_TOKENS = { image: '<image>', fake: '<fake_token_around_image>', global: '<global-img>' } as const;

/**
 * The text one `<image>` of the rendered chat becomes: per tile `<fake_token_around_image>
 * <row_r_col_c>` and `imageSeqLen` `<image>`s, `\n` after each row, then `\n<fake_token_around_image>
 * <global-img>` with its `<image>`s and a closing `<fake_token_around_image>`; with no grid only
 * the global image's part, without the newline.
 */
export function imagePromptText(rows: number, cols: number, imageSeqLen: number): string {
  const { image, fake, global } = IDEFICS3_TOKENS;
  const tokens = image.repeat(imageSeqLen);
  const globalPart = `${fake}${global}${tokens}${fake}`;
  if (rows === 0 && cols === 0) return globalPart;
  let text = '';
  for (let r = 1; r <= rows; r++) {
    for (let c = 1; c <= cols; c++) text += `${fake}<row_${r}_col_${c}>${tokens}`;
    text += '\n';
  }
  return `${text}\n${globalPart}`;
}
