import { Rng } from '../testing/fixtures/rng';
import { describe, expect, it } from 'vitest';
import {
  bf16ArrayToF32,
  bf16BitsToF32,
  f16ArrayToF32,
  f16BitsToF32,
  f32ArrayToBf16,
  f32ArrayToF16,
  f32ToBf16Bits,
  f32ToF16Bits,
} from './halfs';

/** Uniform [0, 1) draws from the fixtures' seeded generator. */
function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.uniform();
}

const f32 = (x: number): number => Math.fround(x);

describe('f16', () => {
  it('encodes well-known values exactly', () => {
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(-2)).toBe(0xc000);
    expect(f32ToF16Bits(0.5)).toBe(0x3800);
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001);
    expect(f32ToF16Bits(2 ** -14)).toBe(0x0400);
    expect(f32ToF16Bits(0)).toBe(0);
    expect(f32ToF16Bits(-0)).toBe(0x8000);
    expect(f32ToF16Bits(Infinity)).toBe(0x7c00);
    expect(f32ToF16Bits(-Infinity)).toBe(0xfc00);
  });

  it('rounds to nearest, ties to even, including into subnormals and infinity', () => {
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie between 0x3c00 and 0x3c01: even
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie between 0x3c01 and 0x3c02: even
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01); // just above the tie
    expect(f32ToF16Bits(2 ** -25)).toBe(0); // half the smallest subnormal: ties to 0
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(2); // 1.5 units: ties to 2
    expect(f32ToF16Bits(2 ** -26)).toBe(0);
    expect(f32ToF16Bits(2 ** -14 - 2 ** -25)).toBe(0x0400); // rounds up into the smallest normal
    expect(f32ToF16Bits(65519)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // the tie above the largest finite half: infinity
    expect(f32ToF16Bits(1e10)).toBe(0x7c00);
  });

  it('keeps NaN a NaN', () => {
    expect(Number.isNaN(f16BitsToF32(f32ToF16Bits(NaN)))).toBe(true);
  });

  it('decodes every half and encodes it back to the same bits', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const back = f32ArrayToF16(f16ArrayToF32(all));
    for (let h = 0; h < 65536; h++) {
      const isNaN = (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
      if (isNaN) expect(Number.isNaN(f16BitsToF32(h))).toBe(true);
      else if (back[h] !== h) expect.fail(`half 0x${h.toString(16)} came back as 0x${back[h]!.toString(16)}`);
    }
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24);
    expect(f16BitsToF32(0x3555)).toBe(f32(0.333251953125));
  });

  it('picks the nearest half for random floats, ties to even', () => {
    const r = rng(1);
    for (let i = 0; i < 20000; i++) {
      const x = f32((r() - 0.5) * 2 ** Math.floor(r() * 40 - 28));
      const h = f32ToF16Bits(x);
      const err = Math.abs(f16BitsToF32(h) - x);
      for (const n of [h - 1, h + 1]) {
        if ((n & 0x7fff) >= 0x7c00 || n < 0 || ((n ^ h) & 0x8000) !== 0) continue;
        const other = Math.abs(f16BitsToF32(n) - x);
        if (other < err || (other === err && (h & 1) === 1)) expect.fail(`x=${x}: chose 0x${h.toString(16)}, 0x${n.toString(16)} is nearer`);
      }
    }
  });
});

describe('bf16', () => {
  it('encodes and rounds to nearest, ties to even', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(f32ToBf16Bits(-2)).toBe(0xc000);
    expect(f32ToBf16Bits(1 + 2 ** -8)).toBe(0x3f80); // tie: even
    expect(f32ToBf16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie: even
    expect(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -20)).toBe(0x3f81);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(f32ToBf16Bits(3.4028234663852886e38)).toBe(0x7f80); // the largest float rounds up to infinity
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN)))).toBe(true);
    expect(bf16BitsToF32(0x4049)).toBe(3.140625);
  });

  it('decodes every bf16 and encodes it back to the same bits', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const back = f32ArrayToBf16(bf16ArrayToF32(all));
    for (let h = 0; h < 65536; h++) {
      const isNaN = (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0;
      if (!isNaN && back[h] !== h) expect.fail(`bf16 0x${h.toString(16)} came back as 0x${back[h]!.toString(16)}`);
    }
  });

  it('keeps the relative error of random floats within 2^-8 (half an ulp of an 8-bit significand)', () => {
    const r = rng(2);
    const x = new Float32Array(10000).map(() => (r() - 0.5) * 1e3);
    const y = bf16ArrayToF32(f32ArrayToBf16(x));
    for (let i = 0; i < x.length; i++) expect(Math.abs(y[i]! - x[i]!)).toBeLessThanOrEqual(Math.abs(x[i]!) * 2 ** -8);
  });
});
