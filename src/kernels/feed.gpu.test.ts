import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { opContext, runPass } from '../testing/kernel-helpers';
import { createFeedOp, FEED, FEED_WG, feedRef } from './feed';

describe('feed kernel', () => {
  // Integer ids: exact. 150 tokens span several workgroups at every size, the last one partial.
  const T = 150;
  const maxTokens = T + 10;
  const slots = 7;

  for (const wg of FEED_WG) {
    it(`resolves FEED to the row's slot's sampled token at WG=${wg}, and only for this step's tokens`, async () => {
      const { device } = await testGPU();
      // Rows 0..4 (ragged), mapped to slots in a non-identity order; every third token is FEED.
      const rowSlot = [5, 2, 6, 0, 3];
      const tokenSeq = Array.from({ length: maxTokens }, (_, t) => Math.min(4, Math.floor(t / 31)));
      const stepTokens = Array.from({ length: maxTokens }, (_, t) => (t % 3 === 1 ? FEED : (t * 7919) % 1000));
      const sampled = Array.from({ length: slots }, (_, s) => 5000 + 11 * s);
      const ids = createBuffer(device, maxTokens * 4, STORAGE);
      const sentinel = new Uint32Array(maxTokens).fill(0xdead);
      device.queue.writeBuffer(ids, 0, sentinel);
      const op = await createFeedOp(opContext(device, 'f32'), {
        stepTokens: uploadBuffer(device, Uint32Array.from(stepTokens)),
        tokenSeq: uploadBuffer(device, Uint32Array.from(tokenSeq)),
        rowSlot: uploadBuffer(device, Uint32Array.from(rowSlot)),
        sampled: uploadBuffer(device, Uint32Array.from(sampled)),
        ids,
        counts: uploadBuffer(device, new Uint32Array([T, rowSlot.length, 0, 0]), UNIFORM),
        wg,
      });
      await runPass(device, (pass) => op.encode(pass, T));
      const got = new Uint32Array(await readBuffer(device, ids));
      const want = feedRef(stepTokens.slice(0, T), tokenSeq, rowSlot, sampled);
      expect(Array.from(got.subarray(0, T))).toEqual(Array.from(want));
      // FEED tokens took slot tokens, by row: the map was not the identity.
      expect(want.filter((id) => id >= 5000).length).toBe(50);
      expect(Array.from(got.subarray(T)).every((v) => v === 0xdead)).toBe(true);
    });
  }
});
