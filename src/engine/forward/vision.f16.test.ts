/**
 * The vision tower at f16 (f16 activations between its kernels; the stream, LayerNorm statistics
 * and the projection's output in f32) against the CPU reference tower, on the tiny SmolVLM's
 * tower: two tiles in one batch. Runs where the device offers shader-f16 (lavapipe in `npm test`'s
 * f16 step); skips on SwiftShader. The engine's image path at f32 is ../engine-vision.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { engineOpContext } from '../../kernels/op';
import { ReferenceVisionTower } from '../../reference/vision';
import { makeFixture } from '../../testing/fixtures/model';
import { fixtureTower } from '../../testing/fixtures/vision';
import { testGPU } from '../../testing/gpu';
import { GpuVisionTower } from './vision';

/**
 * Largest error over the largest reference value, per tile: f16 rounds each activation to 2⁻¹¹
 * relative through two blocks; measured on lavapipe: 6.0e-4 and 4.7e-4. The bar leaves about eight
 * times that (a wrong row, order or norm gives errors of the values' own size).
 */
const F16_REL = 5e-3;

describe('the vision tower on the GPU', () => {
  it('encodes two tiles within 5e-3 of the reference tower, relative (f16)', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    const { config, weights } = fixtureTower(makeFixture({ arch: 'llama', preset: 'tiny', vision: true }));
    const tower = await GpuVisionTower.create(engineOpContext(gpu, 'f16'), config, weights, 2);
    try {
      const size = 3 * config.imageSize * config.imageSize;
      // Pixel values as the processor leaves them: in [-1, 1].
      const tiles = [1, 2].map((salt) => Float32Array.from({ length: size }, (_, i) => Math.sin(i * 0.37 * salt + salt)));
      const got = await tower.embedTiles(tiles);
      const ref = ReferenceVisionTower.fromWeights(config, weights);
      tiles.forEach((tile, n) => {
        const want = ref.embedTile(tile);
        const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        const err = want.reduce((m, v, i) => Math.max(m, Math.abs(v - got[n]![i]!)), 0);
        expect(err / scale).toBeLessThan(F16_REL);
      });
    } finally {
      tower.destroy();
    }
  });
});
