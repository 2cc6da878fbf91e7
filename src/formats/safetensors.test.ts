import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { concatChunks } from './byte-writer';
import { dequantize, quantize } from './quants';
import { encodeSafetensors, readSafetensors, readSafetensorsIndex, type SafetensorsTensorInput } from './safetensors';
import { httpSource, memorySource, type ByteSource } from './source';
import { startTestServer, type TestServer } from '../testing/range-server';
import { FormatError } from './types';

const inputs: Array<SafetensorsTensorInput & { values: Float32Array }> = [
  { name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [4, 3] },
  { name: 'model.norm.weight', dtype: 'F32', shape: [3] },
  { name: 'lm_head.weight', dtype: 'F16', shape: [4, 3] },
  { name: 'scalar', dtype: 'F32', shape: [] },
].map((t, k) => {
  const values = new Float32Array(t.shape.reduce((a, b) => a * b, 1)).map((_, i) => Math.sin(i * 1.7 + k) * 3);
  return { ...t, dtype: t.dtype as 'F32' | 'F16' | 'BF16', values, data: () => values };
});

const file = concatChunks(encodeSafetensors(inputs, { format: 'pt', note: 'tiny ✓' }));

async function checkRoundTrip(src: ByteSource): Promise<void> {
  const st = await readSafetensors(src);
  expect(st.metadata).toEqual({ format: 'pt', note: 'tiny ✓' });
  expect(st.dataOffset % 8).toBe(0);
  expect(st.tensors.map((t) => t.name)).toEqual(inputs.map((t) => t.name)); // written in order, so sorted by offset too
  for (const [i, t] of st.tensors.entries()) {
    const input = inputs[i]!;
    expect(t).toMatchObject({ dtype: input.dtype, shape: input.shape });
    const n = input.values.length;
    expect(dequantize(t.dtype, await src.read(t.offset, t.byteLength), n)).toEqual(dequantize(t.dtype, quantize(t.dtype, input.values), n));
  }
}

/** A safetensors file with a hand-written header (data: `dataBytes` zero bytes). */
function handMade(header: unknown, dataBytes: number): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  return out;
}

async function fails(bytes: Uint8Array, code: string, pattern: RegExp): Promise<void> {
  const err = await readSafetensors(memorySource(bytes, 'bad.safetensors')).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FormatError);
  expect(err).toMatchObject({ code, file: 'bad.safetensors' });
  expect((err as Error).message).toMatch(pattern);
}

describe('safetensors writer -> reader round trip', () => {
  it('keeps names, dtypes, shapes, metadata and data in memory', async () => {
    await checkRoundTrip(memorySource(file));
  });

  it('pads the JSON header with spaces so the data starts 8-byte aligned', () => {
    const n = Number(new DataView(file.buffer).getBigUint64(0, true));
    expect(n % 8).toBe(0);
    const text = new TextDecoder().decode(file.subarray(8, 8 + n));
    expect(() => JSON.parse(text)).not.toThrow();
  });

  describe('through httpSource', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer({ 'model.safetensors': file });
    });
    afterAll(() => server.close());
    it('reads the same file over HTTP range requests', async () => {
      await checkRoundTrip(httpSource(server.url('model.safetensors')));
    });
  });

  it('refuses quantised dtypes and data of the wrong length', () => {
    expect(() => encodeSafetensors([{ name: 'q', dtype: 'Q8_0' as 'F32', shape: [32], data: () => new Float32Array(32) }])).toThrow(/F32, F16, BF16/);
    expect(() => concatChunks(encodeSafetensors([{ name: 'x', dtype: 'F32', shape: [2], data: () => new Float32Array(3) }]))).toThrow(/gave 3 values/);
  });
});

describe('safetensors reader errors', () => {
  const ok = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } };

  it('reads a valid hand-made header with absolute offsets', async () => {
    const st = await readSafetensors(memorySource(handMade(ok, 8)));
    const headerLen = Number(new DataView(handMade(ok, 8).buffer).getBigUint64(0, true));
    expect(st.tensors).toEqual([{ name: 'a', dtype: 'F32', shape: [2], offset: 8 + headerLen, byteLength: 8 }]);
  });

  it('names the tensor and dtype for integer and fp8 tensors', async () => {
    await fails(handMade({ q: { dtype: 'I8', shape: [2], data_offsets: [0, 2] } }, 2), 'unsupported_dtype', /"q" is I8/);
    await fails(handMade({ f: { dtype: 'F8_E4M3', shape: [2], data_offsets: [0, 2] } }, 2), 'unsupported_dtype', /"f" is F8_E4M3/);
  });

  it('rejects a tensor past the end of the file (a truncated download)', async () => {
    await fails(handMade(ok, 7), 'out_of_range', /"a".*only 7/);
  });

  it('rejects offsets that disagree with the shape, overlapping tensors and malformed entries', async () => {
    await fails(handMade({ a: { dtype: 'F16', shape: [2], data_offsets: [0, 8] } }, 8), 'bad_shape', /\[2\] \(4 bytes\).*span 8/);
    const overlap = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } };
    await fails(handMade(overlap, 8), 'bad_header', /overlap/);
    await fails(handMade({ a: { dtype: 'F32', shape: [2] } }, 8), 'bad_header', /data_offsets/);
    await fails(handMade({ __metadata__: { n: 1 } }, 0), 'bad_header', /__metadata__.n/);
  });

  it('rejects bad JSON, an impossible header length and GGUF files', async () => {
    const bad = handMade(ok, 8);
    bad[8] = 0x5b; // '[' makes the JSON invalid
    await fails(bad, 'bad_header', /not valid JSON/);
    const long = handMade(ok, 8);
    new DataView(long.buffer).setBigUint64(0, 1000n, true);
    await fails(long, 'truncated', /says it is 1000 bytes/);
    const gguf = new Uint8Array(64);
    gguf.set([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0]);
    await fails(gguf, 'bad_magic', /GGUF file/);
    await fails(new Uint8Array(5), 'truncated', /only 5 bytes/);
  });
});

describe('safetensors index', () => {
  it('maps every weight to its shard and lists the shards once, in order', () => {
    const idx = readSafetensorsIndex(
      JSON.stringify({
        metadata: { total_size: 123 },
        weight_map: { 'a.weight': 'model-00001-of-00002.safetensors', 'b.weight': 'model-00002-of-00002.safetensors', 'c.weight': 'model-00001-of-00002.safetensors' },
      }),
    );
    expect(idx.metadata).toEqual({ total_size: 123 });
    expect(idx.weightMap.get('b.weight')).toBe('model-00002-of-00002.safetensors');
    expect(idx.files).toEqual(['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']);
  });

  it('rejects an index without a weight_map, naming the file', () => {
    expect(() => readSafetensorsIndex({ metadata: {} }, 'x/index.json')).toThrow(FormatError);
    expect(() => readSafetensorsIndex('{', 'x/index.json')).toThrow(/x\/index.json: not valid JSON/);
    expect(() => readSafetensorsIndex({ weight_map: { a: 3 } })).toThrow(/weight_map\["a"\]/);
  });
});
