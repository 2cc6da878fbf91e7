/**
 * ggml's K-quant super-blocks of 256 elements, byte-compatible with llama.cpp.
 *
 * Q4_K (144 bytes): f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32,
 *   128 bytes of nibbles. value = d * sc[j] * q - dmin * m[j] for sub-block j.
 *   Nibbles: 32-byte chunk c of qs holds sub-block 2c in its low nibbles and 2c+1 in its high ones.
 * Q5_K (176 bytes): f16 d, f16 dmin, 12 bytes of scales and mins as Q4_K's, 32 bytes qh, 128 bytes
 *   of nibbles as Q4_K's. Element l of sub-block j (l < 32) has bit 4 = bit j of qh[l].
 *   value = d * sc[j] * q - dmin * m[j], q in 0..31.
 * Q6_K (210 bytes): 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales (one per
 *   16 elements), f16 d. value = d * scales[j] * (q - 32).
 *   Each 128-element half n uses ql[64n..64n+64] and qh[32n..32n+32]; its quarter k (32 elements,
 *   index l) takes ql[64n + 32(k&1) + l] (low nibble for k < 2, high for k >= 2) and bits 2k..2k+1
 *   of qh[32n + l].
 *
 * The quantisers are simple (min/max per sub-block, no iterative search like llama.cpp's
 * make_qkx2_quants / make_qkx3_quants), so they make valid blocks with somewhat more error than llama.cpp's.
 */
import { readF16, roundAway, writeF16 } from './quants-legacy';

export const QK_K = 256;

const clamp = (v: number, lo: number, hi: number): number => (v < lo ? lo : v > hi ? hi : v);

/**
 * Packs 8 six-bit scales and 8 six-bit mins into ggml's 12 bytes: entries 0..3 sit whole in the
 * low 6 bits of bytes 0..3 (scales) and 4..7 (mins); entries 4..7 keep their low 4 bits in bytes
 * 8..11 (scale low nibble, min high nibble) and their top 2 bits in the spare top bits of 0..7.
 */
export function packScalesMinsK4(sc: ArrayLike<number>, m: ArrayLike<number>, out: Uint8Array, at = 0): void {
  for (let j = 0; j < 4; j++) {
    out[at + j] = (sc[j]! & 63) | ((sc[j + 4]! >> 4) << 6);
    out[at + j + 4] = (m[j]! & 63) | ((m[j + 4]! >> 4) << 6);
    out[at + j + 8] = (sc[j + 4]! & 0xf) | ((m[j + 4]! & 0xf) << 4);
  }
}

/** Inverse of packScalesMinsK4 (ggml's get_scale_min_k4 for all 8 sub-blocks). */
export function unpackScalesMinsK4(bytes: Uint8Array, at: number, sc: Uint8Array, m: Uint8Array): void {
  for (let j = 0; j < 4; j++) {
    sc[j] = bytes[at + j]! & 63;
    m[j] = bytes[at + j + 4]! & 63;
    sc[j + 4] = (bytes[at + j + 8]! & 0xf) | ((bytes[at + j]! >> 6) << 4);
    m[j + 4] = (bytes[at + j + 8]! >> 4) | ((bytes[at + j + 4]! >> 6) << 4);
  }
}

/**
 * Q4_K and Q5_K (`bits` 4 or 5): per 32-element sub-block an affine map of [min, max] onto
 * 0..2^bits - 1, with min <= 0 (the format stores -min); the super-block's d and dmin quantise
 * the sub-block scales and mins to 6 bits. Q5_K puts its 32 bytes of fifth bits (qh) between the
 * scales and the nibbles: bit j of qh[l] is bit 4 of element l of sub-block j.
 */
