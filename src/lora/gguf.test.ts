import { describe, expect, it } from 'vitest';
import type { GGUFMeta } from '../formats/gguf-common';
import { concatChunks, encodeGGUF, meta } from '../formats/gguf-writer';
import { memorySource } from '../formats/source';
import { readGGUFAdapter } from './gguf';
import { LoraError } from './types';

const HEADER: Array<[string, GGUFMeta]> = [
  ['general.architecture', meta.str('llama')],
  ['general.type', meta.str('adapter')],
  ['adapter.type', meta.str('lora')],
  ['adapter.lora.alpha', meta.f32(8)],
];

function ggufAdapter(tensors: Record<string, number[]>, header = HEADER) {
  const list = Object.entries(tensors).map(([name, shape]) => ({ name, dtype: 'F32' as const, shape, data: () => new Float32Array(shape[0]! * shape[1]!).fill(0.25) }));
  return memorySource(concatChunks(encodeGGUF(header, list)), 'mem/adapter.gguf');
}

const pair = (base: string, out: number, inp: number, r = 4) => ({ [`${base}.lora_a`]: [r, inp], [`${base}.lora_b`]: [out, r] });

async function failure(src: ReturnType<typeof ggufAdapter>): Promise<LoraError> {
  const e = await readGGUFAdapter(src).then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(LoraError);
  expect((e as LoraError).file).toBe('mem/adapter.gguf');
  return e as LoraError;
}

describe('readGGUFAdapter', () => {
  it('reads lora_a [r, in] / lora_b [out, r] pairs, scaled alpha / r, q/k rows interleaved in llama files', async () => {
    const a = await readGGUFAdapter(ggufAdapter({ ...pair('blk.1.ffn_up.weight', 16, 8), ...pair('blk.0.attn_k.weight', 4, 8) }));
    expect(a.format).toBe('gguf');
    expect(a.ggufArch).toBe('llama');
    expect(a.qkRows).toBe('interleaved');
    expect(a.weights.map((w) => [w.layer, w.target, w.rank, w.outFeatures, w.inFeatures, w.scale])).toEqual([
      [0, 'k', 4, 4, 8, 2],
      [1, 'up', 4, 16, 8, 2],
    ]);
  });

  it('keeps the halves order for families whose GGUF files are not permuted, and scale 1 when alpha is 0', async () => {
    const header = HEADER.map(([k, v]): [string, GGUFMeta] => [k, k === 'general.architecture' ? meta.str('qwen2') : k === 'adapter.lora.alpha' ? meta.f32(0) : v]);
    const a = await readGGUFAdapter(ggufAdapter(pair('blk.0.attn_q.weight', 8, 8), header));
    expect(a.qkRows).toBe('halves');
    expect(a.weights[0]!.scale).toBe(1);
  });

  it('says a model GGUF is not an adapter', async () => {
    const header = HEADER.filter(([k]) => k === 'general.architecture');
    expect((await failure(ggufAdapter({ 'blk.0.attn_q.weight': [8, 8] }, header))).code).toBe('not_an_adapter');
  });

  it('refuses a lora_a without its lora_b', async () => {
    const e = await failure(ggufAdapter({ 'blk.0.attn_q.weight.lora_a': [4, 8] }));
    expect(e.code).toBe('missing_tensor');
    expect(e.message).toContain('blk.0.attn_q.weight has lora_a but no lora_b');
  });

  it('refuses a transposed lora_a', async () => {
    const e = await failure(ggufAdapter({ 'blk.0.attn_q.weight.lora_a': [8, 4], 'blk.0.attn_q.weight.lora_b': [8, 4] }));
    expect(e.code).toBe('tensor_shape');
    expect(e.message).toContain('transposed');
  });

  it.each([
    ['token_embd.weight', 'embeddings'],
    ['output.weight', 'output'],
    ['blk.0.attn_norm.weight', 'not a .lora_a'],
  ])('refuses an adapter of %s', async (base, words) => {
    const e = await failure(ggufAdapter({ ...pair('blk.0.attn_q.weight', 8, 8), ...pair(base, 8, 8) }));
    expect(e.code).toBe('unsupported_target');
    expect(e.message).toContain(words);
  });
});
