import { describe, expect, it } from 'vitest';
import dequantLib from '../../shaders/lib/dequant.wgsl';
import { quantize } from '../formats/quants';
import { DTYPE_INFO, DTYPES } from '../formats/types';
import { gpuBytesPerRow, repackForGPU, splitRows, WTYPE } from './weights';

function values(n: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * 2);
}

describe('repackForGPU', () => {
  it('moves Q8_0 and Q4_0 quants (Q5_0 qh and quants) after a two-byte pad, keeping d first', () => {
    for (const [dtype, qs] of [['Q8_0', 32], ['Q4_0', 16], ['Q5_0', 20]] as const) {
      const ggml = quantize(dtype, values(64));
      const gpu = repackForGPU(dtype, ggml);
      const [src, dst] = [DTYPE_INFO[dtype].bytesPerBlock, DTYPE_INFO[dtype].gpu.bytesPerBlock];
      expect(gpu.length).toBe(2 * dst);
      for (let b = 0; b < 2; b++) {
        expect([...gpu.subarray(b * dst, b * dst + 2)]).toEqual([...ggml.subarray(b * src, b * src + 2)]);
        expect([...gpu.subarray(b * dst + 2, b * dst + 4)]).toEqual([0, 0]);
        expect([...gpu.subarray(b * dst + 4, b * dst + 4 + qs)]).toEqual([...ggml.subarray(b * src + 2, b * src + 2 + qs)]);
      }
    }
  });

  it('leaves Q4_1 and Q5_1 blocks (already whole words) as they are', () => {
    for (const dtype of ['Q4_1', 'Q5_1'] as const) {
      const q = quantize(dtype, values(64));
      expect(repackForGPU(dtype, q)).toEqual(q);
    }
  });

  it('pads each Q6_K (Q3_K) super-block to 212 (112) bytes and leaves Q2_K, Q4_K and Q5_K as they are', () => {
    for (const [dtype, ggml, gpu] of [['Q6_K', 210, 212], ['Q3_K', 110, 112]] as const) {
      const q = quantize(dtype, values(512));
      const g = repackForGPU(dtype, q);
      expect(g.length).toBe(2 * gpu);
      expect([...g.subarray(gpu, gpu + ggml)]).toEqual([...q.subarray(ggml, 2 * ggml)]);
      expect([...g.subarray(ggml, gpu)]).toEqual([0, 0]);
    }
    for (const dtype of ['Q2_K', 'Q4_K', 'Q5_K'] as const) {
      const q = quantize(dtype, values(512));
      expect(repackForGPU(dtype, q)).toEqual(q);
    }
  });

  it('pads plain floats to a whole word', () => {
    const f16 = quantize('F16', values(3));
    const gpu = repackForGPU('F16', f16);
    expect(gpu.length).toBe(8);
    expect([...gpu.subarray(0, 6)]).toEqual([...f16]);
    expect(repackForGPU('F32', quantize('F32', values(3))).length).toBe(12);
  });

  it('refuses a partial block', () => {
    expect(() => repackForGPU('Q8_0', new Uint8Array(35))).toThrow(/whole 34-byte blocks/);
  });
});

describe('gpuBytesPerRow', () => {
  it('gives whole words per row for every dtype', () => {
    for (const dtype of DTYPES) {
      const bytes = gpuBytesPerRow(dtype, 512);
      expect(bytes % 4).toBe(0);
      expect(bytes).toBe((512 / DTYPE_INFO[dtype].blockSize) * DTYPE_INFO[dtype].gpu.bytesPerBlock);
    }
    expect(gpuBytesPerRow('Q6_K', 256)).toBe(212);
  });

  it('rejects rows that are not whole blocks or whole words', () => {
    expect(() => gpuBytesPerRow('Q4_K', 128)).toThrow(RangeError);
    expect(() => gpuBytesPerRow('F16', 3)).toThrow(/not whole u32 words/);
  });
});

describe('WTYPE', () => {
  it('is each type\'s ggml id', () => {
    expect(WTYPE).toEqual({ F32: 0, F16: 1, BF16: 30, Q8_0: 8, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q2_K: 10, Q3_K: 11, Q4_K: 12, Q5_K: 13, Q6_K: 14, IQ4_NL: 20, IQ4_XS: 23, MXFP4: 39 });
  });

  it.each(DTYPES)('%s: shaders/lib/dequant.wgsl names its WTYPE and, when quantised, its GPU block in words', (dtype) => {
    const constant = (name: string) => new RegExp(`const ${name}: u32 = (\\d+)u;`).exec(dequantLib)?.[1];
    expect(constant(`WT_${dtype}`)).toBe(String(WTYPE[dtype]));
    if (DTYPE_INFO[dtype].blockSize > 1) expect(constant(`${dtype}_WORDS`)).toBe(String(DTYPE_INFO[dtype].gpu.bytesPerBlock / 4));
  });
});

describe('splitRows', () => {
  it('keeps a matrix that fits in one part', () => {
    expect(splitRows(37, 100, 3700)).toEqual([{ row0: 0, rows: 37 }]);
    expect(splitRows(1, 100, 100)).toEqual([{ row0: 0, rows: 1 }]);
  });

  it('splits into as few parts as fit, of equal rows but the last, covering every row once', () => {
    // 13 rows fit per part: 3 parts are needed, and 13 + 13 + 11 is as balanced as 3 parts get.
    expect(splitRows(37, 100, 1399)).toEqual([{ row0: 0, rows: 13 }, { row0: 13, rows: 13 }, { row0: 26, rows: 11 }]);
    // 128 rows fit: 3 parts of 100, not 128 + 128 + 44.
    expect(splitRows(300, 8, 1024)).toEqual([{ row0: 0, rows: 100 }, { row0: 100, rows: 100 }, { row0: 200, rows: 100 }]);
    for (const [rows, perPart] of [[1000, 7], [151936, 4000], [5, 1]]) {
      const parts = splitRows(rows!, 64, perPart! * 64)!;
      expect(parts.length).toBe(Math.ceil(rows! / perPart!));
      expect(parts.every((p, i) => p.rows <= perPart! && p.row0 === (i === 0 ? 0 : parts[i - 1]!.row0 + parts[i - 1]!.rows))).toBe(true);
      expect(parts.reduce((n, p) => n + p.rows, 0)).toBe(rows);
    }
  });

  it('gives null when one row is larger than a part may be', () => {
    expect(splitRows(10, 101, 100)).toBeNull();
  });
});