function quantizeAffineK(x: Float32Array, out: Uint8Array, bits: 4 | 5): void {
  const qmax = (1 << bits) - 1;
  const blockBytes = bits === 4 ? 144 : 176;
  const scale = new Float64Array(8);
  const minv = new Float64Array(8);
  const sc = new Uint8Array(8);
  const m = new Uint8Array(8);
  for (let src = 0, dst = 0; src < x.length; src += QK_K, dst += blockBytes) {
    let maxScale = 0;
    let maxMin = 0;
    for (let j = 0; j < 8; j++) {
      let lo = 0;
      let hi = -Infinity;
      for (let i = 0; i < 32; i++) {
        const v = x[src + 32 * j + i]!;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      scale[j] = Math.max(0, hi - lo) / qmax;
      minv[j] = -lo;
      maxScale = Math.max(maxScale, scale[j]!);
      maxMin = Math.max(maxMin, minv[j]!);
    }
    const d = writeF16(out, dst, maxScale / 63);
    const dmin = writeF16(out, dst + 2, maxMin / 63);
    for (let j = 0; j < 8; j++) {
      sc[j] = d > 0 ? clamp(roundAway(scale[j]! / d), 0, 63) : 0;
      m[j] = dmin > 0 ? clamp(roundAway(minv[j]! / dmin), 0, 63) : 0;
    }
    packScalesMinsK4(sc, m, out, dst + 4);
    const qh = dst + 16;
    const qs = bits === 4 ? qh : qh + 32;
    if (bits === 5) out.fill(0, qh, qh + 32); // filled by OR-ing bits
    for (let j = 0; j < 8; j++) {
      const step = d * sc[j]!;
      const offset = dmin * m[j]!;
      const inv = step > 0 ? 1 / step : 0;
      const byte0 = qs + 32 * (j >> 1);
      const shift = (j & 1) * 4;
      for (let i = 0; i < 32; i++) {
        const q = clamp(roundAway((x[src + 32 * j + i]! + offset) * inv), 0, qmax);
        out[byte0 + i] = shift === 0 ? q & 0xf : out[byte0 + i]! | ((q & 0xf) << 4);
        if (bits === 5) out[qh + i] |= (q >> 4) << j;
      }
    }
  }
}

/** Inverse of quantizeAffineK: value = d * sc[j] * q - dmin * m[j] for sub-block j. */
function dequantizeAffineK(bytes: Uint8Array, y: Float32Array, bits: 4 | 5): void {
  const blockBytes = bits === 4 ? 144 : 176;
  const sc = new Uint8Array(8);
  const m = new Uint8Array(8);
  for (let src = 0, dst = 0; dst < y.length; src += blockBytes, dst += QK_K) {
    const d = readF16(bytes, src);
    const dmin = readF16(bytes, src + 2);
    unpackScalesMinsK4(bytes, src + 4, sc, m);
    const qh = src + 16;
    const qs = bits === 4 ? qh : qh + 32;
    for (let c = 0; c < 4; c++) {
      const d1 = d * sc[2 * c]!, m1 = dmin * m[2 * c]!;
      const d2 = d * sc[2 * c + 1]!, m2 = dmin * m[2 * c + 1]!;
      for (let l = 0; l < 32; l++) {
        const q = bytes[qs + 32 * c + l]!;
        const h = bits === 4 ? 0 : bytes[qh + l]! >> (2 * c); // bit 0: sub-block 2c, bit 1: 2c + 1
        y[dst + 64 * c + l] = d1 * ((q & 0xf) | ((h & 1) << 4)) - m1;
        y[dst + 64 * c + 32 + l] = d2 * ((q >> 4) | ((h & 2) << 3)) - m2;
      }
    }
  }
}

export const quantizeQ4_K = (x: Float32Array, out: Uint8Array): void => quantizeAffineK(x, out, 4);
export const dequantizeQ4_K = (bytes: Uint8Array, y: Float32Array): void => dequantizeAffineK(bytes, y, 4);
export const quantizeQ5_K = (x: Float32Array, out: Uint8Array): void => quantizeAffineK(x, out, 5);
export const dequantizeQ5_K = (bytes: Uint8Array, y: Float32Array): void => dequantizeAffineK(bytes, y, 5);

/**
 * Q6_K's and Q3_K's symmetric scales: per 16 elements from `src`, the value of largest magnitude
 * maps to `qmin` (as ggml does). Fills `scale` and returns the one of largest magnitude.
 */
function symmetricScales16(x: Float32Array, src: number, qmin: number, scale: Float64Array): number {
  let maxScale = 0;
  for (let j = 0; j < 16; j++) {
    let big = 0;
    for (let i = 0; i < 16; i++) {
      const v = x[src + 16 * j + i]!;
      if (Math.abs(v) > Math.abs(big)) big = v;
    }
    scale[j] = big / qmin;
    if (Math.abs(scale[j]!) > Math.abs(maxScale)) maxScale = scale[j]!;
  }
  return maxScale;
}

export function quantizeQ6_K(x: Float32Array, out: Uint8Array): void {
  const scale = new Float64Array(16);
  for (let src = 0, dst = 0; src < x.length; src += QK_K, dst += 210) {
    const maxScale = symmetricScales16(x, src, -32, scale);
    // The largest scale maps to -128, the int8 minimum, like ggml's quantize_row_q6_K_ref.
    const ql = dst, qh = dst + 128, scales = dst + 192;
    const d = writeF16(out, dst + 208, maxScale / -128);
    out.fill(0, qh, qh + 64); // qh is filled by OR-ing 2-bit fields
    for (let j = 0; j < 16; j++) {
      const s = d !== 0 ? clamp(roundAway(scale[j]! / d), -128, 127) : 0;
      out[scales + j] = s & 0xff;
      const step = d * s;
      const inv = step !== 0 ? 1 / step : 0;
      for (let i = 0; i < 16; i++) {
        const e = 16 * j + i; // element within the super-block
        const q = clamp(roundAway(x[src + e]! * inv), -32, 31) + 32;
        const n = e >> 7, k = (e >> 5) & 3, l = e & 31;
        const lo = ql + 64 * n + 32 * (k & 1) + l;
        out[lo] = k < 2 ? (out[lo]! & 0xf0) | (q & 0xf) : (out[lo]! & 0x0f) | ((q & 0xf) << 4);
        out[qh + 32 * n + l] |= (q >> 4) << (2 * k);
      }
    }
  }
}

export function dequantizeQ6_K(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 210, dst += QK_K) {
    const d = readF16(bytes, src + 208);
    for (let n = 0; n < 2; n++) {
      const ql = src + 64 * n, qh = src + 128 + 32 * n, sc = src + 192 + 8 * n;
      const base = dst + 128 * n;
      for (let l = 0; l < 32; l++) {
        const h = bytes[qh + l]!;
        const a = bytes[ql + l]!, b = bytes[ql + 32 + l]!;
        const s = (l >> 4) + sc; // sub-blocks of 16: quarter k uses scales[8n + 2k + l/16]
        y[base + l] = d * ((bytes[s]! << 24) >> 24) * (((a & 0xf) | ((h & 3) << 4)) - 32);
        y[base + 32 + l] = d * ((bytes[s + 2]! << 24) >> 24) * (((b & 0xf) | (((h >> 2) & 3) << 4)) - 32);
        y[base + 64 + l] = d * ((bytes[s + 4]! << 24) >> 24) * (((a >> 4) | (((h >> 4) & 3) << 4)) - 32);
        y[base + 96 + l] = d * ((bytes[s + 6]! << 24) >> 24) * (((b >> 4) | (((h >> 6) & 3) << 4)) - 32);
      }
    }
  }
}

