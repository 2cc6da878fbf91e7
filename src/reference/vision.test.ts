import { describe, expect, it } from 'vitest';
import { towerConfigFromGGUF, towerConfigFromHF, towerTensors, tokensPerTile, type VisionTowerConfig } from '../vision/tower';
import { geluTanhRef } from '../kernels/gelu';
import { layerNorm, pixelShuffle, ReferenceVisionTower } from './vision';

/** transformers' Idefics3Connector.pixel_shuffle, step by step on flat row-major arrays (view, permute(0, 2, 1, 3), reshape, permute, reshape). */
function hfPixelShuffle(x: Float32Array, n: number, d: number, s: number): Float32Array {
  // (H, W/s, D·s) -> permute -> (W/s, H, D·s)
  const a = new Float32Array(x.length);
  const [H, W2, C] = [n, n / s, d * s];
  for (let h = 0; h < H; h++) for (let w = 0; w < W2; w++) for (let c = 0; c < C; c++) a[(w * H + h) * C + c] = x[(h * W2 + w) * C + c]!;
  // reshape to (W/s, H/s, D·s²) -> permute -> (H/s, W/s, D·s²)
  const b = new Float32Array(x.length);
  const [H2, C2] = [n / s, d * s * s];
  for (let w = 0; w < W2; w++) for (let h = 0; h < H2; h++) for (let c = 0; c < C2; c++) b[(h * W2 + w) * C2 + c] = a[(w * H2 + h) * C2 + c]!;
  return b;
}

const seeded = (seed: number) => () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;

function tinyTower(c: VisionTowerConfig, seed = 1, fill?: (name: string, i: number) => number) {
  const rand = seeded(seed);
  const w = new Map<string, Float32Array>();
  for (const t of towerTensors(c)) {
    const size = t.shape.reduce((a, b) => a * b, 1);
    w.set(t.name, Float32Array.from({ length: size }, (_, i) => fill?.(t.name, i) ?? (t.name.endsWith('ln1.weight') || t.name.endsWith('ln2.weight') || t.name === 'v.post_ln.weight' ? 1 + 0.1 * rand() : 0.3 * rand())));
  }
  return w;
}

const TINY: VisionTowerConfig = { projector: 'idefics3', imageSize: 8, patchSize: 2, hiddenSize: 8, intermediateSize: 16, numLayers: 1, numHeads: 2, layerNormEps: 1e-6, scaleFactor: 2, projectionDim: 6 };

