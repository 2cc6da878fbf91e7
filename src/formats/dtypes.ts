/**
 * The weight-type codec table: one row per element type webgpu-llm loads, holding all that a type
 * means anywhere in the library: its ggml id and block (files), its layout on the GPU (kernels)
 * and its CPU codec (fixtures, the reference, dequantising norms at load).
 *
 * `DType` is this table's keys, so a new type is one row here, its dequantiser in
 * `shaders/lib/dequant.wgsl` (a `WT_<name>` constant with the row's ggml id, its `<name>_WORDS`),
 * and whatever else is keyed `Record<DType, …>`: the compiler names each place.
 */
import { bf16ArrayToF32, f16ArrayToF32, f32ArrayToBf16, f32ArrayToF16 } from './halfs';
import {
  dequantizeQ2_K,
  dequantizeQ3_K,
  dequantizeQ4_K,
  dequantizeQ5_K,
  dequantizeQ6_K,
  quantizeQ2_K,
  quantizeQ3_K,
  quantizeQ4_K,
  quantizeQ5_K,
  quantizeQ6_K,
} from './quants-k';
import {
  dequantizeQ4_0,
  dequantizeQ4_1,
  dequantizeQ5_0,
  dequantizeQ5_1,
  dequantizeQ8_0,
  quantizeQ4_0,
  quantizeQ4_1,
  quantizeQ5_0,
  quantizeQ5_1,
  quantizeQ8_0,
} from './quants-legacy';
import { dequantizeIQ4_NL, dequantizeIQ4_XS, dequantizeMXFP4, quantizeIQ4_NL, quantizeIQ4_XS, quantizeMXFP4 } from './quants-lut';

/** A field of a ggml block that the GPU keeps in a stream of its own: byte offset in the block, length. */
export type Stream = readonly [from: number, length: number];

export interface DTypeInfo {
  /**
   * The `ggml_type` enum value GGUF stores. It is also the kernels' `override WTYPE`, so a shader
   * and a GGUF header speak the same numbers (`WT_<name>` in shaders/lib/dequant.wgsl).
   */
  ggmlType: number;
  /** Elements per block (1 for plain floats); quantised blocks run along a row. */
  blockSize: number;
  /** Bytes per block in ggml's layout: in files and on the CPU. */
  bytesPerBlock: number;
  /**
   * The row as the GPU holds it (src/kernels/weights.ts). Kernels read every weight as
   * `array<u32>`, one row after another, each row a whole number of words. With `streams` a row
   * is structure-of-arrays: stream i holds field i of every block of the row, block after block,
   * and starts on a word (only a stream's end is padded, to the next word). The first stream is
   * the quants, so that those of consecutive blocks are contiguous and (with whole-vec4 quants per
   * block) 16-byte aligned for vector loads; scales and headers follow, e.g. f16 scales two per
   * word. The bytes equal the GGUF's but for at most 3 bytes of padding per stream and row.
   * Without `streams` the row is the ggml blocks as they are (already whole words, or plain
   * floats padded to a word).
   */
  gpu: {
    streams?: readonly Stream[];
    /**
     * The decode matvec may read the quants as 16-byte vectors (shaders/lib/dequant_wide.wgsl
     * `dq_group`, which has a case for each such type): every 4 chunks from a multiple of 4 are 4
     * consecutive quant words on a 16-byte boundary of the row. Used where the rows are whole
     * vec4s too (src/kernels/matmul.ts `wideLoads`).
     */
    wide?: boolean;
    /**
     * The integer dot-product matvec has this type (shaders/lib/dequant_int.wgsl `dq_idot`, a case
     * for each): its quants dot an int8 activation with `dot4I8Packed`, 32 columns at a time
     * (src/kernels/matvec-dot.ts; used with the engine's `integerDot` option).
     */
    intDot?: boolean;
  };
  /** safetensors stores this type under the same name. */
  safetensors: boolean;
  /** Encodes `values` (whole blocks) into `out`, exactly their bytes, as ggml does. */
  quantize(values: Float32Array, out: Uint8Array): void;
  /** Decodes `y.length` elements (whole blocks) from the start of `bytes`. */
  dequantize(bytes: Uint8Array, y: Float32Array): void;
}