/*
 * Q2_K and Q3_K share their 2-bit field layout: element e = 128n + 32j + l (half n, quarter j,
 * l < 32) keeps its low 2 bits at bits 2j..2j+1 of qs[32n + l], and sub-block (of 16) e >> 4.
 *
 * Q2_K (84 bytes): 16 bytes scales (low nibble sc, high nibble m, per 16 elements), 64 bytes qs,
 *   f16 d, f16 dmin. value = d * sc * q - dmin * m, q in 0..3.
 * Q3_K (110 bytes): 32 bytes hmask (bit 4n + j of hmask[l] is bit 2 of element e's quant),
 *   64 bytes qs, 12 bytes of 16 six-bit scales, f16 d. value = d * (sc - 32) * (q - 4), q in 0..7.
 *   Scale s: low 4 bits in byte s % 8 (low nibble for s < 8, high for s >= 8), top 2 bits at
 *   bits 2(s / 4).. of byte 8 + s % 4.
 */

/** Byte and shift of element e's 2-bit field in qs (relative to qs). */
const qs2At = (e: number): number => 32 * (e >> 7) + (e & 31);
const qs2Shift = (e: number): number => 2 * ((e >> 5) & 3);

export function quantizeQ2_K(x: Float32Array, out: Uint8Array): void {
  const lo = new Float64Array(16);
  const need = new Float64Array(16);
  for (let src = 0, dst = 0; src < x.length; src += QK_K, dst += 84) {
    // Per 16 elements: an affine map onto 0..3. The mins (4-bit, -lo rounded up) are chosen
    // first, then each scale rounds up to cover [lo, hi] from its min, so nothing clamps.
    let maxMin = 0;
    for (let j = 0; j < 16; j++) {
      let a = 0;
      for (let i = 0; i < 16; i++) a = Math.min(a, x[src + 16 * j + i]!);
      lo[j] = -a;
      maxMin = Math.max(maxMin, -a);
    }
    const dmin = writeF16(out, dst + 82, maxMin / 15);
    let maxNeed = 0;
    for (let j = 0; j < 16; j++) {
      const m = dmin > 0 ? clamp(Math.ceil(lo[j]! / dmin), 0, 15) : 0;
      out[dst + j] = m << 4;
      let hi = 0;
      for (let i = 0; i < 16; i++) hi = Math.max(hi, x[src + 16 * j + i]! + dmin * m);
      need[j] = hi / 3;
      maxNeed = Math.max(maxNeed, need[j]!);
    }
    const d = writeF16(out, dst + 80, maxNeed / 15);
    out.fill(0, dst + 16, dst + 80);
    for (let j = 0; j < 16; j++) {
      const sc = d > 0 ? clamp(Math.ceil(need[j]! / d), 0, 15) : 0;
      out[dst + j] |= sc;
      const step = d * sc;
      const inv = step > 0 ? 1 / step : 0;
      const offset = dmin * (out[dst + j]! >> 4);
      for (let i = 0; i < 16; i++) {
        const e = 16 * j + i;
        const q = clamp(roundAway((x[src + e]! + offset) * inv), 0, 3);
        out[dst + 16 + qs2At(e)] |= q << qs2Shift(e);
      }
    }
  }
}

