import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGGUF } from './gguf';
import { concatChunks, encodeGGUF, meta, type GGUFTensorInput } from './gguf-writer';
import { dequantize, quantize } from './quants';
import { httpSource, memorySource, type ByteSource } from './source';
import { startTestServer, type TestServer } from '../testing/range-server';
import { DTYPES, FormatError, type DType } from './types';
import { Rng } from '../testing/fixtures/rng';

/** Uniform [0, 1) draws from the fixtures' seeded generator. */
function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.uniform();
}

const BIG = 2n ** 60n + 3n;
const metadata = [
  ['general.architecture', meta.str('llama')],
  ['general.name', meta.str('tiny ✓ 模型')],
  ['test.u8', meta.u8(255)],
  ['test.i8', meta.i8(-128)],
  ['test.u16', meta.u16(65535)],
  ['test.i16', meta.i16(-32768)],
  ['test.u32', meta.u32(4294967295)],
  ['test.i32', meta.i32(-2147483648)],
  ['test.u64', meta.u64(2 ** 40)],
  ['test.u64big', meta.u64(BIG)],
  ['test.i64', meta.i64(-(2 ** 50))],
  ['test.f32', meta.f32(0.1)],
  ['test.f64', meta.f64(0.1)],
  ['test.bool', meta.bool(true)],
  ['test.false', meta.bool(false)],
  ['tokenizer.ggml.tokens', meta.arr('string', ['<s>', '', 'héllo', 'Ġworld', '\n'])],
  ['tokenizer.ggml.token_type', meta.arr('i32', [3, -1, 1, 1, 6])],
  ['test.u32s', meta.arr('u32', [0, 4294967295])],
  ['tokenizer.ggml.scores', meta.arr('f32', new Float32Array([0.5, -1.25]))],
  ['test.bools', meta.arr('bool', [true, false])],
  ['test.u64s', meta.arr('u64', [1, BIG])],
  ['test.empty', meta.arr('string', [])],
] satisfies Array<[string, ReturnType<typeof meta.str>]>;

/** A tensor of every type plus odd shapes; values drawn from a seeded RNG. */
function tensorInputs(seed: number): Array<GGUFTensorInput & { values: Float32Array }> {
  const r = rng(seed);
  const make = (name: string, dtype: DType, shape: number[]) => {
    const values = new Float32Array(shape.reduce((a, b) => a * b, 1)).map(() => r() * 2 - 1);
    return { name, dtype, shape, values, data: () => values };
  };
  return [
    ...DTYPES.map((d) => make(`blk.0.${d.toLowerCase()}.weight`, d, [2, 256])),
    make('output_norm.weight', 'F32', [3]),
    make('three.d', 'Q8_0', [2, 3, 64]),
    make('four.d', 'F16', [1, 2, 3, 5]),
  ];
}

