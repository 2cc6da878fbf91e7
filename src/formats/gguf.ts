/**
 * GGUF reader: parses the header (metadata and tensor infos) through a ByteSource, reading only
 * the header's bytes, and validates every tensor's type, shape and byte range against the file.
 */
import { HeaderCursor } from './header-cursor';
import { alignUp, FIXED_SIZE, GGML_MAX_DIMS, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUFType, type GGUFValue } from './gguf-common';
import type { ByteSource } from './source';
import { DTYPE_INFO, DTYPES, dtypeFromGgmlType, FormatError, GGML_TYPE_NAMES, tensorByteLength, type TensorInfo } from './types';

export type { GGUFValue } from './gguf-common';

export interface GGUFFile {
  version: number;
  metadata: Map<string, GGUFValue>;
  /** In file order; `shape` outermost first (GGUF's dims reversed), `offset` absolute. */
  tensors: TensorInfo[];
  /** Absolute offset of the data section (tensor offsets in the file are relative to it). */
  dataOffset: number;
  alignment: number;
}

/** Nesting limit for arrays of arrays: real files use none; this stops a crafted file early. */
const MAX_ARRAY_DEPTH = 8;

/** Describes the first bytes of a file that is not GGUF (an HTML error page is a common one). */
function describeMagic(b: Uint8Array): string {
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(' ');
  const text = Array.from(b, (x) => (x >= 0x20 && x < 0x7f ? String.fromCharCode(x) : '.')).join('');
  const hint = b[0] === 0x3c ? ' (an HTML page? check the URL)' : b[0] === 0x7b ? ' (JSON? a safetensors or config file?)' : '';
  return `${hex} "${text}"${hint}`;
}

