/**
 * Tensor types shared by every format reader and writer, the ggml block table, and the typed
 * error every reader throws.
 */

/** Element types webgpu-llm can load. Quantised types are ggml blocks along the innermost dim. */
export type DType = 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q6_K';

export const DTYPES: readonly DType[] = ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q6_K'];

/** One tensor inside a file. */
export interface TensorInfo {
  name: string;
  dtype: DType;
  /** Row-major, outermost first (PyTorch order: a linear weight is `[out, in]`). */
  shape: number[];
  /** Absolute byte offset of the tensor's first byte in its file. */
  offset: number;
  /** Bytes the tensor occupies (whole ggml blocks for quantised types). */
  byteLength: number;
}

export interface DTypeInfo {
  /** The `ggml_type` enum value GGUF stores. */
  ggmlType: number;
  /** Elements per block (1 for plain floats). */
  blockSize: number;
  /** Bytes per block. */
  bytesPerBlock: number;
}

export const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = {
  F32: { ggmlType: 0, blockSize: 1, bytesPerBlock: 4 },
  F16: { ggmlType: 1, blockSize: 1, bytesPerBlock: 2 },
  BF16: { ggmlType: 30, blockSize: 1, bytesPerBlock: 2 },
  Q8_0: { ggmlType: 8, blockSize: 32, bytesPerBlock: 34 }, // f16 d + 32 x int8
  Q4_0: { ggmlType: 2, blockSize: 32, bytesPerBlock: 18 }, // f16 d + 16 bytes of nibbles
  Q4_K: { ggmlType: 12, blockSize: 256, bytesPerBlock: 144 }, // f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes
  Q6_K: { ggmlType: 14, blockSize: 256, bytesPerBlock: 210 }, // 128 ql, 64 qh, 16 int8 scales, f16 d
};

/**
 * Names of every ggml type id we know of, so an unsupported tensor's error can say what it is
 * ("Q5_K") rather than only a number. Ids missing here are unknown to us altogether.
 */
export const GGML_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 6: 'Q5_0', 7: 'Q5_1', 8: 'Q8_0', 9: 'Q8_1',
  10: 'Q2_K', 11: 'Q3_K', 12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K', 15: 'Q8_K',
  16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS', 19: 'IQ1_S', 20: 'IQ4_NL', 21: 'IQ3_S', 22: 'IQ2_S',
  23: 'IQ4_XS', 24: 'I8', 25: 'I16', 26: 'I32', 27: 'I64', 28: 'F64', 29: 'IQ1_M', 30: 'BF16',
  34: 'TQ1_0', 35: 'TQ2_0', 39: 'MXFP4',
};

const BY_GGML_TYPE = new Map<number, DType>(DTYPES.map((d) => [DTYPE_INFO[d].ggmlType, d]));

/** The DType for a ggml type id, or undefined when we cannot load that type. */
export function dtypeFromGgmlType(id: number): DType | undefined {
  return BY_GGML_TYPE.get(id);
}

/**
 * Bytes needed for `elementCount` elements of `dtype`. Quantised types need whole blocks, so the
 * count must be a multiple of the block size (a RangeError otherwise: a caller bug, not a file's).
 */
export function tensorByteLength(dtype: DType, elementCount: number): number {
  const { blockSize, bytesPerBlock } = DTYPE_INFO[dtype];
  if (!Number.isSafeInteger(elementCount) || elementCount < 0) {
    throw new RangeError(`element count must be a non-negative integer, got ${elementCount}`);
  }
  if (elementCount % blockSize !== 0) {
    throw new RangeError(`${dtype} needs a multiple of ${blockSize} elements, got ${elementCount}`);
  }
  return (elementCount / blockSize) * bytesPerBlock;
}

/** Product of a shape's dims (1 for a scalar). */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export type FormatErrorCode =
  | 'bad_magic' // the file does not start with the format's signature
  | 'unsupported_version' // a format version we do not read (GGUF v1, big-endian GGUF)
  | 'truncated' // the file ends before a structure it declares
  | 'bad_header' // a header field is malformed (counts, JSON, alignment, offsets)
  | 'bad_metadata' // a metadata value has an unknown type or impossible size
  | 'unknown_type' // a tensor's type id is not a ggml type we know of
  | 'unsupported_dtype' // a known tensor type we cannot load (Q5_K, I8, F8_E4M3, ...)
  | 'bad_shape' // a tensor's dims do not fit its type or its byte range
  | 'out_of_range' // a tensor's data lies (partly) past the end of the file
  | 'http' // an HTTP request failed (status in the message and `status`)
  | 'io'; // a local read failed

/** Every failure of a reader or byte source: says which file and what is wrong with it. */
export class FormatError extends Error {
  override readonly name = 'FormatError';
  constructor(
    readonly code: FormatErrorCode,
    /** The file (path, URL or blob name) at fault. */
    readonly file: string,
    message: string,
    /** The HTTP status, for `code: 'http'`. */
    readonly status?: number,
  ) {
    super(`${file}: ${message}`);
  }

  toJSON(): { name: string; code: FormatErrorCode; file: string; message: string; status?: number } {
    return { name: this.name, code: this.code, file: this.file, message: this.message, status: this.status };
  }
}