const ROWS = {
  F32: {
    ggmlType: 0,
    blockSize: 1,
    bytesPerBlock: 4,
    gpu: {},
    safetensors: true,
    quantize: (x, out) => out.set(new Uint8Array(x.buffer, x.byteOffset, x.byteLength)),
    dequantize: (bytes, y) => y.set(view(bytes, Float32Array, y.length)),
  },
  F16: {
    ggmlType: 1,
    blockSize: 1,
    bytesPerBlock: 2,
    gpu: {},
    safetensors: true,
    quantize: (x, out) => f32ArrayToF16(x, new Uint16Array(out.buffer, out.byteOffset, x.length)),
    dequantize: (bytes, y) => f16ArrayToF32(view(bytes, Uint16Array, y.length), y),
  },
  BF16: {
    ggmlType: 30,
    blockSize: 1,
    bytesPerBlock: 2,
    gpu: {},
    safetensors: true,
    quantize: (x, out) => f32ArrayToBf16(x, new Uint16Array(out.buffer, out.byteOffset, x.length)),
    dequantize: (bytes, y) => bf16ArrayToF32(view(bytes, Uint16Array, y.length), y),
  },
  // ggml [d:f16, qs:32 × i8] (34 B); GPU row: every block's qs (8 words), then the d's two per word.
  Q8_0: {
    ggmlType: 8,
    blockSize: 32,
    bytesPerBlock: 34,
    gpu: { streams: [[2, 32], [0, 2]], wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeQ8_0,
    dequantize: dequantizeQ8_0,
  },
  // ggml [d:f16, qs:16 bytes of nibbles] (18 B); GPU row: every block's qs (4 words), then the d's.
  Q4_0: {
    ggmlType: 2,
    blockSize: 32,
    bytesPerBlock: 18,
    gpu: { streams: [[2, 16], [0, 2]], wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeQ4_0,
    dequantize: dequantizeQ4_0,
  },
  // [d:f16, m:f16, qs:16 bytes of nibbles] (20 B): already word-aligned.
  Q4_1: {
    ggmlType: 3,
    blockSize: 32,
    bytesPerBlock: 20,
    gpu: { intDot: true },
    safetensors: false,
    quantize: quantizeQ4_1,
    dequantize: dequantizeQ4_1,
  },
  // ggml [d:f16, qh:u32 (bit j = bit 4 of element j), qs:16] (22 B); GPU row: every block's qs
  // (4 words), then the qh's (a word each), then the d's.
  Q5_0: {
    ggmlType: 6,
    blockSize: 32,
    bytesPerBlock: 22,
    gpu: { streams: [[6, 16], [2, 4], [0, 2]], wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeQ5_0,
    dequantize: dequantizeQ5_0,
  },
  // [d:f16, m:f16, qh:u32, qs:16] (24 B): already word-aligned.
  Q5_1: {
    ggmlType: 7,
    blockSize: 32,
    bytesPerBlock: 24,
    gpu: { intDot: true },
    safetensors: false,
    quantize: quantizeQ5_1,
    dequantize: dequantizeQ5_1,
  },
  // [scales:16, qs:64, d:f16, dmin:f16] (84 B): already word-aligned.
  Q2_K: {
    ggmlType: 10,
    blockSize: 256,
    bytesPerBlock: 84,
    gpu: { intDot: true },
    safetensors: false,
    quantize: quantizeQ2_K,
    dequantize: dequantizeQ2_K,
  },
  // ggml [hmask:32, qs:64, scales:12, d:f16] (110 B); GPU row: every super-block's hmask and qs
  // (24 words), then their scales (3 words each), then the d's.
  Q3_K: {
    ggmlType: 11,
    blockSize: 256,
    bytesPerBlock: 110,
    gpu: { streams: [[0, 96], [96, 12], [108, 2]], wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeQ3_K,
    dequantize: dequantizeQ3_K,
  },
  // [d:f16, dmin:f16, scales:12, qs:128] (144 B): already word-aligned, so the GPU takes it as it is.
  Q4_K: {
    ggmlType: 12,
    blockSize: 256,
    bytesPerBlock: 144,
    gpu: { wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeQ4_K,
    dequantize: dequantizeQ4_K,
  },
  // [d:f16, dmin:f16, scales:12, qh:32, qs:128] (176 B): already word-aligned.
  Q5_K: {
    ggmlType: 13,
    blockSize: 256,
    bytesPerBlock: 176,
    gpu: { wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeQ5_K,
    dequantize: dequantizeQ5_K,
  },
  // ggml [ql:128, qh:64, scales:16 × i8, d:f16] (210 B); GPU row: every super-block's ql and qh
  // (48 words), then their scales (4 words each), then the d's.
  Q6_K: {
    ggmlType: 14,
    blockSize: 256,
    bytesPerBlock: 210,
    gpu: { streams: [[0, 192], [192, 16], [208, 2]], wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeQ6_K,
    dequantize: dequantizeQ6_K,
  },
  // ggml [d:f16, qs:16 bytes of nibbles indexing the IQ4 grid] (18 B); GPU row as Q4_0's.
  IQ4_NL: {
    ggmlType: 20,
    blockSize: 32,
    bytesPerBlock: 18,
    gpu: { streams: [[2, 16], [0, 2]], wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeIQ4_NL,
    dequantize: dequantizeIQ4_NL,
  },
  // [d:f16, scales_h:u16, scales_l:4, qs:128] (136 B): already word-aligned.
  IQ4_XS: {
    ggmlType: 23,
    blockSize: 256,
    bytesPerBlock: 136,
    gpu: { intDot: true },
    safetensors: false,
    quantize: quantizeIQ4_XS,
    dequantize: dequantizeIQ4_XS,
  },
  // ggml [e:E8M0 byte, qs:16 bytes of FP4 E2M1 nibbles] (17 B); GPU row: every block's qs
  // (4 words), then the e's four per word.
  MXFP4: {
    ggmlType: 39,
    blockSize: 32,
    bytesPerBlock: 17,
    gpu: { streams: [[1, 16], [0, 1]], wide: true, intDot: true },
    safetensors: false,
    quantize: quantizeMXFP4,
    dequantize: dequantizeMXFP4,
  },
} satisfies Record<string, DTypeInfo>;

/** Element types webgpu-llm can load: the codec table's rows. */
export type DType = keyof typeof ROWS;

export const DTYPE_INFO: Readonly<Record<DType, DTypeInfo>> = ROWS;

/** Every DType, in the table's order. */
export const DTYPES = Object.keys(ROWS) as readonly DType[];

/** The DTypes safetensors stores (under the same names). */
export type SafetensorsDType = { [D in DType]: (typeof ROWS)[D]['safetensors'] extends true ? D : never }[DType];

export const SAFETENSORS_DTYPES = DTYPES.filter((d) => DTYPE_INFO[d].safetensors) as readonly SafetensorsDType[];

/**
 * Names of every ggml type id we know of, so an unsupported tensor's error can say what it is
 * ("IQ2_XS") rather than only a number. Ids missing here are unknown to us altogether.
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

type TypedArrayOf<T> = { new (buffer: ArrayBufferLike, byteOffset: number, length: number): T; BYTES_PER_ELEMENT: number };

/** `count` elements of `bytes` as `Type`, copying first only when the offset is not aligned for it. */
function view<T>(bytes: Uint8Array, Type: TypedArrayOf<T>, count: number): T {
  const width = Type.BYTES_PER_ELEMENT;
  if (bytes.byteOffset % width === 0) return new Type(bytes.buffer, bytes.byteOffset, count);
  return new Type(bytes.slice(0, count * width).buffer, 0, count);
}
