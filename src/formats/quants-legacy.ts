/**
 * ggml's 32-element blocks, byte-compatible with llama.cpp:
 *   Q8_0 (34 bytes): f16 d, then 32 int8 q;            value = d * q
 *   Q4_0 (18 bytes): f16 d, then 16 bytes of nibbles;  value = d * (q - 8)
 *     byte j holds element j in its low nibble and element j + 16 in its high nibble.
 *   Q4_1 (20 bytes): f16 d, f16 m, then 16 bytes of nibbles as Q4_0;  value = d * q + m
 *   Q5_0 (22 bytes): f16 d, u32 qh, then 16 bytes of nibbles as Q4_0; value = d * (q - 16)
 *   Q5_1 (24 bytes): f16 d, f16 m, u32 qh, then nibbles as Q4_0;      value = d * q + m
 *     the 5-bit q of element j (0..31) is its nibble plus bit j of qh (little-endian) as bit 4.
 * The quantisers follow ggml's reference ones (no search), so their output matches llama.cpp's.
 * Q4_1/Q5_0/Q5_1 compute in f32 as ggml's C does (Math.fround at each step), so even rounding
 * ties land where llama-quantize puts them.
 */
import { f16BitsToF32, f32ToF16Bits } from './halfs';

export const QK = 32;

/** C's roundf: halves go away from zero (Math.round sends -2.5 to -2). */
export function roundAway(x: number): number {
  return x < 0 ? -Math.floor(0.5 - x) : Math.floor(x + 0.5);
}

export function readF16(bytes: Uint8Array, at: number): number {
  return f16BitsToF32(bytes[at]! | (bytes[at + 1]! << 8));
}

/** Stores `x` as f16 at `at` and returns the value actually stored. */
export function writeF16(bytes: Uint8Array, at: number, x: number): number {
  const h = f32ToF16Bits(x);
  bytes[at] = h & 0xff;
  bytes[at + 1] = h >>> 8;
  return f16BitsToF32(h);
}

export function quantizeQ8_0(x: Float32Array, out: Uint8Array): void {
  for (let b = 0, src = 0, dst = 0; src < x.length; b++, src += QK, dst += 34) {
    let amax = 0;
    for (let i = 0; i < QK; i++) amax = Math.max(amax, Math.abs(x[src + i]!));
    const d = amax / 127;
    const id = d !== 0 ? 1 / d : 0;
    writeF16(out, dst, d);
    for (let i = 0; i < QK; i++) out[dst + 2 + i] = roundAway(x[src + i]! * id) & 0xff;
  }
}

export function dequantizeQ8_0(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 34, dst += QK) {
    const d = readF16(bytes, src);
    for (let i = 0; i < QK; i++) y[dst + i] = d * ((bytes[src + 2 + i]! << 24) >> 24);
  }
}

export function quantizeQ4_0(x: Float32Array, out: Uint8Array): void {
  for (let src = 0, dst = 0; src < x.length; src += QK, dst += 18) {
    // The value of largest magnitude, with its sign, maps to q = 0 (i.e. -8 * d) exactly.
    const d = signedAbsMax(x, src) / -8;
    const id = d !== 0 ? 1 / d : 0;
    writeF16(out, dst, d);
    for (let j = 0; j < QK / 2; j++) {
      const lo = Math.min(15, Math.trunc(x[src + j]! * id + 8.5));
      const hi = Math.min(15, Math.trunc(x[src + j + QK / 2]! * id + 8.5));
      out[dst + 2 + j] = lo | (hi << 4);
    }
  }
}

export function dequantizeQ4_0(bytes: Uint8Array, y: Float32Array): void {
  for (let src = 0, dst = 0; dst < y.length; src += 18, dst += QK) {
    const d = readF16(bytes, src);
    for (let j = 0; j < QK / 2; j++) {
      const q = bytes[src + 2 + j]!;
      y[dst + j] = ((q & 0xf) - 8) * d;
      y[dst + j + QK / 2] = ((q >>> 4) - 8) * d;
    }
  }
}

const f32 = Math.fround;

