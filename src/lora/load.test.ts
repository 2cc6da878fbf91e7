/** openLoraWithCache from every kind of source a model load takes, and its errors. */
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { LoadError } from '../loader/errors';
import { openModel } from '../model/open';
import type { ModelConfig } from '../model/config';
import { ensureLoraFixture, type LoraPaths } from '../testing/fixtures/lora-write';
import { serveDirectory } from '../testing/server';
import { openLoraWithCache } from './load';
import { LoraError } from './types';

let lora: LoraPaths;
let base: ModelConfig;

beforeAll(async () => {
  const paths = await ensureLoraFixture({ arch: 'llama', preset: 'tiny' });
  lora = paths.lora;
  base = (await openModel(paths.model.hf.F32!)).config;
});

/** A file as a browser gives it, with its path inside a picked folder. */
async function picked(path: string, relativePath: string): Promise<File> {
  const f = new File([await readFile(path)], basename(path));
  Object.defineProperty(f, 'webkitRelativePath', { value: relativePath });
  return f;
}

describe('openLoraWithCache', () => {
  it('opens a PEFT folder and a GGUF by Node path', async () => {
    const peft = await openLoraWithCache(lora.peft['qv-r4']!, base);
    const gguf = await openLoraWithCache(lora.gguf['qv-r4']!, base);
    expect(peft.format).toBe('peft');
    expect(gguf.format).toBe('gguf');
    expect(gguf.weights.map((w) => w.target)).toEqual(peft.weights.map((w) => w.target));
  });

  it('opens a picked GGUF File and a picked PEFT folder', async () => {
    const file = new File([await readFile(lora.gguf['qv-r4']!)], 'qv-r4.gguf');
    expect((await openLoraWithCache(file, base)).format).toBe('gguf');
    const dir = lora.peft['qv-r4']!;
    const files = [await picked(join(dir, 'adapter_config.json'), 'qv-r4/adapter_config.json'), await picked(join(dir, 'adapter_model.safetensors'), 'qv-r4/adapter_model.safetensors')];
    expect((await openLoraWithCache(files, base)).weights).toHaveLength(4);
  });

  it('names the file in a reader error (a URL that is not there) and in an adapter error (a wrong base)', async () => {
    const server = await serveDirectory(join(lora.gguf['qv-r4']!, '..'));
    try {
      const missing = await openLoraWithCache(`${server.url}/nothing.gguf`, base, { cache: false }).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(LoadError);
      expect((missing as LoadError).file).toBe(`${server.url}/nothing.gguf`);
    } finally {
      await server.close();
    }
    const wider = { ...base, hiddenSize: base.hiddenSize * 2 };
    const wrong = await openLoraWithCache(lora.gguf['all-r8-rslora']!, wider).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(LoraError);
    expect(wrong).toMatchObject({ code: 'tensor_shape', file: lora.gguf['all-r8-rslora'] });
  });
});
