/**
 * ggml's 4-bit types whose nibbles index a table of 16 values rather than a uniform grid,
 * byte-compatible with llama.cpp. Nibbles pack as Q4_0's: in each 32-element block, byte j holds
 * element j in its low nibble and element j + 16 in its high nibble.
 *
 *   IQ4_NL (18 bytes per 32): f16 d, 16 bytes of nibbles; value = d * IQ4NL_VALUES[q].
 *   IQ4_XS (136 bytes per 256): f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles (8
 *     blocks of 32, each laid out as IQ4_NL's). Block ib's 6-bit scale ls has its low 4 bits in
 *     scales_l[ib / 2] (low nibble for even ib) and its top 2 at bits 2ib of scales_h;
 *     value = d * (ls - 32) * IQ4NL_VALUES[q].
 *   MXFP4 (17 bytes per 32): one E8M0 byte e, 16 bytes of nibbles; each nibble is an FP4 E2M1
 *     number (sign bit 3) and value = MXFP4_VALUES[q] * 2^(e - 128), the table holding twice the
 *     E2M1 values so that it stays integral (ggml's GGML_E8M0_TO_FP32_HALF).
 *
 * The quantisers follow ggml's reference ones (IQ4: quantize_row_iq4_nl_impl without an
 * importance matrix, a ±7 search over the scale; MXFP4: quantize_row_mxfp4_ref), computing in f32.
 */
import { readF16, writeF16 } from './quants-legacy';

const f32 = Math.fround;

/** ggml's kvalues_iq4nl: the non-linear 4-bit grid of IQ4_NL and IQ4_XS. */
export const IQ4NL_VALUES: readonly number[] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/** ggml's kvalues_mxfp4: E2M1's values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives). */
export const MXFP4_VALUES: readonly number[] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/** ggml's nearest_int: round to nearest, halves to even (the float magic-number trick). */
function nearestEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * Index of the IQ4 grid value nearest x, ties to the upper one, as ggml's best_index_int8 picks
 * it. The midpoints between neighbours are multiples of 0.5, so floor(2x) decides exactly: one
 * table read instead of a binary search (the quantiser's inner loop runs it 16 times per weight).
 */
function nearestIQ4(x: number): number {
  const k = Math.floor(2 * x);
  return IQ4_BY_HALF[k < -256 ? 0 : k > 256 ? 512 : k + 256]!;
}

/** nearestIQ4's table: for k = floor(2x) in -256..256, how many midpoints m have 2m <= k. */
const IQ4_BY_HALF = Uint8Array.from({ length: 513 }, (_, i) => {
  let n = 0;
  for (let j = 1; j < 16; j++) if (IQ4NL_VALUES[j - 1]! + IQ4NL_VALUES[j]! <= i - 256) n++;
  return n;
});

/** Packs 32 indices as Q4_0's nibbles: element j low, j + 16 high, in byte j. */
function packNibbles(L: Uint8Array, from: number, out: Uint8Array, at: number): void {
  for (let j = 0; j < 16; j++) out[at + j] = L[from + j]! | (L[from + j + 16]! << 4);
}

/**
 * The best scale for one 32-element block against the IQ4_NL grid: the block's extreme value
 * first maps to the grid's end, then 15 nearby scales are tried and the one minimising the
 * x²-weighted squared error wins (the least-squares scale for its indices). 0 for a zero block.
 */
function iq4BlockScale(x: Float32Array, src: number): number {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < 32; j++) {
    const v = x[src + j]!;
    if (Math.abs(v) > amax) {
      amax = Math.abs(v);
      max = v;
    }
  }
  if (amax < 1e-15) return 0; // ggml's GROUP_MAX_EPS
  const v0 = IQ4NL_VALUES[0]!;
  iq4Fit(x, src, f32(1 / f32(-max / v0)));
  let d = f32(fitSums[0]! / fitSums[1]!);
  let best = f32(d * fitSums[0]!);
  for (let t = -7; t <= 7; t++) {
    iq4Fit(x, src, f32((t + v0) / max));
    const sumqx = fitSums[0]!;
    const sumq2 = fitSums[1]!;
    if (sumq2 > 0 && f32(sumqx * sumqx) > f32(best * sumq2)) {
      d = f32(sumqx / sumq2);
      best = f32(d * sumqx);
    }
  }
  return d;
}

/** iq4Fit's result: sum of w·q·x and of w·q² over the block, w = x² (no importance matrix). */
const fitSums = new Float64Array(2);

/** The block's indices at inverse scale `id`, and the sums the least-squares scale needs. */
function iq4Fit(x: Float32Array, src: number, id: number): void {
  let sumqx = 0;
  let sumq2 = 0;
  for (let j = src; j < src + 32; j++) {
    const v = x[j]!;
    const k = Math.floor(2 * f32(id * v));
    const q = IQ4NL_VALUES[IQ4_BY_HALF[k < -256 ? 0 : k > 256 ? 512 : k + 256]!]!;
    const wq = f32(f32(v * v) * q);
    sumqx = f32(sumqx + f32(wq * v));
    sumq2 = f32(sumq2 + f32(wq * q));
  }
  fitSums[0] = sumqx;
  fitSums[1] = sumq2;
}

