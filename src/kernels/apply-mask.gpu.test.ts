import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, writeBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { APPLY_MASK_WG, applyMaskRef, createApplyMaskOp, maskWords } from './apply-mask';
import { opContext, random } from '../testing/kernel-helpers';

/** Not a multiple of 32 (the last mask word is partial) nor of any workgroup size. */
const V = 1000;

function randomMask(seed: number): Uint32Array {
  const r = random(maskWords(V), seed);
  return Uint32Array.from(r, (x) => Math.floor(((x + 1) / 2) * 2 ** 32) >>> 0);
}

describe('apply_mask kernel', () => {
  for (const wg of APPLY_MASK_WG) {
    it(`sets the logits of forbidden tokens to -inf and leaves the rest at WG=${wg}, per sequence`, async () => {
      const { device } = await testGPU();
      const seqs = 2;
      const maxSeqs = 3;
      const logits = random(maxSeqs * V, 7 + wg, 10);
      const buf = createBuffer(device, logits.byteLength, STORAGE);
      writeBuffer(device, buf, 0, logits);
      const op = await createApplyMaskOp(opContext(device, 'f32'), { logits: buf, vocab: V, maxSeqs, wg });
      const masks = [randomMask(1), randomMask(2)];
      masks.forEach((m, s) => op.write(s, m));
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      op.encode(pass, seqs);
      pass.end();
      device.queue.submit([encoder.finish()]);
      const got = new Float32Array(await readBuffer(device, buf, logits.byteLength));
      const want = logits.slice();
      const allMasks = new Uint32Array(seqs * maskWords(V));
      masks.forEach((m, s) => allMasks.set(m, s * maskWords(V)));
      applyMaskRef(want, allMasks, V, seqs);
      expect(Array.from(got)).toEqual(Array.from(want));
      // Both kinds happen, and the third (unused) sequence is untouched.
      expect(got.subarray(0, seqs * V).some((x) => x === -Infinity)).toBe(true);
      expect(got.subarray(0, seqs * V).some((x) => Number.isFinite(x))).toBe(true);
      expect(Array.from(got.subarray(seqs * V))).toEqual(Array.from(logits.subarray(seqs * V)));
      op.destroy();
    });
  }

  it('refuses a bitmask of the wrong length', async () => {
    const { device } = await testGPU();
    const buf = createBuffer(device, V * 4, STORAGE);
    const op = await createApplyMaskOp(opContext(device, 'f32'), { logits: buf, vocab: V, maxSeqs: 1 });
    expect(() => op.write(0, new Uint32Array(3))).toThrow(/3 words; this vocabulary needs 32/);
    op.destroy();
  });
});
