/**
 * What every format reader and writer shares: a tensor's description, the typed error every
 * reader throws, and (re-exported) the weight-type codec table of `dtypes.ts`.
 */
import type { DType } from './dtypes';

export * from './dtypes';

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
