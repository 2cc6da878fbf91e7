/**
 * ggml's 32-element blocks, byte-compatible with llama.cpp:
 *   Q8_0 (34 bytes): f16 d, then 32 int8 q;            value = d * q
 *   Q4_0 (18 bytes): f16 d, then 16 bytes of nibbles;  value = d * (q - 8)
 *     byte j holds element j in its low nibble and element j + 16 in its high nibble.
 * The quantisers follow ggml's reference ones (no search), so their output matches llama.cpp's.
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
    let amax = 0;
    let max = 0;
    for (let i = 0; i < QK; i++) {
      const v = x[src + i]!;
      if (Math.abs(v) > amax) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = max / -8;
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