async function checkRoundTrip(src: ByteSource, tensors: ReturnType<typeof tensorInputs>, version: number, alignment: number) {
  const g = await readGGUF(src);
  expect(g.version).toBe(version);
  expect(g.alignment).toBe(alignment);
  expect(g.dataOffset % alignment).toBe(0);
  const m = g.metadata;
  expect(m.get('general.architecture')).toBe('llama');
  expect(m.get('general.name')).toBe('tiny ✓ 模型');
  expect([m.get('test.u8'), m.get('test.i8'), m.get('test.u16'), m.get('test.i16')]).toEqual([255, -128, 65535, -32768]);
  expect([m.get('test.u32'), m.get('test.i32')]).toEqual([4294967295, -2147483648]);
  expect(m.get('test.u64')).toBe(2 ** 40); // safe: a number
  expect(m.get('test.u64big')).toBe(BIG); // unsafe: a bigint
  expect(m.get('test.i64')).toBe(-(2 ** 50));
  expect(m.get('test.f32')).toBe(Math.fround(0.1));
  expect(m.get('test.f64')).toBe(0.1);
  expect([m.get('test.bool'), m.get('test.false')]).toEqual([true, false]);
  expect(m.get('tokenizer.ggml.tokens')).toEqual(['<s>', '', 'héllo', 'Ġworld', '\n']);
  expect(m.get('tokenizer.ggml.token_type')).toEqual([3, -1, 1, 1, 6]);
  expect(m.get('test.u32s')).toEqual([0, 4294967295]);
  expect(m.get('tokenizer.ggml.scores')).toEqual([0.5, -1.25]);
  expect(m.get('test.bools')).toEqual([true, false]);
  expect(m.get('test.u64s')).toEqual([1, BIG]);
  expect(m.get('test.empty')).toEqual([]);

  expect(g.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
  for (const [i, t] of g.tensors.entries()) {
    const input = tensors[i]!;
    expect(t.dtype).toBe(input.dtype);
    expect(t.shape).toEqual(input.shape);
    expect((t.offset - g.dataOffset) % alignment).toBe(0);
    const n = input.values.length;
    const got = dequantize(t.dtype, await src.read(t.offset, t.byteLength), n);
    expect(got, t.name).toEqual(dequantize(t.dtype, quantize(t.dtype, input.values), n));
  }
}

describe('GGUF writer -> reader round trip', () => {
  for (const version of [2, 3] as const) {
    for (const alignment of [32, 64]) {
      it(`keeps every metadata type and every tensor type (v${version}, alignment ${alignment})`, async () => {
        const tensors = tensorInputs(version * 100 + alignment);
        const bytes = concatChunks(encodeGGUF(metadata, tensors, { version, alignment }));
        await checkRoundTrip(memorySource(bytes, 'rt.gguf'), tensors, version, alignment);
      });
    }
  }

  describe('through httpSource', () => {
    let server: TestServer;
    const tensors = tensorInputs(5);
    beforeAll(async () => {
      server = await startTestServer({ 'model.gguf': concatChunks(encodeGGUF(metadata, tensors)) });
    });
    afterAll(() => server.close());

    it('reads the same file over HTTP range requests', async () => {
      await checkRoundTrip(httpSource(server.url('model.gguf')), tensors, 3, 32);
      expect(server.requests.every((r) => r.method === 'HEAD' || r.range)).toBe(true);
    });
  });

  it('yields the header first and produces each tensor only when reached', () => {
    let calls = 0;
    const chunks = encodeGGUF([], [
      { name: 'a', dtype: 'Q4_K', shape: [256], data: () => (calls++, new Float32Array(256)) },
      { name: 'b', dtype: 'F32', shape: [4], data: () => (calls++, new Float32Array(4)) },
    ])[Symbol.iterator]();
    const header = chunks.next().value!;
    expect(String.fromCharCode(...header.subarray(0, 4))).toBe('GGUF');
    expect(header.length % 32).toBe(0);
    expect(calls).toBe(0);
    expect(chunks.next().value!.length).toBe(144);
    expect(calls).toBe(1);
  });

  it('rejects bad input when called, not halfway through writing', () => {
    const t = (shape: number[], dtype: DType = 'Q8_0') => [{ name: 'x', dtype, shape, data: () => new Float32Array(0) }];
    expect(() => encodeGGUF([], t([4, 33]))).toThrow(/whole Q8_0 blocks/);
    expect(() => encodeGGUF([['k', meta.u8(1)], ['k', meta.u8(2)]], [])).toThrow(/twice/);
    expect(() => encodeGGUF([['k', meta.u8(300)]], [])).toThrow(/not a valid u8/);
    expect(() => encodeGGUF([], [], { alignment: 48 })).toThrow(/power of two/);
    expect(() => concatChunks(encodeGGUF([], t([32], 'F32')))).toThrow(/gave 0 values/);
  });
});

describe('GGUF reader reads only the header', () => {
  it('parses a multi-MB tokenizer through a source whose tensor data does not exist', async () => {
    // 200k tokens (~2.6 MB of header) and a 4 GiB tensor: the source has only the header's bytes.
    const tokens = Array.from({ length: 200_000 }, (_, i) => `tok${i}`);
    const it = encodeGGUF(
      [['tokenizer.ggml.tokens', meta.arr('string', tokens)], ['tokenizer.ggml.scores', meta.arr('f32', new Float32Array(200_000))]],
      [{ name: 'token_embd.weight', dtype: 'F32', shape: [131072, 8192], data: () => { throw new Error('never'); } }],
    )[Symbol.iterator]();
    const header = it.next().value!;
    const claimed = header.length + 131072 * 8192 * 4;
    let bytesRead = 0;
    let reads = 0;
    const src: ByteSource = {
      name: 'huge.gguf',
      size: async () => claimed,
      read: async (offset, length) => {
        reads++;
        bytesRead += length;
        if (offset + length > claimed) throw new Error(`read past the end: ${offset}+${length}`);
        // Past the header lies tensor data that this test never materialises: zeros stand in.
        const out = new Uint8Array(length);
        out.set(header.subarray(offset, Math.min(offset + length, header.length)));
        return out;
      },
    };
    const g = await readGGUF(src);
    expect(header.length).toBeGreaterThan(2 << 20);
    expect((g.metadata.get('tokenizer.ggml.tokens') as string[])[199_999]).toBe('tok199999');
    expect(g.tensors[0]).toMatchObject({ shape: [131072, 8192], offset: g.dataOffset, byteLength: 131072 * 8192 * 4 });
    expect(bytesRead).toBeLessThan(header.length + (4 << 20));
    expect(reads).toBeLessThan(6);
  });
});

describe('GGUF reader errors', () => {
  const one = (dtype: DType = 'F32', shape = [2, 32]) =>
    concatChunks(encodeGGUF([['general.architecture', meta.str('llama')]], [{ name: 'weird.weight', dtype, shape, data: () => new Float32Array(shape[0]! * shape[1]!) }]));
  /** Byte offset of the tensor info's n_dims field (after its name). */
  const infoAt = (bytes: Uint8Array): number => {
    const name = new TextEncoder().encode('weird.weight');
    outer: for (let i = 0; i < bytes.length; i++) {
      for (let k = 0; k < name.length; k++) if (bytes[i + k] !== name[k]) continue outer;
      return i + name.length;
    }
    throw new Error('no tensor info');
  };
  const fails = async (bytes: Uint8Array, code: string, pattern: RegExp) => {
    const err = await readGGUF(memorySource(bytes, 'bad.gguf')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FormatError);
    expect(err).toMatchObject({ code, file: 'bad.gguf' });
    expect((err as Error).message).toMatch(pattern);
  };

  it('rejects a file that does not start with GGUF, hinting at HTML pages', async () => {
    await fails(new TextEncoder().encode('<!DOCTYPE html><html>404</html>'), 'bad_magic', /not a GGUF file.*HTML/);
  });

  it('rejects version 1, big-endian files and unknown versions', async () => {
    const bytes = one();
    const v = (n: number) => {
      const b = bytes.slice();
      new DataView(b.buffer).setUint32(4, n, true);
      return b;
    };
    await fails(v(1), 'unsupported_version', /version 1/);
    await fails(v(0x03000000), 'unsupported_version', /big-endian/);
    await fails(v(7), 'unsupported_version', /version 7/);
  });

  it('rejects a header cut short', async () => {
    const bytes = one();
    await fails(bytes.subarray(0, infoAt(bytes) - 3), 'truncated', /tensor #0 name.*past the end of the file/);
    await fails(bytes.subarray(0, infoAt(bytes) + 6), 'truncated', /GGUF header runs past the end of the file/);
    await fails(bytes.subarray(0, 2), 'truncated', /only 2 bytes/);
  });

  it('rejects a tensor whose data runs past the end of the file, naming it', async () => {
    const bytes = one();
    await fails(bytes.subarray(0, bytes.length - 1), 'out_of_range', /"weird.weight".*only \d+ bytes/);
  });

  it('names the tensor and the type id for unknown and unsupported ggml types', async () => {
    const bytes = one();
    const typeAt = infoAt(bytes) + 4 + 2 * 8;
    const withType = (id: number) => {
      const b = bytes.slice();
      new DataView(b.buffer).setUint32(typeAt, id, true);
      return b;
    };
    await fails(withType(99), 'unknown_type', /"weird.weight".*type id 99/);
    await fails(withType(16), 'unsupported_dtype', /"weird.weight".*IQ2_XXS \(id 16\)/);
  });

  it('rejects more than 4 dims, rows that are not whole blocks, and misaligned offsets', async () => {
    const bytes = one('Q8_0', [2, 32]);
    const at = infoAt(bytes);
    const b1 = bytes.slice();
    new DataView(b1.buffer).setUint32(at, 5, true);
    await fails(b1, 'bad_header', /5 dims/);
    const b2 = bytes.slice();
    new DataView(b2.buffer).setBigUint64(at + 4, 33n, true); // innermost dim
    await fails(b2, 'bad_shape', /Q8_0.*33 elements/);
    const b3 = bytes.slice();
    new DataView(b3.buffer).setBigUint64(at + 4 + 16 + 4, 8n, true); // data offset
    await fails(b3, 'bad_header', /offset 8 is not a multiple of the alignment 32/);
  });

  it('rejects impossible counts and unknown metadata value types', async () => {
    const bytes = one();
    const b1 = bytes.slice();
    new DataView(b1.buffer).setBigUint64(8, 1n << 40n, true); // tensor count
    await fails(b1, 'bad_header', /tensor count/);
    const b2 = bytes.slice();
    // The first key is "general.architecture": its value type follows the 8-byte length and the name.
    new DataView(b2.buffer).setUint32(24 + 8 + 'general.architecture'.length, 42, true);
    await fails(b2, 'bad_metadata', /"general.architecture" has unknown value type 42/);
  });

  it('rejects an alignment that is not a power of two', async () => {
    const b = concatChunks(encodeGGUF([['general.alignment', meta.u32(64)]], []));
    // The only key: u64 length at 24, 17 name bytes, u32 type, then the u32 value.
    const at = 24 + 8 + 'general.alignment'.length + 4;
    expect(new DataView(b.buffer).getUint32(at, true)).toBe(64);
    new DataView(b.buffer).setUint32(at, 48, true);
    await fails(b, 'bad_header', /power of two, got 48/);
  });
});