describe('the vision tower reference (SigLIP encoder + Idefics3 connector)', () => {
  it("pixel-shuffles in Idefics3's channel order: each s x s block's tokens row by row", () => {
    const x = Float32Array.from({ length: 16 }, (_, i) => i); // 4 x 4 tokens of 1 value
    expect([...pixelShuffle(x, 4, 1, 2)]).toEqual([0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]);
    const y = Float32Array.from({ length: 8 * 8 * 3 }, (_, i) => i);
    expect(pixelShuffle(y, 8, 3, 2)).toEqual(hfPixelShuffle(y, 8, 3, 2));
    expect(pixelShuffle(y.subarray(0, 4 * 4 * 12), 4, 12, 4)).toEqual(hfPixelShuffle(y.subarray(0, 4 * 4 * 12), 4, 12, 4));
  });

  it('computes LayerNorm with the biased variance and GELU by its tanh form', () => {
    const ln = layerNorm(Float32Array.from([1, 2, 3, 4]), 1, 4, Float32Array.from([1, 1, 1, 1]), Float32Array.from([0, 0, 0, 0]), 0);
    [-1.3416408, -0.4472136, 0.4472136, 1.3416408].forEach((v, i) => expect(ln[i]).toBeCloseTo(v, 6));
    expect(geluTanhRef(Float32Array.of(1))[0]).toBeCloseTo(0.841192, 6); // torch.nn.functional.gelu(1.0, approximate='tanh')
    expect(geluTanhRef(Float32Array.of(-3))[0]).toBeCloseTo(-0.0036373, 6);
  });

  it('embeds patches row by row from channel-first pixels, adds learned positions, then the post-LayerNorm', () => {
    // No layers; the convolution sums channel o of its patch into output o (o < 3), 0 elsewhere.
    const c = { ...TINY, numLayers: 0, hiddenSize: 4, imageSize: 4 };
    const w = tinyTower(c, 1, (name, i) => {
      if (name === 'v.patch_embd.weight') return Math.floor(i / 4) % 3 === Math.floor(i / 12) && i < 36 ? 1 : 0; // [o][ch][2][2]
      if (name === 'v.position_embd.weight') return i; // token t, channel o: 4t + o
      if (name === 'v.post_ln.weight') return 1;
      return 0;
    });
    const pixels = Float32Array.from({ length: 3 * 16 }, (_, i) => (i % 16) / 16 + Math.floor(i / 16)); // channel ch, pixel (y, x): ch + (4y + x)/16
    const out = ReferenceVisionTower.fromWeights(c, w).encode(pixels);
    // token 1 = patch row 0, column 1: pixels (0,2) (0,3) (1,2) (1,3) -> 2+3+6+7 = 18 sixteenths per channel, plus 4·ch
    const raw = [0, 1, 2, 3].map((o) => (o < 3 ? 18 / 16 + 4 * o : 0) + 4 + o);
    const mean = raw.reduce((a, b) => a + b) / 4;
    const sd = Math.sqrt(raw.reduce((a, b) => a + (b - mean) ** 2, 0) / 4 + 1e-6);
    [...out.subarray(4, 8)].forEach((v, o) => expect(v).toBeCloseTo((raw[o]! - mean) / sd, 5));
  });

  it('attends bidirectionally: the first token sees a change in the last patch', () => {
    const pixels = Float32Array.from({ length: 3 * 64 }, (_, i) => Math.sin(i));
    const changed = pixels.slice();
    changed[63] += 1; // channel 0, the last pixel: only the last patch
    const first = (c: VisionTowerConfig, p: Float32Array) => ReferenceVisionTower.fromWeights(c, tinyTower(c)).encode(p).subarray(0, 8);
    expect(first(TINY, changed)).not.toEqual(first(TINY, pixels));
    expect(first({ ...TINY, numLayers: 0 }, changed)).toEqual(first({ ...TINY, numLayers: 0 }, pixels)); // no attention, no reach
  });

  it('projects the shuffled tokens without a bias: (tokens per tile, text hidden size)', () => {
    const c = { ...TINY, projectionDim: 32 };
    const w = tinyTower(c);
    const tower = ReferenceVisionTower.fromWeights(c, w);
    const pixels = Float32Array.from({ length: 3 * 64 }, (_, i) => Math.cos(i));
    // An identity projection shows the shuffled encoder output itself.
    w.set('mm.model.fc.weight', Float32Array.from({ length: 32 * 32 }, (_, i) => (i % 33 === 0 ? 1 : 0)));
    const out = tower.embedTile(pixels);
    expect(out.length).toBe(tokensPerTile(c) * 32);
    const shuffled = pixelShuffle(tower.encode(pixels), 4, 8, 2);
    [...out].forEach((v, i) => expect(v).toBeCloseTo(shuffled[i]!, 6));
  });

  it('reads its shape from an mmproj GGUF and an HF config alike', () => {
    // SmolVLM-256M's tower: 12 layers of 768, 512-px tiles of 16-px patches, shuffle 4, into 576.
    const meta: Record<string, unknown> = {
      'clip.projector_type': 'idefics3', 'clip.vision.image_size': 512, 'clip.vision.patch_size': 16, 'clip.vision.embedding_length': 768,
      'clip.vision.feed_forward_length': 3072, 'clip.vision.block_count': 12, 'clip.vision.attention.head_count': 12,
      'clip.vision.attention.layer_norm_epsilon': 1e-6, 'clip.vision.projector.scale_factor': 4, 'clip.vision.projection_dim': 576,
    };
    const g = towerConfigFromGGUF((k) => meta[k])!;
    const h = towerConfigFromHF({
      model_type: 'idefics3', scale_factor: 4, text_config: { hidden_size: 576 },
      vision_config: { image_size: 512, patch_size: 16, hidden_size: 768, intermediate_size: 3072, num_hidden_layers: 12, num_attention_heads: 12, layer_norm_eps: 1e-6 },
    })!;
    expect(g).toEqual(h);
    expect(tokensPerTile(g)).toBe(64);
    expect(towerConfigFromGGUF((k) => (k === 'clip.projector_type' ? 'gemma3' : meta[k]))).toBeNull();
    expect(towerTensors(g).find((t) => t.name === 'mm.model.fc.weight')!.shape).toEqual([576, 768 * 16]);
  });
});
