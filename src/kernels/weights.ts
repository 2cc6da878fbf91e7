/**
 * Weights as the GPU reads them: every kernel sees a weight as `array<u32>`, so each quantised
 * block is re-laid out with its fields on 4-byte boundaries (docs/ARCHITECTURE.md, "Kernels and
 * ops"). Element order inside a block is ggml's, unchanged:
 *   Q8_0  36 B = [d:f16, pad:2, qs:32]           (ggml: 34 B, d then qs)
 *   Q4_0  20 B = [d:f16, pad:2, qs:16]           (ggml: 18 B)
 *   Q4_K 144 B = unchanged (already word-aligned: [d, dmin]:u32, scales:12, qs:128)
 *   Q6_K 212 B = [ql:128, qh:64, scales:16, d:f16, pad:2] (ggml: 210 B)
 *   F32 / F16 / BF16: unchanged, the tensor padded to a whole word.
 */
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { DTYPE_INFO, type DType } from '../formats/types';

/** Bytes per block on the GPU (elements per block are ggml's, `DTYPE_INFO[dtype].blockSize`). */
export const GPU_BYTES_PER_BLOCK: Readonly<Record<DType, number>> = {
  F32: 4,
  F16: 2,
  BF16: 2,
  Q8_0: 36,
  Q4_0: 20,
  Q4_K: 144,
  Q6_K: 212,
};

/**
 * The `override WTYPE` code of each dtype: its ggml type id, so a shader and a GGUF header speak
 * the same numbers. `shaders/lib/dequant.wgsl` names the same values.
 */
export const WTYPE: Readonly<Record<DType, number>> = {
  F32: DTYPE_INFO.F32.ggmlType, // 0
  F16: DTYPE_INFO.F16.ggmlType, // 1
  BF16: DTYPE_INFO.BF16.ggmlType, // 30
  Q8_0: DTYPE_INFO.Q8_0.ggmlType, // 8
  Q4_0: DTYPE_INFO.Q4_0.ggmlType, // 2
  Q4_K: DTYPE_INFO.Q4_K.ggmlType, // 12
  Q6_K: DTYPE_INFO.Q6_K.ggmlType, // 14
};

/**
 * Bytes of one row of `k` elements in the GPU layout. Rows must start on a word, so `k` must be a
 * whole number of blocks and (for F16/BF16) even.
 */
export function gpuBytesPerRow(dtype: DType, k: number): number {
  const { blockSize } = DTYPE_INFO[dtype];
  if (!Number.isInteger(k) || k <= 0 || k % blockSize !== 0) {
    throw new RangeError(`a ${dtype} row needs a positive multiple of ${blockSize} elements, got ${k}`);
  }
  const bytes = (k / blockSize) * GPU_BYTES_PER_BLOCK[dtype];
  if (bytes % 4 !== 0) throw new RangeError(`a ${dtype} row of ${k} elements is ${bytes} bytes, not whole u32 words`);
  return bytes;
}

/** Where each field of a ggml block moves to: [source offset, destination offset, length]. */
const MOVES: Partial<Record<DType, ReadonlyArray<readonly [number, number, number]>>> = {
  Q8_0: [[0, 0, 2], [2, 4, 32]],
  Q4_0: [[0, 0, 2], [2, 4, 16]],
  Q6_K: [[0, 0, 210]],
};

/**
 * ggml bytes of a whole tensor (whole blocks) in the GPU layout. Plain floats and Q4_K come back
 * as they are when already a whole number of words (the result may alias `bytes`).
 */
export function repackForGPU(dtype: DType, bytes: Uint8Array): Uint8Array {
  const { bytesPerBlock } = DTYPE_INFO[dtype];
  if (bytes.length % bytesPerBlock !== 0) {
    throw new RangeError(`${dtype} data must be whole ${bytesPerBlock}-byte blocks, got ${bytes.length} bytes`);
  }
  const moves = MOVES[dtype];
  if (!moves) {
    if (bytes.length % 4 === 0) return bytes;
    const padded = new Uint8Array(Math.ceil(bytes.length / 4) * 4);
    padded.set(bytes);
    return padded;
  }
  const blocks = bytes.length / bytesPerBlock;
  const gpuBlock = GPU_BYTES_PER_BLOCK[dtype];
  const out = new Uint8Array(blocks * gpuBlock); // padding bytes stay zero
  for (let b = 0; b < blocks; b++) {
    const src = b * bytesPerBlock;
    const dst = b * gpuBlock;
    for (const [from, to, length] of moves) out.set(bytes.subarray(src + from, src + from + length), dst + to);
  }
  return out;
}

/** Uploads a weight tensor's ggml bytes as a storage buffer in the GPU layout. */
export function uploadWeight(device: GPUDevice, dtype: DType, bytes: Uint8Array, label?: string): GPUBuffer {
  return uploadBuffer(device, repackForGPU(dtype, bytes), STORAGE, label ?? `weight ${dtype}`);
}
