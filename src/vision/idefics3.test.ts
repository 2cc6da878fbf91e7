import { describe, expect, it } from 'vitest';
import { imagePromptText, longestEdgeSize, processImage, tileMultipleSize } from './idefics3';
import { resizeLanczos } from './resample';
import { settingsFromGGUF, settingsFromHF, type ImageProcessorSettings } from './settings';

/** SmolVLM's settings scaled down: tiles of 8 px, longest edge 32. */
const TINY: ImageProcessorSettings = { kind: 'idefics3', longestEdge: 32, tileSize: 8, split: true, maxImageSize: 4096, rescale: 1 / 255, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], imageSeqLen: 2 };

const solid = (w: number, h: number, f: (x: number, y: number) => [number, number, number]) => {
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) data.set(f(x, y), (y * w + x) * 3);
  return { width: w, height: h, data };
};

describe("Idefics3's image processor", () => {
  it('resizes the longest edge (upscaling small images), the other side truncated then rounded up to even, within the bound', () => {
    expect(longestEdgeSize(480, 640, 2048, 4096)).toEqual([1536, 2048]);
    expect(longestEdgeSize(20, 30, 32, 4096)).toEqual([22, 32]); // 32 / 1.5 = 21.3 -> 21 -> 22
    expect(longestEdgeSize(17, 5, 32, 4096)).toEqual([32, 10]); // 32 * 5/17 = 9.4 -> 9 -> 10
    expect(longestEdgeSize(100, 10000, 2048, 4096)).toEqual([20, 2048]);
    expect(longestEdgeSize(300, 400, 5000, 4096)).toEqual([3072, 4096]); // 3750 x 5000, then bounded
  });

  it('then takes both sides up to multiples of the tile', () => {
    expect(tileMultipleSize(1536, 2048, 512)).toEqual([1536, 2048]); // the 3 x 4 grid transformers' SmolVLM test expects of a 4:3 photo
    expect(tileMultipleSize(22, 32, 8)).toEqual([24, 32]);
    expect(tileMultipleSize(32, 10, 8)).toEqual([32, 16]);
  });

  it('crops tiles row by row, then the global image, rescaled and normalised channel-first', () => {
    // 32 x 16 needs no resize at longest edge 32 and tile 8: the tiles are plain crops, 2 rows x 4.
    const img = solid(32, 16, (x, y) => [x * 8, y * 8, 255]);
    const p = processImage(img, TINY);
    expect([p.rows, p.cols, p.tiles.length]).toEqual([2, 4, 9]);
    const norm = (v: number) => Math.fround(Math.fround(Math.fround(v / 255) - 0.5) / 0.5);
    const t = p.tiles[1 * 4 + 2]!; // row 2, column 3: x from 16, y from 8
    expect(t.length).toBe(3 * 64);
    expect([t[0], t[64], t[128]]).toEqual([norm(128), norm(64), 1]);
    expect([t[7], t[64 + 8]]).toEqual([norm(23 * 8), norm(9 * 8)]); // x + 7 in R; the next row in G
    const global = resizeLanczos(img, 8, 8);
    expect(p.tiles[8]![0]).toBe(norm(global.data[0]!));
    expect(p.tiles[8]![64 + 63]).toBe(norm(global.data[63 * 3 + 1]!));
  });

  it('keeps an image of one tile whole: no grid, only the global image', () => {
    const p = processImage(solid(5, 5, () => [0, 128, 255]), { ...TINY, longestEdge: 8 });
    expect([p.rows, p.cols, p.tiles.length]).toEqual([0, 0, 1]);
    expect([p.tiles[0]![0], p.tiles[0]![64], p.tiles[0]![128]]).toEqual([-1, Math.fround(Math.fround(Math.fround(128 / 255) - 0.5) / 0.5), 1]);
  });

  it('resizes a non-square image into a grid (20 x 30 -> 22 x 32 -> 24 x 32: 3 rows x 4 tiles)', () => {
    const p = processImage(solid(30, 20, (x, y) => [x * 5, y * 7, 0]), TINY);
    expect([p.rows, p.cols, p.tiles.length]).toEqual([3, 4, 13]);
    expect(p.tiles.every((t) => t.length === 3 * 64)).toBe(true);
  });

  it('expands one <image> into the tile grid and the global image, exactly', () => {
    expect(imagePromptText(2, 1, 2)).toBe(
      '<fake_token_around_image><row_1_col_1><image><image>\n' +
        '<fake_token_around_image><row_2_col_1><image><image>\n' +
        '\n<fake_token_around_image><global-img><image><image><fake_token_around_image>',
    );
    expect(imagePromptText(0, 0, 3)).toBe('<fake_token_around_image><global-img><image><image><image><fake_token_around_image>');
  });

  it('reads its settings from an HF folder and from an mmproj GGUF', () => {
    // SmolVLM-256M: 512-px tiles of 16-px patches, pixel shuffle by 4: 64 tokens per tile.
    const hf = settingsFromHF(
      { image_processor_type: 'SmolVLMImageProcessor', size: { longest_edge: 2048 }, max_image_size: { longest_edge: 512 }, do_image_splitting: true, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5], rescale_factor: 1 / 255 },
      { model_type: 'smolvlm', scale_factor: 4, vision_config: { patch_size: 16, image_size: 512 } },
    );
    expect(hf).toEqual({ kind: 'idefics3', longestEdge: 2048, tileSize: 512, split: true, maxImageSize: 4096, rescale: 1 / 255, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], imageSeqLen: 64 });
    // Idefics3-8B: 364-px tiles of 14-px patches, shuffle by 2: 169.
    expect(settingsFromHF({ size: { longest_edge: 1456 }, max_image_size: { longest_edge: 364 } }, { model_type: 'idefics3', scale_factor: 2, vision_config: { patch_size: 14 } })).toMatchObject({ imageSeqLen: 169, maxImageSize: 1820 });
    const gguf = settingsFromGGUF(new Map<string, unknown>([['clip.vision.image_size', 512], ['clip.vision.patch_size', 16], ['clip.vision.projector.scale_factor', 4], ['clip.vision.preproc_image_size', 2048], ['clip.vision.image_mean', [0.5, 0.5, 0.5]], ['clip.vision.image_std', [0.5, 0.5, 0.5]]]));
    expect(gguf).toEqual(hf);
  });
});