/** The smallest and largest of a block, as ggml's Q4_1/Q5_1 reference quantisers find them. */
function minMax(x: Float32Array, src: number): [min: number, max: number] {
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < QK; i++) {
    const v = x[src + i]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

/** The value of largest magnitude, with its sign (the first one on ties), as ggml's Q4_0/Q5_0 find it. */
function signedAbsMax(x: Float32Array, src: number): number {
  let amax = 0;
  let max = 0;
  for (let i = 0; i < QK; i++) {
    const v = x[src + i]!;
    if (Math.abs(v) > amax) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return max;
}

function writeU32(bytes: Uint8Array, at: number, v: number): void {
  bytes[at] = v & 0xff;
  bytes[at + 1] = (v >>> 8) & 0xff;
  bytes[at + 2] = (v >>> 16) & 0xff;
  bytes[at + 3] = v >>> 24;
}

function readU32(bytes: Uint8Array, at: number): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}

/**
 * Writes 32 quants (0..31; only the low nibble when `qhAt` < 0) as ggml's legacy blocks pack them:
 * nibbles at `qsAt` (element j low, j + 16 high), bit 4 of element j as bit j of the u32 at `qhAt`.
 */
function packQuants(q: Uint8Array, out: Uint8Array, qsAt: number, qhAt: number): void {
  let qh = 0;
  for (let j = 0; j < QK / 2; j++) {
    out[qsAt + j] = (q[j]! & 0xf) | ((q[j + QK / 2]! & 0xf) << 4);
    qh |= ((q[j]! >>> 4) << j) | ((q[j + QK / 2]! >>> 4) << (j + QK / 2));
  }
  if (qhAt >= 0) writeU32(out, qhAt, qh >>> 0);
}

/** The 32 quants of a block packed as packQuants writes them (`qhAt` < 0: nibbles only). */
function unpackQuants(bytes: Uint8Array, qsAt: number, qhAt: number, q: Uint8Array): void {
  const qh = qhAt >= 0 ? readU32(bytes, qhAt) : 0;
  for (let j = 0; j < QK / 2; j++) {
    const b = bytes[qsAt + j]!;
    q[j] = (b & 0xf) | (((qh >>> j) & 1) << 4);
    q[j + QK / 2] = (b >>> 4) | (((qh >>> (j + QK / 2)) & 1) << 4);
  }
}

/** Shared by Q4_1 (nmax 15, clamped) and Q5_1 (nmax 31): d = (max - min) / nmax, q = trunc((x - min) / d + 0.5). */
function quantizeMin(x: Float32Array, out: Uint8Array, nmax: number, blockBytes: number, qhAt: number): void {
  const q = new Uint8Array(QK);
  const qsAt = qhAt >= 0 ? qhAt + 4 : 4;
  for (let src = 0, dst = 0; src < x.length; src += QK, dst += blockBytes) {
    const [min, max] = minMax(x, src);
    const d = f32(f32(max - min) / nmax);
    const id = d !== 0 ? f32(1 / d) : 0;
    writeF16(out, dst, d);
    writeF16(out, dst + 2, min);
    for (let i = 0; i < QK; i++) q[i] = Math.min(nmax, Math.trunc(f32(f32(f32(x[src + i]! - min) * id) + 0.5)));
    packQuants(q, out, dst + qsAt, qhAt >= 0 ? dst + qhAt : -1);
  }
}

function dequantizeMin(bytes: Uint8Array, y: Float32Array, blockBytes: number, qhAt: number): void {
  const q = new Uint8Array(QK);
  const qsAt = qhAt >= 0 ? qhAt + 4 : 4;
  for (let src = 0, dst = 0; dst < y.length; src += blockBytes, dst += QK) {
    const d = readF16(bytes, src);
    const m = readF16(bytes, src + 2);
    unpackQuants(bytes, src + qsAt, qhAt >= 0 ? src + qhAt : -1, q);
    for (let i = 0; i < QK; i++) y[dst + i] = q[i]! * d + m;
  }
}

export function quantizeQ4_1(x: Float32Array, out: Uint8Array): void {
  quantizeMin(x, out, 15, 20, -1);
}

export function dequantizeQ4_1(bytes: Uint8Array, y: Float32Array): void {
  dequantizeMin(bytes, y, 20, -1);
}

export function quantizeQ5_1(x: Float32Array, out: Uint8Array): void {
  quantizeMin(x, out, 31, 24, 4);
}

export function dequantizeQ5_1(bytes: Uint8Array, y: Float32Array): void {
  dequantizeMin(bytes, y, 24, 4);
}

export function quantizeQ5_0(x: Float32Array, out: Uint8Array): void {
  const q = new Uint8Array(QK);
  for (let src = 0, dst = 0; src < x.length; src += QK, dst += 22) {
    // As Q4_0: the extreme value, with its sign, maps to q = 0 (i.e. -16 * d) exactly.
    const d = f32(signedAbsMax(x, src) / -16);
    const id = d !== 0 ? f32(1 / d) : 0;
    writeF16(out, dst, d);
    for (let i = 0; i < QK; i++) q[i] = Math.min(31, Math.trunc(f32(f32(x[src + i]! * id) + 16.5)));
    packQuants(q, out, dst + 6, dst + 2);
  }
}

export function dequantizeQ5_0(bytes: Uint8Array, y: Float32Array): void {
  const q = new Uint8Array(QK);
  for (let src = 0, dst = 0; dst < y.length; src += 22, dst += QK) {
    const d = readF16(bytes, src);
    unpackQuants(bytes, src + 6, src + 2, q);
    for (let i = 0; i < QK; i++) y[dst + i] = (q[i]! - 16) * d;
  }
}
