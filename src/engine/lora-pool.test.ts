import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { createLoraOp, NO_ADAPTER } from '../kernels/lora';
import type { LoraAdapter, LoraTarget, LoraWeight } from '../lora/types';
import { testGPU } from '../testing/gpu';
import { maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { adapterFloats, LoraPool, LoraPoolError, loraMat } from './lora-pool';

const K = 24; // every matrix is [N, K] here: the pool does not care about shapes
const N = 20;

function adapter(file: string, rank: number, targets: Array<[number, LoraTarget]>, seed: number): LoraAdapter {
  const weights: LoraWeight[] = targets.map(([layer, target], i) => ({
    layer,
    target,
    rank,
    inFeatures: K,
    outFeatures: N,
    a: random(rank * K, seed + i, 0.3),
    b: random(N * rank, seed + 100 + i, 0.3),
    scale: 2 / rank,
  }));
  return { name: file, file, format: 'peft', qkRows: 'halves', vHeadOrder: 'grouped', weights };
}

/** y + scale · B · (A · x) straight from the adapter's own matrices (not the pool's layout). */
function direct(w: LoraWeight, scale: number, x: Float32Array, y: Float32Array): Float32Array {
  const h = Array.from({ length: w.rank }, (_, r) => x.reduce((s, v, i) => s + w.a[r * K + i]! * v, 0));
  return y.map((v, o) => v + scale * w.scale * h.reduce((s, hv, r) => s + w.b[o * w.rank + r]! * hv, 0));
}

describe('LoraPool', () => {
  it('serves each step row its own adapter, and reuses what unload frees', async () => {
    const { device } = await testGPU();
    const pool = LoraPool.create(device, { maxAdapters: 2, maxRank: 8, bytes: 64 * 1024, numLayers: 2 });
    const one = adapter('one', 4, [[0, 'q'], [1, 'v']], 1);
    const two = adapter('two', 8, [[1, 'v'], [1, 'down']], 2);
    const id1 = pool.load(one, 'one', 1);
    const id2 = pool.load(two, 'two', 0.5);
    expect([id1, id2]).toEqual([0, 1]);
    expect(pool.names).toEqual(['one', 'two']);
    expect([loraMat(0, 'q'), loraMat(1, 'v'), loraMat(1, 'down')].map((m) => pool.adapts(m))).toEqual([true, true, true]);
    expect(pool.adapts(loraMat(0, 'k'))).toBe(false);

    // Three tokens on layer 1's v: adapter one, adapter two, none.
    const x = random(3 * K, 9);
    const y = random(3 * N, 10);
    const seqAdapter = uploadBuffer(device, new Uint32Array([id1, id2, NO_ADAPTER]), STORAGE);
    const run = async () => {
      const yBuf = uploadAct(device, y, 'f32');
      const op = await createLoraOp(opContext(device, 'f32'), {
        k: K, n: N, mat: loraMat(1, 'v'), numMats: pool.numMats, maxRank: 8,
        x: uploadAct(device, x, 'f32'), y: yBuf, weights: pool.weights, entries: pool.entries,
        tokenSeq: uploadBuffer(device, new Uint32Array([0, 1, 2]), STORAGE), seqAdapter, h: createBuffer(device, 3 * 8 * 4, STORAGE),
      });
      await runPass(device, (pass) => op.encode(pass, 3));
      return readAct(device, yBuf, 3 * N, 'f32');
    };
    let got = await run();
    const row = (a: Float32Array, t: number) => a.subarray(t * N, (t + 1) * N);
    expect(maxRelDiff(row(got, 0), direct(one.weights[1]!, 1, x.subarray(0, K), row(y, 0)))).toBeLessThan(1e-5);
    expect(maxRelDiff(row(got, 1), direct(two.weights[0]!, 0.5, x.subarray(K, 2 * K), row(y, 1)))).toBeLessThan(1e-5);
    expect(Array.from(row(got, 2))).toEqual(Array.from(row(y, 2)));

    // Unloading zeroes the adapter's entries (its rows then pass through) and frees its floats.
    const before = pool.freeFloats;
    pool.unload(id1);
    expect(pool.freeFloats).toBe(before + adapterFloats(one));
    expect(pool.adapts(loraMat(0, 'q'))).toBe(false); // only adapter one had it
    expect(pool.adapts(loraMat(1, 'v'))).toBe(true);
    const table = new Uint32Array(await readBuffer(device, pool.entries));
    expect(table.subarray(0, pool.numMats * 4).every((v) => v === 0)).toBe(true);
    got = await run();
    expect(Array.from(row(got, 0))).toEqual(Array.from(row(y, 0)));
    expect(maxRelDiff(row(got, 1), direct(two.weights[0]!, 0.5, x.subarray(K, 2 * K), row(y, 1)))).toBeLessThan(1e-5);

    // The freed id and floats go to the next adapter.
    const three = adapter('three', 2, [[1, 'v']], 3);
    expect(pool.load(three, 'three')).toBe(id1);
    got = await run();
    expect(maxRelDiff(row(got, 0), direct(three.weights[0]!, 1, x.subarray(0, K), row(y, 0)))).toBeLessThan(1e-5);
    pool.destroy();
  });

  it('refuses an adapter it cannot hold, with a message that says which limit, and keeps what it had', async () => {
    const { device } = await testGPU();
    const small = adapter('small', 4, [[0, 'q']], 4);
    const pool = LoraPool.create(device, { maxAdapters: 2, maxRank: 4, bytes: adapterFloats(small) * 4 * 2 + 16, numLayers: 1 });
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as LoraPoolError;
      }
      throw new Error('no error');
    };
    expect(err(() => pool.load(adapter('wide', 8, [[0, 'q']], 5), 'wide'))).toMatchObject({ code: 'rank_too_large', message: expect.stringMatching(/rank 8 .* largest LoRA rank 4/) });
    const big = adapter('big', 4, [[0, 'q'], [0, 'k'], [0, 'v']], 6);
    const free = pool.freeFloats;
    expect(err(() => pool.load(big, 'big'))).toMatchObject({ code: 'pool_full', message: expect.stringMatching(/big: the LoRA pool has .* MiB free/) });
    expect(pool.freeFloats).toBe(free); // a refused load gives back what it had taken
    pool.load(small, 'a');
    pool.load(small, 'b');
    expect(err(() => pool.load(small, 'c'))).toMatchObject({ code: 'too_many_adapters', message: expect.stringContaining('a, b') });
    pool.destroy();
  });
});
