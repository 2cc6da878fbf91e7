/**
 * GGUF writer: yields a file as chunks (the header, then each tensor's bytes and its padding), so
 * a multi-GB file is never whole in memory. Tensor data is produced lazily by each tensor's
 * `data()` and quantised with quants.ts when the writer reaches it.
 */
import { ByteWriter } from './byte-writer';
import {
  alignUp,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUFType,
  SCALAR_TYPE_ID,
  type GGUFArrayItemType,
  type GGUFMeta,
  type GGUFScalarType,
} from './gguf-common';
import { quantize } from './quants';
import { DTYPE_INFO, elementCount, tensorByteLength, type DType } from './types';

export { concatChunks } from './byte-writer';
export type { GGUFMeta } from './gguf-common';

/** Typed metadata constructors: `meta.u32(4096)`, `meta.arr('string', tokens)`. */
export const meta = {
  u8: (value: number): GGUFMeta => ({ type: 'u8', value }),
  i8: (value: number): GGUFMeta => ({ type: 'i8', value }),
  u16: (value: number): GGUFMeta => ({ type: 'u16', value }),
  i16: (value: number): GGUFMeta => ({ type: 'i16', value }),
  u32: (value: number): GGUFMeta => ({ type: 'u32', value }),
  i32: (value: number): GGUFMeta => ({ type: 'i32', value }),
  u64: (value: number | bigint): GGUFMeta => ({ type: 'u64', value }),
  i64: (value: number | bigint): GGUFMeta => ({ type: 'i64', value }),
  f32: (value: number): GGUFMeta => ({ type: 'f32', value }),
  f64: (value: number): GGUFMeta => ({ type: 'f64', value }),
  bool: (value: boolean): GGUFMeta => ({ type: 'bool', value }),
  str: (value: string): GGUFMeta => ({ type: 'str', value }),
  arr: ((itemType: GGUFArrayItemType, values: unknown) => ({ type: 'arr', itemType, values }) as GGUFMeta) as {
    (itemType: 'string', values: readonly string[]): GGUFMeta;
    (itemType: 'bool', values: readonly boolean[]): GGUFMeta;
    (itemType: 'u64' | 'i64', values: readonly (number | bigint)[]): GGUFMeta;
    (itemType: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64', values: ArrayLike<number>): GGUFMeta;
  },
};

export interface GGUFTensorInput {
  name: string;
  dtype: DType;
  /** Row-major, outermost first; written to GGUF innermost first. */
  shape: number[];
  /** Called once, when the writer reaches this tensor. */
  data: () => Float32Array;
}

export interface GGUFWriteOptions {
  version?: 2 | 3;
  /** Data alignment; a value other than 32 is recorded as `general.alignment` (u32). */
  alignment?: number;
}

const INT_RANGE: Partial<Record<GGUFScalarType, [number, number]>> = {
  u8: [0, 0xff], i8: [-0x80, 0x7f], u16: [0, 0xffff], i16: [-0x8000, 0x7fff],
  u32: [0, 0xffffffff], i32: [-0x80000000, 0x7fffffff],
};

function writeScalar(w: ByteWriter, type: GGUFScalarType, v: unknown, key: string): void {
  const range = INT_RANGE[type];
  if (range && !(Number.isInteger(v) && (v as number) >= range[0] && (v as number) <= range[1])) {
    throw new RangeError(`metadata "${key}": ${String(v)} is not a valid ${type}`);
  }
  switch (type) {
    case 'u8': return w.u8(v as number);
    case 'i8': return w.i8(v as number);
    case 'u16': return w.u16(v as number);
    case 'i16': return w.i16(v as number);
    case 'u32': return w.u32(v as number);
    case 'i32': return w.i32(v as number);
    case 'u64': return w.u64(v as number | bigint);
    case 'i64': return w.i64(v as number | bigint);
    case 'f32': return w.f32(v as number);
    case 'f64': return w.f64(v as number);
    case 'bool': return w.u8(v ? 1 : 0);
    case 'str': return w.string(v as string);
  }
}

function writeMeta(w: ByteWriter, key: string, m: GGUFMeta): void {
  w.string(key);
  if (m.type === 'arr') {
    w.u32(GGUFType.ARRAY);
    w.u32(SCALAR_TYPE_ID[m.itemType]);
    w.u64(m.values.length);
    const item: GGUFScalarType = m.itemType === 'string' ? 'str' : m.itemType;
    for (let i = 0; i < m.values.length; i++) writeScalar(w, item, m.values[i], key);
  } else {
    w.u32(SCALAR_TYPE_ID[m.type]);
    writeScalar(w, m.type, m.value, key);
  }
}

/**
 * Encodes a GGUF file. Everything but the tensor data is validated and laid out now (so bad input
 * throws here); the returned iterable yields the header, then each tensor as it is produced.
 */
export function encodeGGUF(
  metadata: Array<[string, GGUFMeta]>,
  tensors: GGUFTensorInput[],
  opts: GGUFWriteOptions = {},
): Iterable<Uint8Array> {
  const version = opts.version ?? 3;
  const kvs = metadata.slice();
  const keys = new Set<string>();
  for (const [k] of kvs) {
    if (keys.has(k)) throw new Error(`metadata key "${k}" is given twice`);
    keys.add(k);
  }
  const stated = kvs.find(([k]) => k === 'general.alignment')?.[1];
  if (stated && stated.type !== 'u32') throw new Error('general.alignment must be a u32');
  const alignment = opts.alignment ?? (stated ? (stated.value as number) : GGUF_DEFAULT_ALIGNMENT);
  if (stated && stated.value !== alignment) throw new Error(`general.alignment ${stated.value} disagrees with opts.alignment ${alignment}`);
  if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    throw new RangeError(`alignment must be a power of two, got ${alignment}`);
  }
  if (!stated && alignment !== GGUF_DEFAULT_ALIGNMENT) kvs.push(['general.alignment', meta.u32(alignment)]);

  // Lay out the data section: each tensor starts on an alignment boundary.
  const names = new Set<string>();
  let rel = 0;
  const layout = tensors.map((t) => {
    if (names.has(t.name)) throw new Error(`tensor "${t.name}" is given twice`);
    names.add(t.name);
    if (t.shape.length < 1 || t.shape.length > 4 || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new RangeError(`tensor "${t.name}": shape [${t.shape}] must have 1 to 4 non-negative integer dims`);
    }
    const inner = t.shape[t.shape.length - 1]!;
    if (inner % DTYPE_INFO[t.dtype].blockSize !== 0) {
      throw new RangeError(`tensor "${t.name}": rows of ${inner} elements are not whole ${t.dtype} blocks of ${DTYPE_INFO[t.dtype].blockSize}`);
    }
    const count = elementCount(t.shape);
    const byteLength = tensorByteLength(t.dtype, count);
    const offset = rel;
    rel = alignUp(offset + byteLength, alignment);
    return { t, count, byteLength, offset, padded: rel - offset };
  });

  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(version);
  w.u64(tensors.length);
  w.u64(kvs.length);
  for (const [k, m] of kvs) writeMeta(w, k, m);
  for (const { t, offset } of layout) {
    w.string(t.name);
    w.u32(t.shape.length);
    for (let d = t.shape.length - 1; d >= 0; d--) w.u64(t.shape[d]!); // GGUF dims: innermost first
    w.u32(DTYPE_INFO[t.dtype].ggmlType);
    w.u64(offset);
  }
  w.padTo(alignment);
  const header = w.finish();

  return {
    *[Symbol.iterator]() {
      yield header;
      for (const { t, count, byteLength, padded } of layout) {
        const x = t.data();
        if (x.length !== count) {
          throw new RangeError(`tensor "${t.name}": data() gave ${x.length} values for shape [${t.shape}] (${count})`);
        }
        yield t.dtype === 'F32' ? new Uint8Array(x.buffer, x.byteOffset, x.byteLength) : quantize(t.dtype, x);
        if (padded > byteLength) yield new Uint8Array(padded - byteLength);
      }
    },
  };
}
