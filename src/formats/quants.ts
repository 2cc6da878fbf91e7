/**
 * CPU quantise / dequantise for every DType, byte-compatible with ggml (llama.cpp): checks the
 * sizes, then runs the type's codec from the table in `dtypes.ts`. The GPU kernels are tested
 * against these; the GGUF writer uses them to make fixtures.
 *
 * Bytes are little endian, as GGUF and safetensors store them (and as every WebGPU host is).
 */
import { DTYPE_INFO, tensorByteLength, type DType } from './types';

export { packScalesMinsK4, unpackScalesMinsK4 } from './quants-k';

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
  DTYPE_INFO[dtype].dequantize(bytes, y.length === elementCount ? y : y.subarray(0, elementCount));
  return y;
}

/** Encodes `values` as `dtype`; the length must be a whole number of blocks. Returns fresh bytes. */
export function quantize(dtype: DType, values: Float32Array): Uint8Array {
  const out = new Uint8Array(tensorByteLength(dtype, values.length));
  DTYPE_INFO[dtype].quantize(values, out);
  return out;
}
