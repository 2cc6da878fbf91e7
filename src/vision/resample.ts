/**
 * Pillow's `Image.resize(size, Image.LANCZOS)` on 8-bit RGB, which transformers' Idefics3 processor
 * calls: a separable Lanczos-3 (support 3 × the downscale factor), horizontal pass first, each
 * pass rounding to 8 bits. The same arithmetic as Pillow's Resample.c: per output pixel the
 * window [center - support + 0.5, center + support + 0.5) truncated to ints and clipped to the
 * image, weights normalised to sum 1 then made 22-bit fixed point (rounded half away from zero),
 * each sum started at half a unit and clipped to 0..255. Bit-exact with Pillow wherever JS's
 * Math.sin agrees with the C library's to the last bit (a differing bit can move one weight by one
 * fixed-point unit, and a pixel by at most 1).
 */
import type { RgbImage } from '../platform/decode-image';

const PRECISION_BITS = 32 - 8 - 2;
const SUPPORT = 3;

function sinc(x: number): number {
  if (x === 0) return 1;
  x *= Math.PI;
  return Math.sin(x) / x;
}

function lanczos(x: number): number {
  return x >= -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0;
}

/** One axis' windows: for output i, inputs bounds[2i] .. +bounds[2i+1], weights at kk[i*ksize ..]. */
interface Coeffs {
  ksize: number;
  bounds: Int32Array;
  kk: Int32Array;
}

function coefficients(inSize: number, outSize: number): Coeffs {
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = SUPPORT * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const kk = new Int32Array(outSize * ksize);
  const w = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1 / filterscale;
    // C's (int) cast truncates toward zero.
    const xmin = Math.max(Math.trunc(center - support + 0.5), 0);
    const xmax = Math.min(Math.trunc(center + support + 0.5), inSize) - xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      w[x] = lanczos((x + xmin - center + 0.5) * ss);
      ww += w[x]!;
    }
    for (let x = 0; x < xmax; x++) {
      const k = ww !== 0 ? w[x]! / ww : w[x]!;
      const f = k * (1 << PRECISION_BITS);
      kk[xx * ksize + x] = f < 0 ? Math.trunc(-0.5 + f) : Math.trunc(0.5 + f);
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  return { ksize, bounds, kk };
}

function clip8(v: number): number {
  if (v >= 1 << PRECISION_BITS << 8) return 255;
  if (v <= 0) return 0;
  return v >> PRECISION_BITS;
}

/**
 * One pass along an axis: `stride` bytes between neighbouring inputs along it, `lines` lines of
 * `len` pixels across it. The sums fit in doubles exactly (255 × 2^22 × a few dozen taps < 2^53)
 * and stay within int32 before clipping, as in Pillow.
 */
function pass(src: Uint8Array, w: number, h: number, outW: number, outH: number, horizontal: boolean): Uint8Array {
  const c = horizontal ? coefficients(w, outW) : coefficients(h, outH);
  const out = new Uint8Array(outW * outH * 3);
  const half = 1 << (PRECISION_BITS - 1);
  for (let y = 0; y < outH; y++) {
    for (let x = 0; x < outW; x++) {
      const i = horizontal ? x : y;
      const min = c.bounds[i * 2]!;
      const n = c.bounds[i * 2 + 1]!;
      const k0 = i * c.ksize;
      let r = half;
      let g = half;
      let b = half;
      for (let t = 0; t < n; t++) {
        const p = horizontal ? (y * w + min + t) * 3 : ((min + t) * w + x) * 3;
        const k = c.kk[k0 + t]!;
        r += src[p]! * k;
        g += src[p + 1]! * k;
        b += src[p + 2]! * k;
      }
      const o = (y * outW + x) * 3;
      out[o] = clip8(r);
      out[o + 1] = clip8(g);
      out[o + 2] = clip8(b);
    }
  }
  return out;
}

/** Pillow's LANCZOS resize of an RGB image to `width` × `height` (the image itself when the size is unchanged). */
export function resizeLanczos(img: RgbImage, width: number, height: number): RgbImage {
  let data = img.data;
  let w = img.width;
  if (width !== w) {
    data = pass(data, w, img.height, width, img.height, true);
    w = width;
  }
  if (height !== img.height) data = pass(data, w, img.height, w, height, false);
  return { width, height, data };
}
