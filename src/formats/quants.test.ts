import { describe, expect, it } from 'vitest';
import { dequantize, packScalesMinsK4, quantize, unpackScalesMinsK4 } from './quants';
import { DTYPE_INFO, DTYPES, tensorByteLength, type DType } from './types';
import { Rng } from '../testing/fixtures/rng';
import { IQ4NL_VALUES } from './quants-lut';

/** Uniform [0, 1) draws from the fixtures' seeded generator. */
function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.uniform();
}
const gaussian = (r: () => number) => () => Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());

/**
 * Stated error bounds, per block, as a fraction of the block's largest |x| (K-quants: of the
 * 256-element super-block's), and for the relative RMS error over N(0, 1) data.
 *   F16: half an ulp (2^-11 relative); BF16: 2^-8 relative.
 *   Q8_0: half a step (amax / 127 / 2) plus the f16 rounding of d (amax * 2^-11).
 *   Q4_0: one step (amax / 8: the value opposite the extreme clamps at q = 15) plus f16 slack.
 *   Q4_1: half a step ((max - min) / 15 / 2 <= amax / 15) plus the f16 rounding of d and m.
 *   Q5_0: one step (amax / 16: the value opposite the extreme clamps at q = 31) plus f16 slack.
 *   Q5_1: half a step ((max - min) / 31 / 2 <= amax / 31) plus the f16 rounding of d and m.
 *   Q4_K: half of a sub-block step (range / 15 / 2 <= amax / 15) plus 6-bit scale rounding.
 *   Q5_K: as Q4_K with 31 steps (range / 31 / 2 <= amax / 31) plus 6-bit scale rounding.
 *   Q2_K: half a step; the 4-bit mins round up and the scales up from them, so nothing clamps:
 *     step <= (range + dmin) / 3 + d <= (2 + 1/15) amax / 3 + 0.046 amax, half of it 0.37 amax.
 *   Q3_K: one step (amax of 16 / 4: the clamp at q - 4 = 3) plus 2 d (d = amax / 128): 0.27 amax.
 *   Q6_K: one step (amax / 32, the clamp at q = 31) plus 8-bit scale rounding.
 *   IQ4_NL, IQ4_XS: no closed form (the scale is searched for the least x²-weighted error, so
 *     the extreme may land off the grid's end); about 1.4x the worst measured, 0.108 amax.
 *   MXFP4: the exponent puts the table's 12 at 1.5 * 2^floor(log2 amax), so up to amax / 4 clamps
 *     away, and the widest step (8 to 12, 2^floor(log2 amax) / 2) costs as much at half a step.
 * Plus 2^-17 absolute for every type: a tiny block's d is a subnormal f16 (steps of 2^-24),
 * whose rounding is up to 2^-25 * |q| <= 2^-18 of error.
 */
const SUBNORMAL_SLACK = 2 ** -17;
const BOUNDS: Record<DType, { maxOfAmax: number; relRmse: number }> = {
  F32: { maxOfAmax: 0, relRmse: 0 },
  F16: { maxOfAmax: 2 ** -11, relRmse: 3e-4 },
  BF16: { maxOfAmax: 2 ** -8, relRmse: 2.5e-3 },
  Q8_0: { maxOfAmax: 0.5 / 127 + 2 ** -11, relRmse: 0.007 },
  Q4_0: { maxOfAmax: 1 / 8 + 2 ** -10, relRmse: 0.1 },
  Q4_1: { maxOfAmax: 1 / 15 + 2 ** -9, relRmse: 0.09 }, // measured 0.077
  Q5_0: { maxOfAmax: 1 / 16 + 2 ** -10, relRmse: 0.05 }, // measured 0.043
  Q5_1: { maxOfAmax: 1 / 31 + 2 ** -9, relRmse: 0.045 }, // measured 0.038
  Q2_K: { maxOfAmax: 0.38, relRmse: 0.4 }, // measured 0.356 (max error 0.33 amax)
  Q3_K: { maxOfAmax: 0.28, relRmse: 0.17 }, // measured 0.155 (max error 0.25 amax)
  Q4_K: { maxOfAmax: 0.1, relRmse: 0.09 },
  Q5_K: { maxOfAmax: 0.05, relRmse: 0.045 }, // measured 0.039 (max error 0.031 amax)
  Q6_K: { maxOfAmax: 0.05, relRmse: 0.025 },
  IQ4_NL: { maxOfAmax: 0.15, relRmse: 0.1 }, // measured 0.076
  IQ4_XS: { maxOfAmax: 0.15, relRmse: 0.1 }, // measured 0.077
  MXFP4: { maxOfAmax: 0.25 + 2 ** -20, relRmse: 0.15 }, // measured 0.114 (max error 0.25 amax)
};

