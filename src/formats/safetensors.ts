/**
 * safetensors reader and writer, and the sharded-checkpoint index.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON
 * `{ "__metadata__"?: {str: str}, name: { dtype, shape, data_offsets: [begin, end] } }`, then the
 * data; offsets are relative to the data start (8 + N). Writers pad the JSON with spaces so the
 * data starts 8-byte aligned.
 */
import { ByteWriter } from './byte-writer';
import { quantize } from './quants';
import type { ByteSource } from './source';
import { DTYPE_INFO, elementCount, FormatError, SAFETENSORS_DTYPES, type SafetensorsDType, type TensorInfo } from './types';

export type { SafetensorsDType } from './types';
const SUPPORTED = new Set<string>(SAFETENSORS_DTYPES);

/** The reference implementation refuses headers above 100 MB; so do we (a corrupt length otherwise reads the whole file). */
const MAX_HEADER = 100_000_000;

export interface SafetensorsFile {
  /** Sorted by offset; `offset` absolute in the file. */
  tensors: TensorInfo[];
  metadata: Record<string, string>;
  /** Absolute offset of the data section (8 + header length). */
  dataOffset: number;
}

const isIndex = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

export async function readSafetensors(src: ByteSource): Promise<SafetensorsFile> {
  const file = src.name;
  const size = await src.size();
  if (size < 8) throw new FormatError('truncated', file, `only ${size} bytes: not a safetensors file`);
  const head = await src.read(0, 8);
  const n = new DataView(head.buffer, head.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(size - 8) || n > BigInt(MAX_HEADER) || n < 2n) {
    const looksGGUF = String.fromCharCode(...head.subarray(0, 4)) === 'GGUF';
    throw looksGGUF
      ? new FormatError('bad_magic', file, 'this is a GGUF file, not safetensors')
      : n > BigInt(size - 8) && n <= BigInt(MAX_HEADER)
        ? new FormatError('truncated', file, `the header says it is ${n} bytes but only ${size - 8} follow`)
        : new FormatError('bad_magic', file, `not a safetensors file: header length ${n} is impossible`);
  }
  const dataOffset = 8 + Number(n);
  const dataSize = size - dataOffset;

  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(await src.read(8, Number(n))));
  } catch (e) {
    if (e instanceof FormatError) throw e;
    throw new FormatError('bad_header', file, `the header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new FormatError('bad_header', file, 'the header is not a JSON object');
  }

  const metadata: Record<string, string> = {};
  const tensors: TensorInfo[] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      if (typeof entry !== 'object' || entry === null) throw new FormatError('bad_header', file, '__metadata__ is not an object');
      for (const [k, v] of Object.entries(entry)) {
        if (typeof v !== 'string') throw new FormatError('bad_header', file, `__metadata__.${k} is not a string`);
        metadata[k] = v;
      }
      continue;
    }
    const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const offsets = e.data_offsets as unknown[];
    if (
      typeof e.dtype !== 'string' ||
      !Array.isArray(e.shape) || !e.shape.every(isIndex) ||
      !Array.isArray(offsets) || offsets.length !== 2 || !isIndex(offsets[0]) || !isIndex(offsets[1]) || offsets[1] < offsets[0]
    ) {
      throw new FormatError('bad_header', file, `tensor "${name}" needs dtype, shape and data_offsets [begin, end]`);
    }
    if (!SUPPORTED.has(e.dtype)) {
      throw new FormatError('unsupported_dtype', file, `tensor "${name}" is ${e.dtype}; webgpu-llm reads ${SAFETENSORS_DTYPES.join(', ')} safetensors (convert it, or use a GGUF)`);
    }
    const dtype = e.dtype as SafetensorsDType;
    const [begin, end] = offsets as [number, number];
    if (end > dataSize) {
      throw new FormatError('out_of_range', file, `tensor "${name}" occupies data bytes ${begin}..${end} but the file has only ${dataSize} (truncated download?)`);
    }
    const shape = e.shape as number[];
    const byteLength = elementCount(shape) * DTYPE_INFO[dtype].bytesPerBlock;
    if (end - begin !== byteLength) {
      throw new FormatError('bad_shape', file, `tensor "${name}" is ${dtype} [${shape}] (${byteLength} bytes) but its data_offsets span ${end - begin} bytes`);
    }
    tensors.push({ name, dtype, shape, offset: dataOffset + begin, byteLength });
  }
  tensors.sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < tensors.length; i++) {
    const prev = tensors[i - 1]!, cur = tensors[i]!;
    if (cur.offset < prev.offset + prev.byteLength) {
      throw new FormatError('bad_header', file, `tensors "${prev.name}" and "${cur.name}" overlap`);
    }
  }
  return { tensors, metadata, dataOffset };
}

export interface SafetensorsTensorInput {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  /** Called once, when the writer reaches this tensor. */
  data: () => Float32Array;
}

/** Encodes a safetensors file as chunks: the header, then each tensor as it is produced. */
export function encodeSafetensors(tensors: SafetensorsTensorInput[], metadata?: Record<string, string>): Iterable<Uint8Array> {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let at = 0;
  const layout = tensors.map((t) => {
    if (!SUPPORTED.has(t.dtype)) throw new RangeError(`tensor "${t.name}": safetensors output supports ${SAFETENSORS_DTYPES.join(', ')}, not ${t.dtype}`);
    if (t.name === '__metadata__' || Object.hasOwn(header, t.name)) throw new Error(`tensor name "${t.name}" is reserved or given twice`);
    if (!t.shape.every(isIndex)) throw new RangeError(`tensor "${t.name}": bad shape [${t.shape}]`);
    const count = elementCount(t.shape);
    const byteLength = count * DTYPE_INFO[t.dtype].bytesPerBlock;
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + byteLength] };
    at += byteLength;
    return { t, count };
  });
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  const w = new ByteWriter();
  w.u64(padded);
  w.bytes(json);
  for (let i = json.length; i < padded; i++) w.u8(0x20); // spaces: still valid JSON
  const head = w.finish();

  return {
    *[Symbol.iterator]() {
      yield head;
      for (const { t, count } of layout) {
        const x = t.data();
        if (x.length !== count) throw new RangeError(`tensor "${t.name}": data() gave ${x.length} values for shape [${t.shape}] (${count})`);
        yield t.dtype === 'F32' ? new Uint8Array(x.buffer, x.byteOffset, x.byteLength) : quantize(t.dtype, x);
      }
    },
  };
}

export interface SafetensorsIndex {
  metadata: Record<string, unknown>;
  /** Tensor name -> shard file name (relative to the index). */
  weightMap: Map<string, string>;
  /** Shard file names, each once, in first-seen order. */
  files: string[];
}

/** Parses `model.safetensors.index.json` (text or already-parsed JSON) of a sharded checkpoint. */
export function readSafetensorsIndex(json: unknown, file = 'model.safetensors.index.json'): SafetensorsIndex {
  let obj = json;
  if (typeof json === 'string') {
    try {
      obj = JSON.parse(json);
    } catch (e) {
      throw new FormatError('bad_header', file, `not valid JSON (${(e as Error).message})`);
    }
  }
  const map = (obj as { weight_map?: unknown } | null)?.weight_map;
  if (typeof map !== 'object' || map === null || Array.isArray(map)) {
    throw new FormatError('bad_header', file, 'has no "weight_map" object');
  }
  const weightMap = new Map<string, string>();
  const files: string[] = [];
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== 'string' || shard === '') throw new FormatError('bad_header', file, `weight_map["${name}"] is not a file name`);
    weightMap.set(name, shard);
    if (!files.includes(shard)) files.push(shard);
  }
  const metadata = (obj as { metadata?: unknown }).metadata;
  return { metadata: typeof metadata === 'object' && metadata !== null ? (metadata as Record<string, unknown>) : {}, weightMap, files };
}
