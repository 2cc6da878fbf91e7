import { describe, expect, it } from 'vitest';
import { uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { createKvWriteOp, KV_WRITE_WG, kvWriteRef } from './kv-write';
import { actRound, opContext, random, readAct, runPass, shuffled, uploadAct } from '../testing/kernel-helpers';

describe('kv_write kernel', () => {
  for (const precision of ['f32', 'f16'] as const) {
    for (const wg of KV_WRITE_WG) {
      for (const [nKv, headDim, page] of [[2, 64, 16], [1, 128, 32], [3, 12, 4]] as const) {
        it(`scatters new rows into shuffled page slots (nKv ${nKv}, headDim ${headDim}, page ${page}, WG=${wg}, ${precision})`, async (ctx) => {
          const gpu = await testGPU();
          if (precision === 'f16' && !gpu.info.f16) ctx.skip();
          const { device } = gpu;
          const numPages = 4;
          const rowLen = nKv * headDim;
          const size = numPages * page * rowLen;
          // 5 tokens: one in a page's last slot, then a run that crosses from one page into another.
          const [a, b, c] = shuffled(numPages, 3) as [number, number, number];
          const slots = [a * page + page - 1, b * page + page - 2, b * page + page - 1, c * page, c * page + 1];
          const T = slots.length;
          const k = actRound(random(T * rowLen, 1), precision);
          const v = actRound(random(T * rowLen, 2), precision);
          const kCache0 = actRound(random(size, 3), precision);
          const vCache0 = actRound(random(size, 4), precision);
          const kCache = uploadAct(device, kCache0, precision);
          const vCache = uploadAct(device, vCache0, precision);
          const op = await createKvWriteOp(opContext(device, precision), {
            k: uploadAct(device, k, precision),
            v: uploadAct(device, v, precision),
            slotMapping: uploadBuffer(device, new Uint32Array(slots)),
            kCache,
            vCache,
            nKv,
            headDim,
            wg,
          });
          await runPass(device, (pass) => op.encode(pass, T));
          // A copy: bit-exact, and every other slot keeps its old contents.
          expect(await readAct(device, kCache, size, precision)).toEqual(kvWriteRef(kCache0.slice(), k, slots, rowLen));
          expect(await readAct(device, vCache, size, precision)).toEqual(kvWriteRef(vCache0.slice(), v, slots, rowLen));
        });
      }
    }
  }
});