function checkBounds(dtype: DType, x: Float32Array): void {
  const bytes = quantize(dtype, x);
  expect(bytes.length).toBe(tensorByteLength(dtype, x.length));
  const y = dequantize(dtype, bytes, x.length);
  const block = Math.max(32, DTYPE_INFO[dtype].blockSize);
  for (let b = 0; b < x.length; b += block) {
    let amax = 0;
    for (let i = b; i < b + block; i++) amax = Math.max(amax, Math.abs(x[i]!));
    for (let i = b; i < b + block; i++) {
      const err = Math.abs(y[i]! - x[i]!);
      if (!(err <= BOUNDS[dtype].maxOfAmax * amax + (dtype === 'F32' ? 0 : SUBNORMAL_SLACK))) {
        expect.fail(`${dtype} element ${i}: x=${x[i]} y=${y[i]} error ${err} > ${BOUNDS[dtype].maxOfAmax} * ${amax}`);
      }
    }
  }
}

describe('quantize / dequantize round trips', () => {
  const n = 256 * 16;
  const g = gaussian(rng(7));
  const normal = new Float32Array(n).map(() => g());
  const r = rng(8);
  const uniform = new Float32Array(n).map(() => r() * 2 - 1);
  // Awkward blocks: zeros, constants, all positive, all negative, one outlier, mixed magnitudes.
  const awkward = new Float32Array(n).map((_, i) => {
    const blk = Math.floor(i / 256);
    const v = uniform[i]!;
    return [0, 0.75, Math.abs(v) + 1, -Math.abs(v) - 3, i % 256 === 5 ? 100 : v * 0.01, i % 64 < 32 ? v * 1e-4 : v * 10][blk % 6]!;
  });

  for (const dtype of DTYPES) {
    it(`${dtype} stays within its stated error bound on normal, uniform and awkward data`, () => {
      checkBounds(dtype, normal);
      checkBounds(dtype, uniform);
      checkBounds(dtype, awkward);
    });

    it(`${dtype} keeps the relative RMS error on N(0, 1) data below ${BOUNDS[dtype].relRmse}`, () => {
      const y = dequantize(dtype, quantize(dtype, normal), n);
      let se = 0, sx = 0;
      for (let i = 0; i < n; i++) {
        se += (y[i]! - normal[i]!) ** 2;
        sx += normal[i]! ** 2;
      }
      expect(Math.sqrt(se / sx)).toBeLessThanOrEqual(BOUNDS[dtype].relRmse);
    });
  }

  it('dequantizes all-zero input to exact zeros for every type', () => {
    for (const dtype of DTYPES) expect(Array.from(dequantize(dtype, quantize(dtype, new Float32Array(256)), 256)).every((v) => v === 0)).toBe(true);
  });

  it('reads from unaligned byte offsets and writes into a caller buffer', () => {
    const x = uniform.subarray(0, 256);
    for (const dtype of DTYPES) {
      const q = quantize(dtype, x);
      const shifted = new Uint8Array(q.length + 1);
      shifted.set(q, 1);
      const out = new Float32Array(300);
      dequantize(dtype, shifted.subarray(1), 256, out);
      expect(out.subarray(0, 256)).toEqual(dequantize(dtype, q, 256));
    }
  });

  it('rejects element counts that are not whole blocks and byte arrays that are too short', () => {
    expect(() => quantize('Q4_K', new Float32Array(100))).toThrow(/multiple of 256/);
    expect(() => dequantize('Q8_0', new Uint8Array(33), 32)).toThrow(/need 34 bytes/);
  });
});

