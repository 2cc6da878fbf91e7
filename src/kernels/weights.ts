/**
 * Weights as the GPU reads them: every kernel sees a weight as `array<u32>`, so each ggml block
 * is re-laid out as its row of the codec table says (`DTYPE_INFO[dtype].gpu` in
 * src/formats/dtypes.ts: fields moved onto 4-byte boundaries, element order unchanged), and
 * a kernel is told the type through `override WTYPE`.
 */
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { DTYPE_INFO, DTYPES, tensorByteLength, type DType } from '../formats/types';

/**
 * The `override WTYPE` code of each dtype: its ggml type id, so a shader and a GGUF header speak
 * the same numbers. `shaders/lib/dequant.wgsl` names the same values (`WT_<dtype>`).
 */
export const WTYPE = Object.fromEntries(DTYPES.map((d) => [d, DTYPE_INFO[d].ggmlType])) as Readonly<Record<DType, number>>;

/**
 * Bytes of one row of `k` elements in the GPU layout. Rows must start on a word, so `k` must be a
 * whole number of blocks and (for F16/BF16) even.
 */
export function gpuBytesPerRow(dtype: DType, k: number): number {
  const { blockSize, gpu } = DTYPE_INFO[dtype];
  if (!Number.isInteger(k) || k <= 0 || k % blockSize !== 0) {
    throw new RangeError(`a ${dtype} row needs a positive multiple of ${blockSize} elements, got ${k}`);
  }
  const bytes = (k / blockSize) * gpu.bytesPerBlock;
  if (bytes % 4 !== 0) throw new RangeError(`a ${dtype} row of ${k} elements is ${bytes} bytes, not whole u32 words`);
  return bytes;
}

/**
 * ggml bytes of a whole tensor (whole blocks) in the GPU layout. Types whose block the GPU takes
 * as it is come back unchanged when already a whole number of words (the result may alias `bytes`).
 */
export function repackForGPU(dtype: DType, bytes: Uint8Array): Uint8Array {
  const { bytesPerBlock, gpu } = DTYPE_INFO[dtype];
  if (bytes.length % bytesPerBlock !== 0) {
    throw new RangeError(`${dtype} data must be whole ${bytesPerBlock}-byte blocks, got ${bytes.length} bytes`);
  }
  if (!gpu.moves) {
    if (bytes.length % 4 === 0) return bytes;
    const padded = new Uint8Array(Math.ceil(bytes.length / 4) * 4);
    padded.set(bytes);
    return padded;
  }
  const blocks = bytes.length / bytesPerBlock;
  const out = new Uint8Array(blocks * gpu.bytesPerBlock); // padding bytes stay zero
  for (let b = 0; b < blocks; b++) {
    const src = b * bytesPerBlock;
    const dst = b * gpu.bytesPerBlock;
    for (const [from, to, length] of gpu.moves) out.set(bytes.subarray(src + from, src + from + length), dst + to);
  }
  return out;
}

/** Uploads a weight tensor's ggml bytes as a storage buffer in the GPU layout. */
export function uploadWeight(device: GPUDevice, dtype: DType, bytes: Uint8Array, label?: string): GPUBuffer {
  return uploadBuffer(device, repackForGPU(dtype, bytes), STORAGE, label ?? `weight ${dtype}`);
}

/** Rows [row0, row0 + rows) of a weight matrix, in a buffer of their own (the GPU layout). */
export interface WeightPart {
  buffer: GPUBuffer;
  row0: number;
  rows: number;
}

/**
 * How a matrix of `rows` rows of `rowBytes` bytes (GPU layout) splits into parts of at most
 * `maxBytes` each: as few parts as can be, of equal rows but the last. A matrix that fits is one
 * part. Whole rows only, so every ggml block stays in one part; null when a single row is larger.
 */
export function splitRows(rows: number, rowBytes: number, maxBytes: number): Array<{ row0: number; rows: number }> | null {
  const perPart = Math.floor(maxBytes / rowBytes);
  if (perPart < 1) return null;
  const count = Math.ceil(rows / perPart);
  // Balanced parts (e.g. 3 × 100 rows rather than 2 × 128 + 44): the same dispatch count, and each
  // part's grid is as small as it can be.
  const size = Math.ceil(rows / count);
  return Array.from({ length: count }, (_, i) => ({ row0: i * size, rows: Math.min(size, rows - i * size) }));
}

/**
 * Uploads a [rows, cols] weight matrix (ggml bytes of `dtype`) as one or more row parts of at most
 * `maxBytes` each (the device's binding and buffer limits). Separate buffers rather than bindings
 * at offsets of one buffer: a tensor may exceed maxBufferSize as well as the binding size, and a
 * binding offset must be a multiple of minStorageBufferOffsetAlignment (256 bytes), which a row
 * boundary seldom is. Throws a RangeError when one row alone is larger than `maxBytes`.
 */
export function uploadWeightParts(
  device: GPUDevice,
  dtype: DType,
  bytes: Uint8Array,
  shape: { rows: number; cols: number },
  maxBytes: number,
  label = `weight ${dtype}`,
): WeightPart[] {
  const rowBytes = gpuBytesPerRow(dtype, shape.cols);
  const plan = splitRows(shape.rows, rowBytes, maxBytes);
  if (!plan) throw new RangeError(`${label}: one row is ${rowBytes} bytes, more than the ${maxBytes} bytes a GPU binding may hold`);
  if (plan.length === 1) return [{ buffer: uploadWeight(device, dtype, bytes, label), row0: 0, rows: shape.rows }];
  const fileRowBytes = tensorByteLength(dtype, shape.cols);
  const parts: WeightPart[] = [];
  try {
    for (const [i, { row0, rows }] of plan.entries()) {
      const slice = bytes.subarray(row0 * fileRowBytes, (row0 + rows) * fileRowBytes);
      parts.push({ buffer: uploadWeight(device, dtype, slice, `${label} [part ${i + 1}/${plan.length}]`), row0, rows });
    }
  } catch (e) {
    for (const p of parts) p.buffer.destroy();
    throw e;
  }
  return parts;
}
