import { describe, expect, it } from 'vitest';
import { pixelShuffle } from '../../reference/vision';
import { shuffledPatchOrder } from './vision';

// The tower itself is checked against the reference through the engine (../engine-vision.test.ts).
describe('the vision tower on the GPU', () => {
  it("orders patches as Idefics3's pixel shuffle reads them", () => {
    const idx = Float32Array.from({ length: 36 }, (_, i) => i);
    expect([...shuffledPatchOrder(6, 3)]).toEqual([...pixelShuffle(idx, 6, 1, 3)]);
    expect([...shuffledPatchOrder(4, 2)]).toEqual([0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]);
  });
});
