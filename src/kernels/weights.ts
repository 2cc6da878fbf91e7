/**
 * Weights as the GPU reads them: every kernel sees a weight as `array<u32>`, one row after
 * another, each row laid out as its row of the codec table says (`DTYPE_INFO[dtype].gpu` in
 * src/formats/dtypes.ts): the ggml blocks as they are when they are whole words, else structure-of-
 * arrays per row (the quants of every block contiguous, then the scales and headers, each stream
 * padded only to a whole word), so that a row's bytes equal the GGUF's but for a few bytes of
 * padding. A per-row layout keeps row splits (uploadWeightParts) and the q/k/v concatenation
 * (rows of the same type, end to end) simple. A kernel is told the type through `override WTYPE`;
 * shaders/lib/dequant.wgsl is the one place that reads the layout.
 */
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { DTYPE_INFO, DTYPES, tensorByteLength, type DType, type Stream } from '../formats/types';

/**
 * The `override WTYPE` code of each dtype: its ggml type id, so a shader and a GGUF header speak
 * the same numbers. `shaders/lib/dequant.wgsl` names the same values (`WT_<dtype>`).
 */
export const WTYPE = Object.fromEntries(DTYPES.map((d) => [d, DTYPE_INFO[d].ggmlType])) as Readonly<Record<DType, number>>;

/** A type's streams: its table row's, or the whole block as one. */
function streamsOf(dtype: DType): readonly Stream[] {
  const { gpu, bytesPerBlock } = DTYPE_INFO[dtype];
  return gpu.streams ?? [[0, bytesPerBlock]];
}

const words = (bytes: number) => Math.ceil(bytes / 4) * 4;

/**
 * Bytes of one row of `k` elements in the GPU layout: each stream's bytes for the row's blocks,
 * padded to a word. `k` must be a whole number of blocks.
 */
export function gpuBytesPerRow(dtype: DType, k: number): number {
  const { blockSize } = DTYPE_INFO[dtype];
  if (!Number.isInteger(k) || k <= 0 || k % blockSize !== 0) {
    throw new RangeError(`a ${dtype} row needs a positive multiple of ${blockSize} elements, got ${k}`);
  }
  const blocks = k / blockSize;
  return streamsOf(dtype).reduce((n, [, length]) => n + words(blocks * length), 0);
}

/**
 * ggml bytes of a matrix of rows of `cols` elements (whole rows) in the GPU layout. A row the GPU
 * takes as it is comes back unchanged (the result may alias `bytes`).
 */
export function repackForGPU(dtype: DType, bytes: Uint8Array, cols: number): Uint8Array {
  const { bytesPerBlock, blockSize } = DTYPE_INFO[dtype];
  if (bytes.length % bytesPerBlock !== 0) {
    throw new RangeError(`${dtype} data must be whole ${bytesPerBlock}-byte blocks, got ${bytes.length} bytes`);
  }
  const fileRow = tensorByteLength(dtype, cols);
  if (bytes.length % fileRow !== 0) {
    throw new RangeError(`${dtype} data must be whole rows of ${cols} elements (${fileRow} bytes), got ${bytes.length} bytes`);
  }
  const gpuRow = gpuBytesPerRow(dtype, cols);
  const rows = bytes.length / fileRow;
  const streams = streamsOf(dtype);
  if (streams.length === 1 && gpuRow === fileRow) return bytes;
  const blocks = cols / blockSize;
  const out = new Uint8Array(rows * gpuRow); // padding bytes stay zero
  for (let r = 0; r < rows; r++) {
    let dst = r * gpuRow;
    for (const [from, length] of streams) {
      let src = r * fileRow + from;
      if (length >= 32) {
        // Long fields (quants): a native copy each.
        for (let b = 0; b < blocks; b++, src += bytesPerBlock, dst += length) out.set(bytes.subarray(src, src + length), dst);
      } else {
        // Short ones (scales, headers): a byte loop beats a subarray per field.
        for (let b = 0; b < blocks; b++, src += bytesPerBlock - length) for (let i = 0; i < length; i++) out[dst++] = bytes[src++]!;
      }
      dst = words(dst - r * gpuRow) + r * gpuRow;
    }
  }
  return out;
}

/** Uploads a weight matrix's ggml bytes (rows of `cols` elements) as a storage buffer in the GPU layout. */
export function uploadWeight(device: GPUDevice, dtype: DType, bytes: Uint8Array, cols: number, label?: string): GPUBuffer {
  return uploadBuffer(device, repackForGPU(dtype, bytes, cols), STORAGE, label ?? `weight ${dtype}`);
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
  // No limit (maxBytes Infinity, uploadWeights' default): one part, not rows / Infinity = none.
  const count = Math.max(1, Math.ceil(rows / perPart));
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
  if (plan.length === 1) return [{ buffer: uploadWeight(device, dtype, bytes, shape.cols, label), row0: 0, rows: shape.rows }];
  const fileRowBytes = tensorByteLength(dtype, shape.cols);
  const parts: WeightPart[] = [];
  try {
    for (const [i, { row0, rows }] of plan.entries()) {
      const slice = bytes.subarray(row0 * fileRowBytes, (row0 + rows) * fileRowBytes);
      parts.push({ buffer: uploadWeight(device, dtype, slice, shape.cols, `${label} [part ${i + 1}/${plan.length}]`), row0, rows });
    }
  } catch (e) {
    for (const p of parts) p.buffer.destroy();
    throw e;
  }
  return parts;
}