export async function readGGUF(src: ByteSource): Promise<GGUFFile> {
  const file = src.name;
  const size = await src.size();
  const cur = new HeaderCursor(src, size, 'GGUF header');
  const fail = (code: 'bad_header' | 'bad_metadata' | 'bad_shape' | 'truncated', message: string): never => {
    throw new FormatError(code, file, message);
  };

  // --- magic and version
  if (size < 4) fail('truncated', `only ${size} bytes: not a GGUF file`);
  await cur.ensure(4);
  const magic = cur.bytes(4);
  if (new DataView(magic.buffer, magic.byteOffset, 4).getUint32(0, true) !== GGUF_MAGIC) {
    throw new FormatError('bad_magic', file, `not a GGUF file: starts with ${describeMagic(magic)}, expected "GGUF"`);
  }
  await cur.ensure(4 + 16);
  const version = cur.u32();
  if (version === 1) {
    throw new FormatError('unsupported_version', file, 'GGUF version 1 is not supported (only 2 and 3): re-convert the model with a current llama.cpp');
  }
  if (version === 0x02000000 || version === 0x03000000) {
    throw new FormatError('unsupported_version', file, 'big-endian GGUF files are not supported: use the little-endian file');
  }
  if (version !== 2 && version !== 3) {
    throw new FormatError('unsupported_version', file, `GGUF version ${version} is not supported (only 2 and 3)`);
  }

  /** A u64 count or length, which must fit in `remaining` at `minEach` bytes per item. */
  const count = (what: string, minEach: number): number => {
    const n = cur.u64();
    if (n > BigInt(Number.MAX_SAFE_INTEGER) || Number(n) * minEach > cur.remaining) {
      fail('bad_header', `${what} is ${n}, more than the ${cur.remaining} bytes left in the file can hold`);
    }
    return Number(n);
  };
  const tensorCount = count('tensor count', 24);
  const kvCount = count('metadata count', 13);

  const readString = async (what: string): Promise<string> => {
    await cur.ensure(8);
    const len = cur.u64();
    if (len > BigInt(cur.remaining)) {
      fail('truncated', `${what}: a string of ${len} bytes at byte ${cur.pos - 8} runs past the end of the file (${size} bytes)`);
    }
    await cur.ensure(Number(len));
    return cur.text(Number(len));
  };

  const int64 = (v: bigint): number | bigint => (v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v);

  /** One fixed-size value; ensure() must already cover it. */
  const fixed = (type: number): GGUFValue => {
    switch (type) {
      case GGUFType.UINT8: return cur.u8();
      case GGUFType.INT8: return cur.i8();
      case GGUFType.UINT16: return cur.u16();
      case GGUFType.INT16: return cur.i16();
      case GGUFType.UINT32: return cur.u32();
      case GGUFType.INT32: return cur.i32();
      case GGUFType.FLOAT32: return cur.f32();
      case GGUFType.FLOAT64: return cur.f64();
      case GGUFType.BOOL: return cur.u8() !== 0;
      case GGUFType.UINT64: return int64(cur.u64());
      default: return int64(cur.i64()); // INT64
    }
  };

  const readValue = async (type: number, key: string, depth: number): Promise<GGUFValue> => {
    const width = FIXED_SIZE[type];
    if (width !== undefined) {
      await cur.ensure(width);
      return fixed(type);
    }
    if (type === GGUFType.STRING) return readString(`metadata "${key}"`);
    if (type !== GGUFType.ARRAY) return fail('bad_metadata', `metadata "${key}" has unknown value type ${type}`);
    if (depth >= MAX_ARRAY_DEPTH) fail('bad_metadata', `metadata "${key}" nests arrays more than ${MAX_ARRAY_DEPTH} deep`);
    await cur.ensure(12);
    const itemType = cur.u32();
    const itemWidth = FIXED_SIZE[itemType];
    if (itemWidth === undefined && itemType !== GGUFType.STRING && itemType !== GGUFType.ARRAY) {
      fail('bad_metadata', `metadata "${key}" is an array of unknown value type ${itemType}`);
    }
    const n = count(`metadata "${key}" array length`, itemWidth ?? (itemType === GGUFType.STRING ? 8 : 12));
    const out: GGUFValue[] = new Array(n);
    if (itemWidth !== undefined) {
      await cur.ensure(n * itemWidth); // one window for the whole array
      for (let i = 0; i < n; i++) out[i] = fixed(itemType);
    } else {
      for (let i = 0; i < n; i++) out[i] = await readValue(itemType, key, depth + 1);
    }
    return out;
  };

  // --- metadata
  const metadata = new Map<string, GGUFValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = await readString(`metadata key #${i}`);
    await cur.ensure(4);
    const type = cur.u32();
    if (metadata.has(key)) fail('bad_metadata', `metadata key "${key}" appears twice`);
    metadata.set(key, await readValue(type, key, 0));
  }

  const alignment = metadata.get('general.alignment') ?? GGUF_DEFAULT_ALIGNMENT;
  if (typeof alignment !== 'number' || !Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    fail('bad_header', `general.alignment must be a power of two, got ${String(alignment)}`);
  }
  const align = alignment as number;

  // --- tensor infos
  const raw: Array<{ info: TensorInfo; relative: number }> = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const name = await readString(`tensor #${i} name`);
    if (names.has(name)) fail('bad_header', `tensor "${name}" appears twice`);
    names.add(name);
    await cur.ensure(4);
    const nDims = cur.u32();
    if (nDims > GGML_MAX_DIMS) fail('bad_header', `tensor "${name}" has ${nDims} dims (at most ${GGML_MAX_DIMS})`);
    await cur.ensure(8 * nDims + 12);
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) {
      const v = cur.u64();
      if (v > BigInt(Number.MAX_SAFE_INTEGER)) fail('bad_shape', `tensor "${name}" has an impossible dim ${v}`);
      dims.push(Number(v));
    }
    const typeId = cur.u32();
    const relative = cur.u64();
    const dtype = dtypeFromGgmlType(typeId);
    if (!dtype) {
      const known = GGML_TYPE_NAMES[typeId];
      throw known
        ? new FormatError('unsupported_dtype', file, `tensor "${name}" has ggml type ${known} (id ${typeId}), which webgpu-llm cannot load (${DTYPES.join(', ')})`)
        : new FormatError('unknown_type', file, `tensor "${name}" has unknown ggml type id ${typeId}`);
    }
    const elements = dims.reduce((a, b) => a * b, 1);
    if (!Number.isSafeInteger(elements)) fail('bad_shape', `tensor "${name}" dims [${dims}] have too many elements`);
    const { blockSize } = DTYPE_INFO[dtype];
    if (dims.length > 0 && dims[0]! % blockSize !== 0) {
      throw new FormatError('bad_shape', file, `tensor "${name}" is ${dtype} (blocks of ${blockSize}) but its rows have ${dims[0]} elements`);
    }
    if (relative > BigInt(Number.MAX_SAFE_INTEGER) || Number(relative) % align !== 0) {
      fail('bad_header', `tensor "${name}" data offset ${relative} is not a multiple of the alignment ${align}`);
    }
    const info: TensorInfo = { name, dtype, shape: dims.slice().reverse(), offset: 0, byteLength: tensorByteLength(dtype, elements) };
    raw.push({ info, relative: Number(relative) });
  }

  // --- data section: starts at the next alignment boundary; every tensor must lie inside the file
  const dataOffset = alignUp(cur.pos, align);
  const tensors = raw.map(({ info, relative }) => {
    info.offset = dataOffset + relative;
    const end = info.offset + info.byteLength;
    if (end > size) {
      throw new FormatError(
        'out_of_range',
        file,
        `tensor "${info.name}" occupies bytes ${info.offset}..${end} but the file is only ${size} bytes (truncated download?)`,
      );
    }
    return info;
  });

  return { version, metadata, tensors, dataOffset, alignment: align };
}
