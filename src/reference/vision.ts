/**
 * The CPU reference of an Idefics3-style vision tower (SmolVLM): one tile's pixel values in, its
 * image-token embeddings out, as transformers' Idefics3VisionTransformer + Idefics3Connector and
 * llama.cpp's clip.cpp (projector "idefics3") compute them:
 *   patch embedding (a stride-p convolution with bias) + learned positions (0..N-1 for a whole tile)
 *   per layer: x += attn(LN1(x)) with bidirectional multi-head attention (biases, scale 1/sqrt(head dim));
 *              x += fc2(gelu_tanh(fc1(LN2(x))))
 *   post-LayerNorm, then the pixel shuffle and the bias-free projection.
 * Float32 buffers, float64 accumulation, as the text reference (forward.ts).
 */
import { geluTanhRef } from '../kernels/gelu';
import type { OpenedVisionTower } from '../model/vision-open';
import { patchesPerSide, towerTensors, type VisionTowerConfig } from '../vision/tower';

export type TowerWeights = ReadonlyMap<string, Float32Array>;

/** out(n, rows) = x(n, cols) · W(rows, cols)ᵀ + b */
function linear(x: Float32Array, n: number, cols: number, w: Float32Array, b: Float32Array | null, rows: number): Float32Array {
  const out = new Float32Array(n * rows);
  for (let t = 0; t < n; t++)
    for (let r = 0; r < rows; r++) {
      let s = b ? b[r]! : 0;
      for (let i = 0; i < cols; i++) s += x[t * cols + i]! * w[r * cols + i]!;
      out[t * rows + r] = s;
    }
  return out;
}

/** LayerNorm over each row of x (n, d): (x - mean) / sqrt(var + eps) · w + b, the biased variance. */
export function layerNorm(x: Float32Array, n: number, d: number, w: Float32Array, b: Float32Array, eps: number): Float32Array {
  const out = new Float32Array(n * d);
  for (let t = 0; t < n; t++) {
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[t * d + i]!;
    mean /= d;
    let v = 0;
    for (let i = 0; i < d; i++) v += (x[t * d + i]! - mean) ** 2;
    const inv = 1 / Math.sqrt(v / d + eps);
    for (let i = 0; i < d; i++) out[t * d + i] = (x[t * d + i]! - mean) * inv * w[i]! + b[i]!;
  }
  return out;
}

/**
 * Idefics3's pixel shuffle of a square grid of n × n tokens of d values: token (i, j) of the
 * (n/s) × (n/s) output is the s × s block at rows i·s.., columns j·s.., its tokens concatenated
 * row by row (transformers' view/permute/reshape sequence, worked through).
 */
export function pixelShuffle(x: Float32Array, n: number, d: number, s: number): Float32Array {
  const m = n / s;
  const out = new Float32Array(n * n * d);
  for (let i = 0; i < m; i++)
    for (let j = 0; j < m; j++)
      for (let dy = 0; dy < s; dy++)
        for (let dx = 0; dx < s; dx++) {
          const src = ((i * s + dy) * n + (j * s + dx)) * d;
          const dst = ((i * m + j) * s * s + dy * s + dx) * d;
          out.set(x.subarray(src, src + d), dst);
        }
  return out;
}

/** Bidirectional multi-head attention of n tokens: every token sees every token. */
function attention(q: Float32Array, k: Float32Array, v: Float32Array, n: number, heads: number, hd: number): Float32Array {
  const d = heads * hd;
  const out = new Float32Array(n * d);
  const scale = 1 / Math.sqrt(hd);
  const s = new Float64Array(n);
  for (let h = 0; h < heads; h++)
    for (let t = 0; t < n; t++) {
      let max = -Infinity;
      for (let u = 0; u < n; u++) {
        let dot = 0;
        for (let i = 0; i < hd; i++) dot += q[t * d + h * hd + i]! * k[u * d + h * hd + i]!;
        s[u] = dot * scale;
        if (s[u]! > max) max = s[u]!;
      }
      let sum = 0;
      for (let u = 0; u < n; u++) sum += s[u] = Math.exp(s[u]! - max);
      for (let i = 0; i < hd; i++) {
        let acc = 0;
        for (let u = 0; u < n; u++) acc += s[u]! * v[u * d + h * hd + i]!;
        out[t * d + h * hd + i] = acc / sum;
      }
    }
  return out;
}

export class ReferenceVisionTower {
  private constructor(
    readonly config: VisionTowerConfig,
    private readonly w: TowerWeights,
  ) {}

