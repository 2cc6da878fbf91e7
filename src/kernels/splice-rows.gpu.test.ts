import { describe, expect, it } from 'vitest';
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { opContext, random, readAct, runPass } from '../testing/kernel-helpers';
import { createSpliceRowsOp, SPLICE_NONE, SPLICE_ROWS_WG, spliceRowsRef } from './splice-rows';

describe('splice_rows kernel', () => {
  for (const wg of SPLICE_ROWS_WG) {
    it(`puts the indexed rows over the step's rows that have one, at WG=${wg}, and leaves the rest`, async () => {
      const { device } = await testGPU();
      const [n, tokens, maxTokens] = [300, 5, 6];
      const x = random(maxTokens * n, 3 + wg, 1);
      const rows = random(3 * n, 4 + wg, 1);
      const index = new Uint32Array([SPLICE_NONE, 2, 0, SPLICE_NONE, 1, 0]);
      const xb = uploadBuffer(device, x, STORAGE);
      const op = await createSpliceRowsOp(opContext(device, 'f32'), { x: xb, rows: uploadBuffer(device, rows, STORAGE), index: uploadBuffer(device, index, STORAGE), n, wg });
      await runPass(device, (pass) => op.encode(pass, tokens));
      const got = await readAct(device, xb, maxTokens * n, 'f32');
      // The last row's index (0) is past this step's rows: untouched.
      const want = spliceRowsRef(x.subarray(0, tokens * n), rows, index.subarray(0, tokens), n);
      expect(Array.from(got.subarray(0, tokens * n))).toEqual(Array.from(want));
      expect(Array.from(got.subarray(tokens * n))).toEqual(Array.from(x.subarray(tokens * n)));
      expect(Array.from(got.subarray(n, 2 * n))).toEqual(Array.from(rows.subarray(2 * n, 3 * n)));
    });
  }
});
