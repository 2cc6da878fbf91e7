/**
 * GGUF facts shared by the reader and the writer (spec: ggml's docs/gguf.md).
 *
 * Layout (little endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata count
 * (u32 counts in v1, which we reject), the metadata key/values, the tensor infos (name, u32
 * n_dims, u64 dims innermost first, u32 ggml type, u64 offset relative to the data section), then
 * padding to `general.alignment` (default 32) and the data section, each tensor aligned.
 */

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_DEFAULT_ALIGNMENT = 32;
export const GGML_MAX_DIMS = 4;

/** Metadata value type ids (`gguf_metadata_value_type`). */
export const GGUFType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/**
 * A metadata value as read. Integers are numbers; 64-bit ones become bigint only when they do not
 * fit a double exactly. Arrays hold their elements as plain JS values (nested arrays allowed).
 */
export type GGUFValue = number | bigint | boolean | string | GGUFValue[];

/** Scalar type names used by the writer's typed constructors. */
export type GGUFScalarType = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'u64' | 'i64' | 'f32' | 'f64' | 'bool' | 'str';
/** Element types of a written array (`'string'` for arrays of strings, as in `meta.arr`). */
export type GGUFArrayItemType = Exclude<GGUFScalarType, 'str'> | 'string';

/** A typed metadata value for the writer: GGUF needs the type, JS numbers do not carry it. */
export type GGUFMeta =
  | { type: Exclude<GGUFScalarType, 'str' | 'bool' | 'u64' | 'i64'>; value: number }
  | { type: 'u64' | 'i64'; value: number | bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'str'; value: string }
  | { type: 'arr'; itemType: 'string'; values: readonly string[] }
  | { type: 'arr'; itemType: 'bool'; values: readonly boolean[] }
  | { type: 'arr'; itemType: 'u64' | 'i64'; values: readonly (number | bigint)[] }
  | { type: 'arr'; itemType: Exclude<GGUFArrayItemType, 'string' | 'bool' | 'u64' | 'i64'>; values: ArrayLike<number> };

export const SCALAR_TYPE_ID: Readonly<Record<GGUFScalarType | 'string', number>> = {
  u8: GGUFType.UINT8,
  i8: GGUFType.INT8,
  u16: GGUFType.UINT16,
  i16: GGUFType.INT16,
  u32: GGUFType.UINT32,
  i32: GGUFType.INT32,
  u64: GGUFType.UINT64,
  i64: GGUFType.INT64,
  f32: GGUFType.FLOAT32,
  f64: GGUFType.FLOAT64,
  bool: GGUFType.BOOL,
  str: GGUFType.STRING,
  string: GGUFType.STRING,
};

/** Byte width of fixed-size value types (strings and arrays are variable). */
export const FIXED_SIZE: Readonly<Partial<Record<number, number>>> = {
  [GGUFType.UINT8]: 1,
  [GGUFType.INT8]: 1,
  [GGUFType.BOOL]: 1,
  [GGUFType.UINT16]: 2,
  [GGUFType.INT16]: 2,
  [GGUFType.UINT32]: 4,
  [GGUFType.INT32]: 4,
  [GGUFType.FLOAT32]: 4,
  [GGUFType.UINT64]: 8,
  [GGUFType.INT64]: 8,
  [GGUFType.FLOAT64]: 8,
};

export const alignUp = (n: number, alignment: number): number => Math.ceil(n / alignment) * alignment;