  /** Reads (and dequantises) every tensor of an opened tower (an mmproj GGUF or an HF folder's). */
  static async load(opened: OpenedVisionTower): Promise<ReferenceVisionTower> {
    const weights = new Map<string, Float32Array>();
    for (const t of towerTensors(opened.config)) weights.set(t.name, await opened.readTensorF32(t.name));
    return ReferenceVisionTower.fromWeights(opened.config, weights);
  }

  /** Checks every tensor of the tower is there with its size. */
  static fromWeights(config: VisionTowerConfig, weights: TowerWeights): ReferenceVisionTower {
    for (const t of towerTensors(config)) {
      const got = weights.get(t.name);
      const size = t.shape.reduce((a, b) => a * b, 1);
      if (!got || got.length !== size) throw new Error(`vision tower: ${t.name} should hold ${size} values (${t.shape.join(' x ')}), got ${got?.length ?? 'none'}`);
    }
    return new ReferenceVisionTower(config, weights);
  }

  private t(name: string): Float32Array {
    return this.w.get(name)!;
  }

  /** The encoder's output for one tile (3 × imageSize × imageSize, channel-first): (patches, hiddenSize). */
  encode(pixels: Float32Array): Float32Array {
    const c = this.config;
    const { hiddenSize: d, patchSize: p, imageSize: size, numHeads } = c;
    const side = patchesPerSide(c);
    const n = side * side;
    if (pixels.length !== 3 * size * size) throw new RangeError(`a tile is 3 x ${size} x ${size} values, got ${pixels.length}`);

    // patch embedding: each p × p patch (row by row) through the convolution, plus its position
    const pw = this.t('v.patch_embd.weight');
    const pb = this.t('v.patch_embd.bias');
    const pos = this.t('v.position_embd.weight');
    const x = new Float32Array(n * d);
    for (let py = 0; py < side; py++)
      for (let px = 0; px < side; px++) {
        const tok = py * side + px;
        for (let o = 0; o < d; o++) {
          let s = pb[o]!;
          for (let ch = 0; ch < 3; ch++)
            for (let ky = 0; ky < p; ky++)
              for (let kx = 0; kx < p; kx++) s += pw[((o * 3 + ch) * p + ky) * p + kx]! * pixels[(ch * size + py * p + ky) * size + px * p + kx]!;
          x[tok * d + o] = s + pos[tok * d + o]!;
        }
      }

    for (let l = 0; l < c.numLayers; l++) {
      const b = (g: string) => this.t(`v.blk.${l}.${g}`);
      // attention block (pre-LN), bidirectional
      const h = layerNorm(x, n, d, b('ln1.weight'), b('ln1.bias'), c.layerNormEps);
      const q = linear(h, n, d, b('attn_q.weight'), b('attn_q.bias'), d);
      const k = linear(h, n, d, b('attn_k.weight'), b('attn_k.bias'), d);
      const v = linear(h, n, d, b('attn_v.weight'), b('attn_v.bias'), d);
      const a = linear(attention(q, k, v, n, numHeads, d / numHeads), n, d, b('attn_out.weight'), b('attn_out.bias'), d);
      for (let i = 0; i < x.length; i++) x[i] += a[i]!;
      // MLP block (pre-LN): fc1, GELU-tanh, fc2
      const h2 = layerNorm(x, n, d, b('ln2.weight'), b('ln2.bias'), c.layerNormEps);
      const up = linear(h2, n, d, b('ffn_up.weight'), b('ffn_up.bias'), c.intermediateSize);
      const down = linear(geluTanhRef(up), n, c.intermediateSize, b('ffn_down.weight'), b('ffn_down.bias'), d);
      for (let i = 0; i < x.length; i++) x[i] += down[i]!;
    }
    return layerNorm(x, n, d, this.t('v.post_ln.weight'), this.t('v.post_ln.bias'), c.layerNormEps);
  }

  /** One tile's image-token embeddings: (tokensPerTile, projectionDim). */
  embedTile(pixels: Float32Array): Float32Array {
    const c = this.config;
    const side = patchesPerSide(c);
    const s = c.scaleFactor;
    const shuffled = pixelShuffle(this.encode(pixels), side, c.hiddenSize, s);
    return linear(shuffled, (side / s) ** 2, c.hiddenSize * s * s, this.t('mm.model.fc.weight'), null, c.projectionDim);
  }
}
