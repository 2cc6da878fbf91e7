import { describe, expect, it } from 'vitest';
import { DTYPE_INFO, DTYPES, dtypeFromGgmlType, GGML_TYPE_NAMES, SAFETENSORS_DTYPES, tensorByteLength } from './dtypes';

describe('the weight-type codec table', () => {
  it('matches ggml type ids, block sizes and block bytes', () => {
    expect(DTYPES.map((d) => [d, DTYPE_INFO[d].ggmlType, DTYPE_INFO[d].blockSize, DTYPE_INFO[d].bytesPerBlock])).toEqual([
      ['F32', 0, 1, 4],
      ['F16', 1, 1, 2],
      ['BF16', 30, 1, 2],
      ['Q8_0', 8, 32, 34],
      ['Q4_0', 2, 32, 18],
      ['Q4_1', 3, 32, 20],
      ['Q5_0', 6, 32, 22],
      ['Q5_1', 7, 32, 24],
      ['Q2_K', 10, 256, 84],
      ['Q3_K', 11, 256, 110],
      ['Q4_K', 12, 256, 144],
      ['Q5_K', 13, 256, 176],
      ['Q6_K', 14, 256, 210],
      ['IQ4_NL', 20, 32, 18],
      ['IQ4_XS', 23, 256, 136],
      ['MXFP4', 39, 32, 17],
    ]);
  });

  it.each(DTYPES)('%s: its ggml id is ggml\'s name for it and no other row\'s', (d) => {
    expect(GGML_TYPE_NAMES[DTYPE_INFO[d].ggmlType]).toBe(d);
    expect(DTYPES.filter((o) => DTYPE_INFO[o].ggmlType === DTYPE_INFO[d].ggmlType)).toEqual([d]);
  });

  it.each(DTYPES)('%s: its GPU streams hold every ggml byte once, the quants first and whole vec4s per block', (d) => {
    const { blockSize, bytesPerBlock, gpu } = DTYPE_INFO[d];
    if (!gpu.streams) {
      // Kept as ggml has it: a quantised block must then be whole words already.
      if (blockSize > 1) expect(bytesPerBlock % 4, 'a quantised block kept as it is must be whole words').toBe(0);
      return;
    }
    // The streams tile the ggml block: every byte in exactly one stream.
    const covered = new Uint8Array(bytesPerBlock);
    for (const [from, length] of gpu.streams) for (let i = from; i < from + length; i++) covered[i]! += 1;
    expect([...covered].every((c) => c === 1)).toBe(true);
    // The first stream is the quants: whole 16-byte vectors per block, so every block's start stays aligned.
    expect(gpu.streams[0]![1] % 16).toBe(0);
  });

  it.each(DTYPES)('%s: its codec writes whole blocks and reads back what it wrote', (d) => {
    const { blockSize, bytesPerBlock } = DTYPE_INFO[d];
    const n = Math.max(blockSize, 2) * 2;
    const x = Float32Array.from({ length: n }, (_, i) => (i % 5) - 2);
    const out = new Uint8Array((n / blockSize) * bytesPerBlock + 1);
    DTYPE_INFO[d].quantize(x, out.subarray(0, out.length - 1));
    expect(out[out.length - 1], 'wrote past its blocks').toBe(0);
    const y = new Float32Array(n);
    DTYPE_INFO[d].dequantize(out, y);
    const again = new Uint8Array(out.length - 1);
    DTYPE_INFO[d].quantize(y, again);
    expect(again).toEqual(out.subarray(0, out.length - 1));
  });

  it('names the types safetensors stores under the same name', () => {
    expect(SAFETENSORS_DTYPES).toEqual(['F32', 'F16', 'BF16']);
  });

  it('maps ggml type ids back to dtypes and leaves unsupported ones undefined', () => {
    for (const d of DTYPES) expect(dtypeFromGgmlType(DTYPE_INFO[d].ggmlType)).toBe(d);
    expect(dtypeFromGgmlType(16)).toBeUndefined(); // IQ2_XXS
  });

  it('computes byte lengths for whole blocks and refuses partial ones', () => {
    expect(tensorByteLength('F16', 10)).toBe(20);
    expect(tensorByteLength('Q4_K', 512)).toBe(288);
    expect(tensorByteLength('Q6_K', 0)).toBe(0);
    expect(() => tensorByteLength('Q4_0', 48)).toThrow(RangeError);
  });
});
