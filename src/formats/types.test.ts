import { describe, expect, it } from 'vitest';
import { DTYPE_INFO, DTYPES, dtypeFromGgmlType, FormatError, tensorByteLength } from './types';

describe('dtype table', () => {
  it('matches ggml type ids, block sizes and block bytes', () => {
    expect(DTYPES.map((d) => [d, DTYPE_INFO[d].ggmlType, DTYPE_INFO[d].blockSize, DTYPE_INFO[d].bytesPerBlock])).toEqual([
      ['F32', 0, 1, 4],
      ['F16', 1, 1, 2],
      ['BF16', 30, 1, 2],
      ['Q8_0', 8, 32, 34],
      ['Q4_0', 2, 32, 18],
      ['Q4_K', 12, 256, 144],
      ['Q6_K', 14, 256, 210],
    ]);
  });

  it('maps ggml type ids back to dtypes and leaves unsupported ones undefined', () => {
    for (const d of DTYPES) expect(dtypeFromGgmlType(DTYPE_INFO[d].ggmlType)).toBe(d);
    expect(dtypeFromGgmlType(13)).toBeUndefined(); // Q5_K
  });

  it('computes byte lengths for whole blocks and refuses partial ones', () => {
    expect(tensorByteLength('F16', 10)).toBe(20);
    expect(tensorByteLength('Q4_K', 512)).toBe(288);
    expect(tensorByteLength('Q6_K', 0)).toBe(0);
    expect(() => tensorByteLength('Q4_0', 48)).toThrow(RangeError);
  });

  it('FormatError carries code and file and serialises them', () => {
    const e = new FormatError('truncated', 'a.gguf', 'ends early');
    expect(e).toBeInstanceOf(Error);
    expect(e.message).toBe('a.gguf: ends early');
    expect(JSON.parse(JSON.stringify(e))).toMatchObject({ name: 'FormatError', code: 'truncated', file: 'a.gguf' });
  });
});
