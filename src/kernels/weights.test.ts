import { describe, expect, it } from 'vitest';
import dequantLib from '../../shaders/lib/dequant.wgsl';
import { quantize } from '../formats/quants';
import { DTYPE_INFO, DTYPES, tensorByteLength } from '../formats/types';
import { gpuBytesPerRow, repackForGPU, splitRows, WTYPE } from './weights';

function values(n: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * 2);
}

/** Little-endian u16 / u8 field `i` of those packed from byte `at` on. */
const u16 = (b: Uint8Array, at: number, i: number) => b[at + 2 * i]! | (b[at + 2 * i + 1]! << 8);

describe('repackForGPU', () => {
  it('lays a Q4_0/IQ4_NL/Q8_0 row out as every block\'s quants, then the d\'s two per word (an odd count padded)', () => {
    for (const [dtype, qs] of [['Q4_0', 16], ['IQ4_NL', 16], ['Q8_0', 32]] as const) {
      for (const blocks of [1, 3, 4]) {
        const cols = 32 * blocks;
        const ggml = quantize(dtype, values(2 * cols)); // two rows
        const gpu = repackForGPU(dtype, ggml, cols);
        const src = DTYPE_INFO[dtype].bytesPerBlock;
        const row = blocks * qs + Math.ceil(blocks / 2) * 4;
        expect(gpu.length).toBe(2 * row);
        for (let r = 0; r < 2; r++) {
          for (let b = 0; b < blocks; b++) {
            const at = (r * blocks + b) * src;
            expect([...gpu.subarray(r * row + b * qs, r * row + (b + 1) * qs)]).toEqual([...ggml.subarray(at + 2, at + 2 + qs)]);
            expect(u16(gpu, r * row + blocks * qs, b)).toBe(u16(ggml, at, 0));
          }
          if (blocks % 2) expect(u16(gpu, r * row + blocks * qs, blocks)).toBe(0);
        }
      }
    }
  });

  it('lays Q5_0 out as qs, then qh, then d, and MXFP4 as qs, then the E8M0 bytes four per word', () => {
    const blocks = 3;
    const q5 = quantize('Q5_0', values(32 * blocks));
    const g5 = repackForGPU('Q5_0', q5, 32 * blocks);
    expect(g5.length).toBe(blocks * 16 + blocks * 4 + 8);
    for (let b = 0; b < blocks; b++) {
      expect([...g5.subarray(16 * b, 16 * b + 16)]).toEqual([...q5.subarray(22 * b + 6, 22 * b + 22)]);
      expect([...g5.subarray(48 + 4 * b, 52 + 4 * b)]).toEqual([...q5.subarray(22 * b + 2, 22 * b + 6)]);
      expect(u16(g5, 60, b)).toBe(u16(q5, 22 * b, 0));
    }
    const mx = quantize('MXFP4', values(32 * 5));
    const gm = repackForGPU('MXFP4', mx, 32 * 5);
    expect(gm.length).toBe(5 * 16 + 8);
    for (let b = 0; b < 5; b++) {
      expect([...gm.subarray(16 * b, 16 * b + 16)]).toEqual([...mx.subarray(17 * b + 1, 17 * b + 17)]);
      expect(gm[80 + b]).toBe(mx[17 * b]);
    }
    expect([...gm.subarray(85)]).toEqual([0, 0, 0]);
  });

  it('lays Q3_K (Q6_K) out as every super-block\'s quants, then their 12 (16) scale bytes, then the d\'s', () => {
    for (const [dtype, quants, scales] of [['Q3_K', 96, 12], ['Q6_K', 192, 16]] as const) {
      const blocks = 3;
      const q = quantize(dtype, values(256 * blocks));
      const g = repackForGPU(dtype, q, 256 * blocks);
      const src = DTYPE_INFO[dtype].bytesPerBlock;
      expect(g.length).toBe(blocks * (quants + scales) + 8);
      for (let b = 0; b < blocks; b++) {
        expect([...g.subarray(quants * b, quants * (b + 1))]).toEqual([...q.subarray(src * b, src * b + quants)]);
        const sc = blocks * quants + scales * b;
        expect([...g.subarray(sc, sc + scales)]).toEqual([...q.subarray(src * b + quants, src * b + quants + scales)]);
        expect(u16(g, blocks * (quants + scales), b)).toBe(u16(q, src * b + quants + scales, 0));
      }
    }
  });

  it('leaves the types whose blocks are whole words as they are', () => {
    for (const dtype of ['Q4_1', 'Q5_1', 'Q2_K', 'Q4_K', 'Q5_K', 'IQ4_XS', 'F32', 'BF16'] as const) {
      const q = quantize(dtype, values(512));
      expect(repackForGPU(dtype, q, 256)).toBe(q);
    }
  });

  it('pads each row of plain floats to a whole word', () => {
    const f16 = quantize('F16', values(6));
    const gpu = repackForGPU('F16', f16, 3);
    expect(gpu.length).toBe(16);
    expect([...gpu.subarray(0, 6)]).toEqual([...f16.subarray(0, 6)]);
    expect([...gpu.subarray(8, 14)]).toEqual([...f16.subarray(6, 12)]);
    expect(repackForGPU('F32', quantize('F32', values(3)), 3).length).toBe(12);
  });

  it('refuses a partial block or a partial row', () => {
    expect(() => repackForGPU('Q8_0', new Uint8Array(35), 32)).toThrow(/whole 34-byte blocks/);
    expect(() => repackForGPU('Q8_0', new Uint8Array(34 * 3), 64)).toThrow(/whole rows of 64 elements/);
  });
});

