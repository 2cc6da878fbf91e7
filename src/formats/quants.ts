/**
 * CPU quantise / dequantise for every DType, byte-compatible with ggml (llama.cpp). The GPU
 * kernels are tested against these; the GGUF writer uses them to make fixtures.
 *
 * Bytes are little endian, as GGUF and safetensors store them (and as every WebGPU host is).
 */
import { bf16ArrayToF32, f16ArrayToF32, f32ArrayToBf16, f32ArrayToF16 } from './halfs';
import { dequantizeQ4_0, dequantizeQ8_0, quantizeQ4_0, quantizeQ8_0 } from './quants-legacy';
import { dequantizeQ4_K, dequantizeQ6_K, quantizeQ4_K, quantizeQ6_K } from './quants-k';
import { DTYPE_INFO, tensorByteLength, type DType } from './types';

export { packScalesMinsK4, unpackScalesMinsK4 } from './quants-k';

/** A view of `bytes` as `T`, copying first only when the offset is not aligned for it. */
function aligned<T>(bytes: Uint8Array, width: number, make: (buf: ArrayBufferLike, off: number, len: number) => T, count: number): T {
  if (bytes.byteOffset % width === 0) return make(bytes.buffer, bytes.byteOffset, count);
  const copy = bytes.slice(0, count * width);
  return make(copy.buffer, 0, count);
}

/**
 * Decodes `elementCount` elements of `dtype` from `bytes` (which may be longer). The count must
 * be a whole number of blocks; quantised tensors store each row as whole blocks.
 */
export function dequantize(dtype: DType, bytes: Uint8Array, elementCount: number, out?: Float32Array): Float32Array {
  const need = tensorByteLength(dtype, elementCount);
  if (bytes.length < need) {
    throw new RangeError(`${elementCount} ${dtype} elements need ${need} bytes, got ${bytes.length}`);
  }
  const y = out ?? new Float32Array(elementCount);
  if (y.length < elementCount) throw new RangeError(`output holds ${y.length} elements, need ${elementCount}`);
  const dst = y.length === elementCount ? y : y.subarray(0, elementCount);
  switch (dtype) {
    case 'F32':
      dst.set(aligned(bytes, 4, (b, o, n) => new Float32Array(b, o, n), elementCount));
      break;
    case 'F16':
      f16ArrayToF32(aligned(bytes, 2, (b, o, n) => new Uint16Array(b, o, n), elementCount), dst);
      break;
    case 'BF16':
      bf16ArrayToF32(aligned(bytes, 2, (b, o, n) => new Uint16Array(b, o, n), elementCount), dst);
      break;
    case 'Q8_0':
      dequantizeQ8_0(bytes, dst);
      break;
    case 'Q4_0':
      dequantizeQ4_0(bytes, dst);
      break;
    case 'Q4_K':
      dequantizeQ4_K(bytes, dst);
      break;
    case 'Q6_K':
      dequantizeQ6_K(bytes, dst);
      break;
  }
  return y;
}

/** Encodes `values` as `dtype`; the length must be a whole number of blocks. Returns fresh bytes. */
export function quantize(dtype: DType, values: Float32Array): Uint8Array {
  const out = new Uint8Array(tensorByteLength(dtype, values.length));
  switch (dtype) {
    case 'F32':
      out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      break;
    case 'F16':
      f32ArrayToF16(values, new Uint16Array(out.buffer));
      break;
    case 'BF16':
      f32ArrayToBf16(values, new Uint16Array(out.buffer));
      break;
    case 'Q8_0':
      quantizeQ8_0(values, out);
      break;
    case 'Q4_0':
      quantizeQ4_0(values, out);
      break;
    case 'Q4_K':
      quantizeQ4_K(values, out);
      break;
    case 'Q6_K':
      quantizeQ6_K(values, out);
      break;
  }
  return out;
}

/** Elements per block for `dtype` (re-exported for callers that only import quants). */
export function blockSize(dtype: DType): number {
  return DTYPE_INFO[dtype].blockSize;
}