export function dequantizeQ2_K(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 84, dst += QK_K) {
    const d = readF16(bytes, src + 80);
    const dmin = readF16(bytes, src + 82);
    for (let e = 0; e < QK_K; e++) {
      const s = bytes[src + (e >> 4)]!;
      const q = (bytes[src + 16 + qs2At(e)]! >> qs2Shift(e)) & 3;
      y[dst + e] = d * (s & 0xf) * q - dmin * (s >> 4);
    }
  }
}

/** Q3_K's 6-bit scale s (0..63, stored with an offset of 32) from the 12 bytes at `at`. */
function q3kScale(bytes: Uint8Array, at: number, s: number): number {
  return ((bytes[at + (s & 7)]! >> (4 * (s >> 3))) & 0xf) | (((bytes[at + 8 + (s & 3)]! >> (2 * (s >> 2))) & 3) << 4);
}

export function quantizeQ3_K(x: Float32Array, out: Uint8Array): void {
  const scale = new Float64Array(16);
  for (let src = 0, dst = 0; src < x.length; src += QK_K, dst += 110) {
    // The value of largest magnitude maps to q - 4 = -4; the largest scale to -32, the 6-bit
    // minimum (as Q6_K does with 8 bits).
    const maxScale = symmetricScales16(x, src, -4, scale);
    const d = writeF16(out, dst + 108, maxScale / -32);
    out.fill(0, dst, dst + 108); // every field is OR-ed in
    for (let j = 0; j < 16; j++) {
      const s = d !== 0 ? clamp(roundAway(scale[j]! / d), -32, 31) : 0;
      const u = s + 32;
      out[dst + 96 + (j & 7)] |= (u & 0xf) << (4 * (j >> 3));
      out[dst + 104 + (j & 3)] |= (u >> 4) << (2 * (j >> 2));
      const step = d * s;
      const inv = step !== 0 ? 1 / step : 0;
      for (let i = 0; i < 16; i++) {
        const e = 16 * j + i;
        const q = clamp(roundAway(x[src + e]! * inv), -4, 3) + 4;
        out[dst + 32 + qs2At(e)] |= (q & 3) << qs2Shift(e);
        out[dst + (e & 31)] |= (q >> 2) << ((e >> 5) & 7);
      }
    }
  }
}

export function dequantizeQ3_K(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 110, dst += QK_K) {
    const d = readF16(bytes, src + 108);
    for (let e = 0; e < QK_K; e++) {
      const lo = (bytes[src + 32 + qs2At(e)]! >> qs2Shift(e)) & 3;
      const hi = (bytes[src + (e & 31)]! >> ((e >> 5) & 7)) & 1;
      y[dst + e] = d * (q3kScale(bytes, src + 96, e >> 4) - 32) * ((lo | (hi << 2)) - 4);
    }
  }
}
