/**
 * f32 <-> f16 (IEEE binary16) and f32 <-> bf16 conversions with round-to-nearest-even, on single
 * values and on typed arrays. Node 20 has no Float16Array or Math.f16round, so this is bit work.
 *
 * Arrays of 16-bit values are host-endian Uint16Arrays; every platform WebGPU runs on is little
 * endian, which is also what GGUF and safetensors store.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** binary16 bits nearest to the f32 bit pattern `x` (ties to even; NaN stays NaN, quiet). */
function f32BitsToF16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15; // rebias
  if (e >= 31) return sign | 0x7c00; // too large even before rounding: infinity
  if (e <= 0) {
    // Subnormal half (or zero): value in units of 2^-24 is (1.mant << 23) >> (14 - e).
    const shift = 14 - e;
    if (shift > 24) return sign; // below half the smallest subnormal: rounds to (signed) zero
    const m = mant | 0x800000;
    let q = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (q & 1) !== 0)) q++; // may carry into the smallest normal: still right
    return sign | q;
  }
  let q = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (q & 1) !== 0)) q++; // a carry rolls into the exponent (up to infinity)
  return sign | q;
}

/** f32 bit pattern of the binary16 bits `h` (exact). */
function f16BitsToF32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exp = (h >>> 10) & 0x1f;
  let mant = h & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (mant << 13)) >>> 0;
  if (exp !== 0) return (sign | ((exp - 15 + 127) << 23) | (mant << 13)) >>> 0;
  if (mant === 0) return sign >>> 0;
  // Subnormal: normalise the mantissa.
  let e = 127 - 15 + 1;
  while ((mant & 0x400) === 0) {
    mant <<= 1;
    e--;
  }
  return (sign | (e << 23) | ((mant & 0x3ff) << 13)) >>> 0;
}

let f16Table: Float32Array | undefined;
/** All 65,536 halves as f32, built on first use (256 KiB): dequantising is then one lookup. */
function halfTable(): Float32Array {
  if (!f16Table) {
    const bits = new Uint32Array(65536);
    for (let h = 0; h < 65536; h++) bits[h] = f16BitsToF32Bits(h);
    f16Table = new Float32Array(bits.buffer);
  }
  return f16Table;
}

export function f32ToF16Bits(x: number): number {
  f32[0] = x;
  return f32BitsToF16Bits(u32[0]!);
}

export function f16BitsToF32(h: number): number {
  return halfTable()[h & 0xffff]!;
}

/** bf16 is the top half of an f32: round the low 16 bits away, ties to even. */
function f32BitsToBf16Bits(x: number): number {
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) | 0x40) & 0xffff; // quiet NaN
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

export function f32ToBf16Bits(x: number): number {
  f32[0] = x;
  return f32BitsToBf16Bits(u32[0]!);
}

export function bf16BitsToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0]!;
}

function bitsOf(src: Float32Array): Uint32Array {
  return new Uint32Array(src.buffer, src.byteOffset, src.length);
}

export function f32ArrayToF16(src: Float32Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const bits = bitsOf(src);
  for (let i = 0; i < bits.length; i++) dst[i] = f32BitsToF16Bits(bits[i]!);
  return dst;
}

export function f16ArrayToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const table = halfTable();
  for (let i = 0; i < src.length; i++) dst[i] = table[src[i]!]!;
  return dst;
}

export function f32ArrayToBf16(src: Float32Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const bits = bitsOf(src);
  for (let i = 0; i < bits.length; i++) dst[i] = f32BitsToBf16Bits(bits[i]!);
  return dst;
}

export function bf16ArrayToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const out = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
  for (let i = 0; i < src.length; i++) out[i] = src[i]! << 16;
  return dst;
}
