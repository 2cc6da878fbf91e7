/**
 * The per-layer cache abstraction: paged K/V layers sized from the page pool, fixed-size state
 * slots for recurrent layers (a checkpoint row per step row after them where the state rolls back),
 * and a slot's states zeroed (only that slot's) when a sequence takes it.
 */
import { describe, expect, it } from 'vitest';
import { readBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { LayerCaches, pageBytes, pagesPerBinding, rollsBack, type LayerCacheKind } from './layer-cache';

const HYBRID: LayerCacheKind[] = [
  { kind: 'paged-kv', kvHeads: 2, headDim: 8 },
  { kind: 'slot-state', floats: 12, rollsBack: true },
  { kind: 'paged-kv', kvHeads: 1, headDim: 24 },
];

describe('layer caches', () => {
  it('sizes pages from the paged layers alone, and the binding limit from the widest', () => {
    // K and V, 4 tokens a page: (2·8 + 1·24) f16 elements a token.
    expect(pageBytes(HYBRID, 4, 2)).toBe(2 * 4 * (16 + 24) * 2);
    expect(pagesPerBinding(HYBRID, 4, 2, 4096)).toBe(Math.floor(4096 / (4 * 24 * 2)));
    expect(pagesPerBinding([{ kind: 'slot-state', floats: 3, rollsBack: false }], 4, 2, 4096)).toBe(Infinity);
  });

  it('speculates only where every recurrent layer rolls back', () => {
    expect(rollsBack(HYBRID)).toBe(true);
    expect(rollsBack([...HYBRID, { kind: 'slot-state', floats: 3, rollsBack: false }])).toBe(false);
  });

  it('makes each layer its kind of buffer, and zeroes one slot of every state when a sequence takes it', async () => {
    const { device } = await testGPU();
    const caches = LayerCaches.create(device, HYBRID, { numPages: 5, pageSize: 4, maxSeqs: 3, actBytes: 4 });
    try {
      expect(caches.paged(0).k.size).toBe(5 * 4 * 16 * 4);
      expect(caches.paged(2).v.size).toBe(5 * 4 * 24 * 4);
      // 3 slots, then 3 checkpoint rows (from row 3 on).
      expect(caches.state(1).size).toBe(2 * 3 * 12 * 4);
      expect(caches.checkpointRow).toBe(3);
      expect(caches.rollingBack().map((r) => [r.layer, r.floats])).toEqual([[1, 12]]);
      expect(caches.bytes).toBe(2 * 5 * 4 * (16 + 24) * 4 + 2 * 3 * 12 * 4);
      expect(() => caches.paged(1)).toThrow(/no paged K\/V/);
      expect(() => caches.state(0)).toThrow(/no slot state/);
      const filled = Float32Array.from({ length: 36 }, (_, i) => i + 1);
      device.queue.writeBuffer(caches.state(1), 0, filled);
      caches.resetSlot(1);
      const got = new Float32Array(await readBuffer(device, caches.state(1)));
      expect(Array.from(got.subarray(12, 24)).every((v) => v === 0)).toBe(true);
      expect(Array.from(got.subarray(0, 12))).toEqual(Array.from(filled.subarray(0, 12)));
      expect(Array.from(got.subarray(24, 36))).toEqual(Array.from(filled.subarray(24)));
    } finally {
      caches.destroy();
    }
  });
});