describe('gpuBytesPerRow', () => {
  it('gives whole words per row, and is what repackForGPU writes, for every dtype', () => {
    for (const dtype of DTYPES) {
      for (const k of [256, 768]) {
        const bytes = gpuBytesPerRow(dtype, k);
        expect(bytes % 4).toBe(0);
        expect(repackForGPU(dtype, quantize(dtype, values(2 * k)), k).length).toBe(2 * bytes);
      }
    }
    expect(gpuBytesPerRow('Q6_K', 256)).toBe(212);
    expect(gpuBytesPerRow('Q4_0', 32)).toBe(20);
  });

  it('equals the GGUF\'s bytes for real models\' rows (a multiple of 256) and stays within 1% from 32 blocks on', () => {
    for (const dtype of DTYPES) {
      for (const k of [2048, 4096, 5632, 14336]) expect(gpuBytesPerRow(dtype, k)).toBe(tensorByteLength(dtype, k));
      const { blockSize } = DTYPE_INFO[dtype];
      for (let blocks = 32; blocks < 40; blocks++) {
        const k = blocks * Math.max(blockSize, 32);
        expect(gpuBytesPerRow(dtype, k) / tensorByteLength(dtype, k)).toBeLessThanOrEqual(1.01);
      }
    }
  });

  it('rejects rows that are not whole blocks', () => {
    expect(() => gpuBytesPerRow('Q4_K', 128)).toThrow(RangeError);
    expect(() => gpuBytesPerRow('Q4_0', 0)).toThrow(RangeError);
  });
});

describe('WTYPE', () => {
  it('is each type\'s ggml id', () => {
    expect(WTYPE).toEqual({ F32: 0, F16: 1, BF16: 30, Q8_0: 8, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q2_K: 10, Q3_K: 11, Q4_K: 12, Q5_K: 13, Q6_K: 14, IQ4_NL: 20, IQ4_XS: 23, MXFP4: 39 });
  });

  it.each(DTYPES)('%s: shaders/lib/dequant.wgsl names its WTYPE and, when quantised, its first GPU stream per block in words', (dtype) => {
    const constant = (name: string) => new RegExp(`const ${name}: u32 = (\\d+)u;`).exec(dequantLib)?.[1];
    expect(constant(`WT_${dtype}`)).toBe(String(WTYPE[dtype]));
    const { blockSize, bytesPerBlock, gpu } = DTYPE_INFO[dtype];
    if (blockSize > 1) expect(constant(`${dtype}_WORDS`)).toBe(String((gpu.streams?.[0]?.[1] ?? bytesPerBlock) / 4));
  });
});

describe('splitRows', () => {
  it('keeps a matrix that fits in one part', () => {
    expect(splitRows(37, 100, 3700)).toEqual([{ row0: 0, rows: 37 }]);
    expect(splitRows(1, 100, 100)).toEqual([{ row0: 0, rows: 1 }]);
    expect(splitRows(37, 100, Infinity)).toEqual([{ row0: 0, rows: 37 }]);
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
