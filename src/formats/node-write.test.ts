import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readGGUF } from './gguf';
import { concatChunks, encodeGGUF, meta } from './gguf-writer';
import { writeChunks } from './node-write';
import { dequantize } from './quants';
import { fileSource } from './source';

describe('writeChunks', () => {
  it('streams a GGUF to disk that fileSource and readGGUF read back', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'formats-write-'));
    try {
      const path = join(dir, 'm.gguf');
      const values = new Float32Array(512).map((_, i) => i / 64 - 4);
      const make = () => encodeGGUF([['general.architecture', meta.str('llama')]], [{ name: 'w', dtype: 'Q8_0', shape: [2, 256], data: () => values }]);
      const written = await writeChunks(path, make());
      const onDisk = new Uint8Array(await readFile(path));
      expect(written).toBe(onDisk.length);
      expect(onDisk).toEqual(concatChunks(make()));
      const src = fileSource(path);
      const g = await readGGUF(src);
      const t = g.tensors[0]!;
      const got = dequantize('Q8_0', await src.read(t.offset, t.byteLength), 512);
      for (let i = 0; i < 512; i++) expect(Math.abs(got[i]! - values[i]!)).toBeLessThan(0.02);
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it('accepts async iterables', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'formats-write-'));
    try {
      const path = join(dir, 'x.bin');
      async function* chunks() {
        yield new Uint8Array([1, 2]);
        yield new Uint8Array([3]);
      }
      expect(await writeChunks(path, chunks())).toBe(3);
      expect(Array.from(await readFile(path))).toEqual([1, 2, 3]);
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});