export function quantizeIQ4_NL(x: Float32Array, out: Uint8Array): void {
  const L = new Uint8Array(32);
  for (let src = 0, dst = 0; src < x.length; src += 32, dst += 18) {
    const d = iq4BlockScale(x, src);
    writeF16(out, dst, d);
    // Indices against the scale before f16 rounding, as ggml picks them.
    const id = d !== 0 ? f32(1 / d) : 0;
    for (let j = 0; j < 32; j++) L[j] = nearestIQ4(f32(id * x[src + j]!));
    packNibbles(L, 0, out, dst + 2);
  }
}

export function dequantizeIQ4_NL(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 18, dst += 32) {
    const d = readF16(bytes, src);
    for (let j = 0; j < 16; j++) {
      const q = bytes[src + 2 + j]!;
      y[dst + j] = d * IQ4NL_VALUES[q & 0xf]!;
      y[dst + j + 16] = d * IQ4NL_VALUES[q >> 4]!;
    }
  }
}

export function quantizeIQ4_XS(x: Float32Array, out: Uint8Array): void {
  const scales = new Float64Array(8);
  const L = new Uint8Array(256);
  for (let src = 0, dst = 0; src < x.length; src += 256, dst += 136) {
    // Each block's own best scale; the one of largest magnitude maps to -32, the 6-bit minimum.
    let maxScale = 0;
    for (let ib = 0; ib < 8; ib++) {
      scales[ib] = iq4BlockScale(x, src + 32 * ib);
      if (Math.abs(scales[ib]!) > Math.abs(maxScale)) maxScale = scales[ib]!;
    }
    const d = f32(-maxScale / 32);
    writeF16(out, dst, d);
    const id = d !== 0 ? f32(1 / d) : 0;
    let scalesH = 0;
    out.fill(0, dst + 4, dst + 8);
    for (let ib = 0; ib < 8; ib++) {
      const l = Math.max(-32, Math.min(31, nearestEven(f32(id * scales[ib]!))));
      const dl = f32(d * l);
      const idl = dl !== 0 ? f32(1 / dl) : 0;
      for (let j = 0; j < 32; j++) L[32 * ib + j] = nearestIQ4(f32(idl * x[src + 32 * ib + j]!));
      const u = l + 32;
      out[dst + 4 + (ib >> 1)] |= (u & 0xf) << (4 * (ib & 1));
      scalesH |= (u >> 4) << (2 * ib);
    }
    out[dst + 2] = scalesH & 0xff;
    out[dst + 3] = scalesH >> 8;
    for (let ib = 0; ib < 8; ib++) packNibbles(L, 32 * ib, out, dst + 8 + 16 * ib);
  }
}

export function dequantizeIQ4_XS(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 136, dst += 256) {
    const d = readF16(bytes, src);
    const scalesH = bytes[src + 2]! | (bytes[src + 3]! << 8);
    for (let ib = 0; ib < 8; ib++) {
      const ls = ((bytes[src + 4 + (ib >> 1)]! >> (4 * (ib & 1))) & 0xf) | (((scalesH >> (2 * ib)) & 3) << 4);
      const dl = d * (ls - 32);
      for (let j = 0; j < 16; j++) {
        const q = bytes[src + 8 + 16 * ib + j]!;
        y[dst + 32 * ib + j] = dl * IQ4NL_VALUES[q & 0xf]!;
        y[dst + 32 * ib + j + 16] = dl * IQ4NL_VALUES[q >> 4]!;
      }
    }
  }
}

/** Half the power of two an E8M0 byte encodes, 2^(e - 128), exact in f32 (e = 0, 1 subnormal). */
export function e8m0Half(e: number): number {
  return 2 ** (e - 128);
}

/** Midpoints between neighbouring E2M1 magnitudes (doubled, as MXFP4_VALUES' first half). */
const MXFP4_MIDS = [0.5, 1.5, 2.5, 3.5, 5, 7, 10];

/**
 * The nearest table index to x at scale d, as ggml's best_index_mxfp4 (a scan for the least
 * |value·d - x|, the first on ties) picks it: d is a power of two, so |x| / d is exact and the
 * scan's differences between neighbours are too; the first on a tie is the smaller magnitude, and
 * zero is the positive 0 (index 0) whatever x's sign.
 */
function nearestMXFP4(x: number, d: number): number {
  const m = Math.abs(x) / d;
  let k = 0;
  while (k < 7 && m > MXFP4_MIDS[k]!) k++;
  return x < 0 && k > 0 ? k + 8 : k;
}

export function quantizeMXFP4(x: Float32Array, out: Uint8Array): void {
  for (let src = 0, dst = 0; src < x.length; src += 32, dst += 17) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[src + j]!));
    // The shared exponent puts the block's largest power of two at E2M1's 4 (its table's 8).
    const e = amax > 0 ? (Math.floor(f32(Math.log2(amax))) - 2 + 127) & 0xff : 0; // log2f's f32 result
    const d = e8m0Half(e);
    out[dst] = e;
    for (let j = 0; j < 16; j++) out[dst + 1 + j] = nearestMXFP4(x[src + j]!, d) | (nearestMXFP4(x[src + j + 16]!, d) << 4);
  }
}

export function dequantizeMXFP4(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 17, dst += 32) {
    const d = e8m0Half(bytes[src]!);
    for (let j = 0; j < 16; j++) {
      const q = bytes[src + 1 + j]!;
      y[dst + j] = d * MXFP4_VALUES[q & 0xf]!;
      y[dst + j + 16] = d * MXFP4_VALUES[q >> 4]!;
    }
  }
}
