import { describe, expect, it } from 'vitest';
import { ReferenceVisionTower, pixelShuffle } from '../../reference/vision';
import { testGPU } from '../../testing/gpu';
import { maxRelDiff, opContext } from '../../testing/kernel-helpers';
import { fixtureTowerConfig, fixtureTowerWeights } from '../../testing/fixtures/vision';
import { GpuVisionTower, shuffledPatchOrder } from './vision';

describe('the vision tower on the GPU', () => {
  it("orders patches as Idefics3's pixel shuffle reads them", () => {
    const idx = Float32Array.from({ length: 36 }, (_, i) => i);
    expect([...shuffledPatchOrder(6, 3)]).toEqual([...pixelShuffle(idx, 6, 1, 3)]);
    expect([...shuffledPatchOrder(4, 2)]).toEqual([0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]);
  });

  // About 20 s on SwiftShader, nearly all of it compiling the linear layers' pipelines.
  it('embeds tiles as the reference tower does, in batches of maxTiles (f32)', async () => {
    const { device } = await testGPU();
    const c = fixtureTowerConfig(96);
    const weights = fixtureTowerWeights(c, 5, 1);
    const reference = ReferenceVisionTower.fromWeights(c, weights);
    const gpu = await GpuVisionTower.create({ ...opContext(device, 'f32'), emulated: true }, c, weights, 2);
    const tiles = [1, 2, 3].map((seed) => Float32Array.from({ length: 3 * c.imageSize ** 2 }, (_, i) => Math.sin(i * 0.37 + seed) * 0.9));
    const got = await gpu.embedTiles(tiles);
    expect(got).toHaveLength(3);
    tiles.forEach((tile, i) => expect(maxRelDiff(got[i]!, reference.embedTile(tile))).toBeLessThan(1e-4));
    // Each tile alone: the attention does not reach across tiles of a batch.
    expect(maxRelDiff((await gpu.embedTiles([tiles[1]!]))[0]!, got[1]!)).toBeLessThan(1e-5);
    gpu.destroy();
  });
});