/** Little-endian f16 bytes of a few exact values. */
const F16 = { 0.125: [0x00, 0x30], 0.25: [0x00, 0x34], 0.5: [0x00, 0x38], 1: [0x00, 0x3c], [-1]: [0x00, 0xbc] } as const;

describe('hand-built blocks dequantise exactly', () => {
  it('Q8_0: value = d * int8', () => {
    const b = new Uint8Array(34);
    b.set(F16[0.5], 0);
    for (let i = 0; i < 32; i++) b[2 + i] = (i * 8 - 128) & 0xff;
    const y = dequantize('Q8_0', b, 32);
    for (let i = 0; i < 32; i++) expect(y[i]).toBe((i * 8 - 128) * 0.5);
  });

  it('Q4_0: low nibbles are elements 0..15, high nibbles 16..31, value = (q - 8) * d', () => {
    const b = new Uint8Array(18);
    b.set(F16[0.25], 0);
    for (let j = 0; j < 16; j++) b[2 + j] = j | ((15 - j) << 4);
    const y = dequantize('Q4_0', b, 32);
    for (let j = 0; j < 16; j++) {
      expect(y[j]).toBe((j - 8) * 0.25);
      expect(y[j + 16]).toBe((7 - j) * 0.25);
    }
  });

  it('Q4_1: nibbles as Q4_0, value = d * q + m', () => {
    const b = new Uint8Array(20);
    b.set(F16[0.25], 0);
    b.set(F16[-1], 2);
    for (let j = 0; j < 16; j++) b[4 + j] = j | ((15 - j) << 4);
    const y = dequantize('Q4_1', b, 32);
    for (let j = 0; j < 16; j++) {
      expect(y[j]).toBe(j * 0.25 - 1);
      expect(y[j + 16]).toBe((15 - j) * 0.25 - 1);
    }
  });

  // qh (little-endian u32) = 0x8000_8001: bit 4 set for elements 0, 15 and 31 only.
  const QH = [0x01, 0x80, 0x00, 0x80];
  const q5 = (j: number) => (j < 16 ? j : 31 - j) | ([0, 15, 31].includes(j) ? 16 : 0);

  it('Q5_0: the 5th bit of element j is bit j of qh after d; value = d * (q - 16)', () => {
    const b = new Uint8Array(22);
    b.set(F16[0.5], 0);
    b.set(QH, 2);
    for (let j = 0; j < 16; j++) b[6 + j] = j | ((15 - j) << 4);
    const y = dequantize('Q5_0', b, 32);
    expect([y[0], y[1], y[15], y[16], y[30], y[31]]).toEqual([0, -7.5, 7.5, -0.5, -7.5, 0]);
    for (let j = 0; j < 32; j++) expect(y[j], `element ${j}`).toBe((q5(j) - 16) * 0.5);
  });

  it('Q5_1: d, m, then qh and nibbles as Q5_0; value = d * q + m', () => {
    const b = new Uint8Array(24);
    b.set(F16[1], 0);
    b.set(F16[0.5], 2);
    b.set(QH, 4);
    for (let j = 0; j < 16; j++) b[8 + j] = j | ((15 - j) << 4);
    const y = dequantize('Q5_1', b, 32);
    expect([y[0], y[1], y[15], y[16], y[30], y[31]]).toEqual([16.5, 1.5, 31.5, 15.5, 1.5, 16.5]);
    for (let j = 0; j < 32; j++) expect(y[j], `element ${j}`).toBe(q5(j) + 0.5);
  });

  it('Q4_1, Q5_0 and Q5_1 quantise into the layout they dequantise from (every quant at every position)', () => {
    // Exact grids: every q once (twice for Q4_1) at scrambled positions, so d and m are exact.
    const q4 = new Float32Array(32).map((_, i) => ((i * 7) % 16) * 0.25 - 1); // d = 0.25, m = -1
    const q50 = new Float32Array(32).map((_, i) => ((i * 7) % 32) - 16); // extreme -16: d = 1
    const q51 = new Float32Array(32).map((_, i) => ((i * 7) % 32) * 0.5 + 1); // d = 0.5, m = 1
    expect(dequantize('Q4_1', quantize('Q4_1', q4), 32)).toEqual(q4);
    expect(dequantize('Q5_0', quantize('Q5_0', q50), 32)).toEqual(q50);
    expect(dequantize('Q5_1', quantize('Q5_1', q51), 32)).toEqual(q51);
    // Q5_0's qh: element i has q = 7i % 32, so bit i is set where that is >= 16.
    let qh = 0;
    for (let i = 0; i < 32; i++) if ((i * 7) % 32 >= 16) qh |= 1 << i;
    const b = quantize('Q5_0', q50);
    expect([b[0], b[1]]).toEqual([0x00, 0x3c]);
    expect(new DataView(b.buffer, b.byteOffset).getUint32(2, true)).toBe(qh >>> 0);
  });

  it('Q5_0 and Q4_1 round as ggml does in f32: halves go up, the value opposite the extreme clamps', () => {
    // Q5_0: extreme 16 gives d = -1; x = 15.5 -> -15.5 + 16.5 = 1; x = -16 -> 32.5, clamped to 31.
    const x = new Float32Array(32);
    x[0] = 16;
    x[1] = 15.5;
    x[2] = -16;
    x[3] = 0.5; // -0.5 + 16.5 = 16
    const y = dequantize('Q5_0', quantize('Q5_0', x), 32);
    expect([y[0], y[1], y[2], y[3], y[4]].map((v) => v! + 0)).toEqual([16, 15, -15, 0, 0]); // + 0: d < 0 makes -0
    // Q4_1: min 0, max 15 (d = 1); 7.5 -> trunc(8.0) = 8.
    const z = new Float32Array(32);
    z[0] = 15;
    z[1] = 7.5;
    expect(Array.from(dequantize('Q4_1', quantize('Q4_1', z), 32).subarray(0, 3))).toEqual([15, 8, 0]);
  });

  it('Q4_K: packed 6-bit scales and mins, sub-block pairs sharing 32-byte chunks of nibbles', () => {
    // d = 1, dmin = 0.5; sc = [1, 2, 3, 4, 17, 33, 49, 63], m = [0, 1, 2, 3, 20, 40, 60, 5], packed by hand.
    const b = new Uint8Array(144);
    b.set(F16[1], 0);
    b.set(F16[0.5], 2);
    b.set([0x41, 0x82, 0xc3, 0xc4, 0x40, 0x81, 0xc2, 0x03, 0x41, 0x81, 0xc1, 0x5f], 4);
    const qs = 16;
    b[qs + 0] = 0x93; // element 0 (sub-block 0) = 3, element 32 (sub-block 1) = 9
    b[qs + 32] = 0x07; // element 64 (sub-block 2) = 7, element 96 (sub-block 3) = 0
    b[qs + 127] = 0xf0; // element 223 (sub-block 6) = 0, element 255 (sub-block 7) = 15
    const y = dequantize('Q4_K', b, 256);
    const expected: Record<number, number> = {
      0: 1 * 3 - 0, 1: 0, 32: 2 * 9 - 0.5 * 1, 33: -0.5, 64: 3 * 7 - 0.5 * 2, 96: -0.5 * 3,
      128: -0.5 * 20, 160: -0.5 * 40, 192: -0.5 * 60, 223: -30, 224: -0.5 * 5, 255: 63 * 15 - 0.5 * 5,
    };
    for (const [i, v] of Object.entries(expected)) expect(y[Number(i)], `element ${i}`).toBe(v);
  });

  it('Q5_K: Q4_K\'s scales and nibbles after 32 bytes of qh; bit j of qh[l] is bit 4 of element l of sub-block j', () => {
    // Q4_K's block above with qh inserted before the nibbles.
    const b = new Uint8Array(176);
    b.set(F16[1], 0);
    b.set(F16[0.5], 2);
    b.set([0x41, 0x82, 0xc3, 0xc4, 0x40, 0x81, 0xc2, 0x03, 0x41, 0x81, 0xc1, 0x5f], 4);
    const qh = 16, qs = 48;
    b[qh + 0] = 0b0000_0110; // elements 32 (sub-block 1) and 64 (sub-block 2) get 16
    b[qh + 1] = 0b0000_0001; // element 1 (sub-block 0)
    b[qh + 5] = 0b0001_0000; // element 133 (sub-block 4)
    b[qh + 31] = 0b1000_0000; // element 255 (sub-block 7)
    b[qs + 0] = 0x93;
    b[qs + 32] = 0x07;
    b[qs + 127] = 0xf0;
    const y = dequantize('Q5_K', b, 256);
    const expected: Record<number, number> = {
      0: 3, 1: 16, 2: 0, 32: 2 * 25 - 0.5, 33: -0.5, 64: 3 * 23 - 1, 96: -1.5, 128: -10, 133: 17 * 16 - 10,
      223: -30, 224: -2.5, 255: 63 * 31 - 2.5,
    };
    for (const [i, v] of Object.entries(expected)) expect(y[Number(i)], `element ${i}`).toBe(v);
  });

  it('Q5_K quantises bit 4 into qh and the low bits into nibbles (sub-block 0 holding 0..31)', () => {
    const x = new Float32Array(256);
    for (let i = 0; i < 32; i++) x[i] = i; // scale 1 -> sc = 63, d = f16(1 / 63): q = i
    const b = quantize('Q5_K', x);
    for (let l = 0; l < 32; l++) {
      expect(b[16 + l], `qh[${l}]`).toBe(l >= 16 ? 1 : 0);
      expect(b[48 + l], `qs[${l}]`).toBe(l & 15);
    }
    expect(Array.from(dequantize('Q5_K', b, 256).subarray(0, 32)).map(Math.round)).toEqual(Array.from(x.subarray(0, 32)));
  });

  it('Q2_K: scale/min nibbles per 16 elements; element 128n + 32j + l at bits 2j of qs[32n + l]; d, dmin last', () => {
    const b = new Uint8Array(84);
    b.set([0x21, 0x03, 0x12, 0, 0x04, 0, 0x05], 0); // (sc, m): sub-block 0 (1, 2), 1 (3, 0), 2 (2, 1), 4 (4, 0), 6 (5, 0)
    b[15] = 0xf7; // sub-block 15: sc 7, m 15
    b[16 + 0] = 0xe4; // elements 0, 32, 64, 96: q = 0, 1, 2, 3
    b[16 + 16] = 0x02; // element 16: q = 2
    b[16 + 63] = 0xc0; // element 255: q = 3
    b.set(F16[1], 80);
    b.set(F16[0.5], 82);
    const y = dequantize('Q2_K', b, 256);
    const expected: Record<number, number> = { 0: -1, 1: -1, 16: 6, 32: 1.5, 64: 8, 96: 15, 128: 0, 240: -7.5, 255: 13.5 };
    for (const [i, v] of Object.entries(expected)) expect(y[Number(i)], `element ${i}`).toBe(v);
  });

  it('Q3_K: hmask bit 4n + j, qs as Q2_K, 16 six-bit scales (offset 32) packed in 12 bytes, d last', () => {
    // d = 0.5; scales (stored) 0: 33, 2: 34, 4: 31, 6: 40, 8: 24, 15: 0, the rest 32 (a scale of 0).
    const b = new Uint8Array(110);
    b.set([0x81, 0, 0x02, 0, 0x0f, 0, 0x08, 0, 0x96, 0xaa, 0xaa, 0x2a], 96);
    b.set(F16[0.5], 108);
    b[0] = 0b0001_0101; // hmask[0]: bit 2 of elements 0, 64 and 128
    b[31] = 0b1000_0000; // hmask[31]: element 255
    b[32 + 0] = 0xe7; // elements 0, 32, 64, 96: low bits 3, 1, 2, 3
    b[32 + 32] = 0x01; // element 128: low bits 1
    b[32 + 63] = 0x40; // element 255: low bits 1
    const y = dequantize('Q3_K', b, 256);
    const expected: Record<number, number> = {
      0: 0.5 * 1 * 3, 1: 0.5 * 1 * -4, 16: 0, 32: 0.5 * 2 * -3, 64: 0.5 * -1 * 2, 96: 0.5 * 8 * -1, 128: 0.5 * -8 * 1,
      129: 0.5 * -8 * -4, 255: 0.5 * -32 * 1,
    };
    for (const [i, v] of Object.entries(expected)) expect(y[Number(i)] === 0 ? 0 : y[Number(i)], `element ${i}`).toBe(v);
  });

  it('Q2_K and Q3_K quantise into the layout they dequantise from (sub-block 0 a ramp, the rest zero)', () => {
    const x2 = new Float32Array(256).map((_, i) => (i < 16 ? i % 4 : 0));
    const b2 = quantize('Q2_K', x2);
    expect(b2[0]).toBe(0x0f); // sc 15, m 0
    for (let l = 0; l < 16; l++) expect(b2[16 + l]! & 3, `qs[${l}]`).toBe(l % 4);
    expect(Array.from(dequantize('Q2_K', b2, 256)).map(Math.round)).toEqual(Array.from(x2));
    // Q3_K: -4 is the extreme, so scale 1 = d * -32 with d = -1/32 (exact): q - 4 = x.
    const x3 = new Float32Array(256).map((_, i) => (i < 16 ? (i % 8) - 4 : 0));
    const b3 = quantize('Q3_K', x3);
    for (let l = 0; l < 16; l++) {
      expect((b3[l]! & 1) << 2 | (b3[32 + l]! & 3), `element ${l}`).toBe(l % 8);
    }
    expect(Array.from(dequantize('Q3_K', b3, 256)).map((v) => v + 0)).toEqual(Array.from(x3));
  });

  it('Q6_K: ql low/high nibbles, qh 2-bit fields and 16 int8 scales interleave as in ggml', () => {
    // d = 1, scales[j] = j + 1 (scales[15] = -128), all quants 0 except the bytes set below.
    const b = new Uint8Array(210);
    for (let j = 0; j < 16; j++) b[192 + j] = j + 1;
    b[192 + 15] = 0x80;
    b.set(F16[1], 208);
    b[0] = 0x21; // ql[0]: element 0 low bits 1, element 64 low bits 2
    b[128] = 0xe4; // qh[0]: high bits of elements 0, 32, 64, 96 = 0, 1, 2, 3
    b[64] = 0x0f; // ql[64]: element 128 low bits 15
    b[127] = 0xf0; // ql[127]: element 255 low bits 15 (high nibble of the second half's ql[32 + 31])
    b[128 + 63] = 0x80; // qh[63]: element 255 high bits 2
    const y = dequantize('Q6_K', b, 256);
    const expected: Record<number, number> = {
      0: 1 * (1 - 32), 16: 2 * -32, 32: 3 * (16 - 32), 64: 5 * (34 - 32), 96: 7 * (48 - 32),
      128: 9 * (15 - 32), 144: 10 * -32, 255: -128 * (47 - 32),
    };
    for (const [i, v] of Object.entries(expected)) expect(y[Number(i)], `element ${i}`).toBe(v);
  });

  it('Q6_K quantises into the layout it dequantises from (distinct values at every position)', () => {
    // Integers in -31..31 plus one -32 per 16-element sub-block (at a varying spot): every scale is
    // then 1, the step is exactly 1, and any mis-placed quant shows up as a wrong value.
    const x = new Float32Array(256).map((_, i) => ((i * 37) % 63) - 31);
    for (let j = 0; j < 16; j++) x[16 * j + ((j * 5) % 16)] = -32;
    expect(dequantize('Q6_K', quantize('Q6_K', x), 256)).toEqual(x);
  });

  it('Q4_K quantises into the layout it dequantises from (distinct values at every position)', () => {
    // Integers in 0..15, each 32-element sub-block holding both 0 and 15: the step is ~1.
    const x = new Float32Array(256).map((_, i) => (i * 7) % 16);
    for (let j = 0; j < 8; j++) {
      x[32 * j + j] = 0;
      x[32 * j + 31 - j] = 15;
    }
    const y = dequantize('Q4_K', quantize('Q4_K', x), 256);
    for (let i = 0; i < 256; i++) expect(Math.abs(y[i]! - x[i]!), `element ${i}`).toBeLessThan(0.01);
  });

  it('Q4_0 quantises like ggml: the extreme value maps to q = 0 and d = max / -8', () => {
    const x = new Float32Array(32).map((_, i) => i - 16); // extreme is -16 at element 0
    const b = quantize('Q4_0', x);
    expect([b[0], b[1]]).toEqual([0x00, 0x40]); // d = 2.0
    expect(b[2]! & 0xf).toBe(0);
    expect(dequantize('Q4_0', b, 32)[0]).toBe(-16);
  });

  it('IQ4_NL: d, then nibbles as Q4_0 indexing the IQ4 grid; value = d * grid[q]', () => {
    const b = new Uint8Array(18);
    b.set(F16[0.5], 0);
    for (let j = 0; j < 16; j++) b[2 + j] = j | ((15 - j) << 4);
    const y = dequantize('IQ4_NL', b, 32);
    for (let j = 0; j < 16; j++) {
      expect(y[j]).toBe(IQ4NL_VALUES[j]! * 0.5);
      expect(y[j + 16]).toBe(IQ4NL_VALUES[15 - j]! * 0.5);
    }
    expect([y[0], y[8], y[15]]).toEqual([-63.5, 0.5, 56.5]);
  });

  it('IQ4_XS: d, scales_h, scales_l, then 8 blocks of IQ4_NL nibbles; block ib scaled by d * (ls - 32)', () => {
    const b = new Uint8Array(136);
    b.set(F16[0.25], 0);
    // ls of block ib = 32 + 4ib - 13 (19, 23, ..., 47): low nibbles in scales_l, top 2 bits in scales_h.
    const ls = Array.from({ length: 8 }, (_, ib) => 32 + 4 * ib - 13);
    let h = 0;
    ls.forEach((l, ib) => {
      b[4 + (ib >> 1)] |= (l & 15) << (4 * (ib & 1));
      h |= (l >> 4) << (2 * ib);
    });
    b[2] = h & 0xff;
    b[3] = h >> 8;
    for (let i = 0; i < 128; i++) b[8 + i] = (i % 16) | (((i + 5) % 16) << 4);
    const y = dequantize('IQ4_XS', b, 256);
    for (let ib = 0; ib < 8; ib++) {
      for (let j = 0; j < 16; j++) {
        const dl = 0.25 * (ls[ib]! - 32);
        expect(y[32 * ib + j], `block ${ib} element ${j}`).toBe(dl * IQ4NL_VALUES[(16 * ib + j) % 16]!);
        expect(y[32 * ib + j + 16]).toBe(dl * IQ4NL_VALUES[(16 * ib + j + 5) % 16]!);
      }
    }
  });

  it('MXFP4: an E8M0 byte e, then nibbles as Q4_0 holding E2M1 (sign bit 3); value = E2M1 * 2^(e - 127)', () => {
    const b = new Uint8Array(17);
    b[0] = 130; // 2^3
    for (let j = 0; j < 16; j++) b[1 + j] = j | ((15 - j) << 4);
    const y = dequantize('MXFP4', b, 32);
    const e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6];
    for (let j = 0; j < 16; j++) {
      expect(y[j]).toBe(e2m1[j]! * 8);
      expect(y[j + 16]).toBe(e2m1[15 - j]! * 8);
    }
    // The exponent's extremes: e = 0 and 1 are f32 subnormals halved (2^-128, 2^-127), 254 is 2^126.
    for (const [e, scale] of [[0, 2 ** -127], [1, 2 ** -126], [127, 1], [254, 2 ** 127]] as const) {
      b[0] = e;
      expect(dequantize('MXFP4', b, 32)[1], `e = ${e}`).toBe(0.5 * scale);
    }
  });

  it('MXFP4 quantises like ggml: e = floor(log2 amax) - 2 + 127, nearest E2M1 (the first on ties), 1.5 * 2^e at most', () => {
    const x = new Float32Array(32).map((_, i) => (i - 12) * 0.75); // amax 14.25: e = 3 - 2 + 127
    const b = quantize('MXFP4', x);
    expect(b[0]).toBe(128);
    const y = dequantize('MXFP4', b, 32);
    const grid = [0, 0.5, 1, 1.5, 2, 3, 4, 6].flatMap((v) => [v, -v]).map((v) => v * 2);
    for (let i = 0; i < 32; i++) {
      const best = Math.min(...grid.map((g) => Math.abs(g - x[i]!)));
      expect(Math.abs(y[i]! - x[i]!), `element ${i}`).toBe(best);
    }
    expect(y[31]).toBe(12); // 14.25 clamps to the table's end
    expect(y[13]).toBe(1); // 0.75 is halfway between 0.5 and 1 (scaled: 1 and 2): the lower index
  });

  it('IQ4_NL and IQ4_XS quantise into the layout they dequantise from (grid values at every position)', () => {
    // Every grid value, shuffled, in each 32-block at a per-block scale: the search finds them exactly.
    for (const [dtype, n] of [['IQ4_NL', 64], ['IQ4_XS', 256]] as const) {
      const x = new Float32Array(n).map((_, i) => IQ4NL_VALUES[(i * 7) % 16]! * (dtype === 'IQ4_NL' ? 0.5 : 0.25 * (1 + ((i >> 5) % 4))));
      const y = dequantize(dtype, quantize(dtype, x), n);
      for (let i = 0; i < n; i++) expect(y[i], `${dtype} element ${i}`).toBeCloseTo(x[i]!, 5);
    }
  });
});

describe('K-quant 6-bit scale packing', () => {
  it('round trips every 6-bit value at every one of the 8 scale and 8 min positions', () => {
    const bytes = new Uint8Array(12);
    const sc = new Uint8Array(8), m = new Uint8Array(8), sc2 = new Uint8Array(8), m2 = new Uint8Array(8);
    for (let v = 0; v < 64; v++) {
      for (let j = 0; j < 8; j++) {
        sc[j] = (v + j * 11) % 64;
        m[j] = (63 - v + j * 5) % 64;
      }
      packScalesMinsK4(sc, m, bytes);
      unpackScalesMinsK4(bytes, 0, sc2, m2);
      expect(Array.from(sc2)).toEqual(Array.from(sc));
      expect(Array.from(m2)).toEqual(Array.from(m));
    }
  });
});
