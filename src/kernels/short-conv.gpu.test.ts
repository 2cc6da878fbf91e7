import { describe, expect, it } from 'vitest';
import { createBuffer, readBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { createShortConvOp, SHORT_CONV_WG, shortConvRef } from './short-conv';

describe('short_conv kernel', () => {
  const TOLERANCE = KERNEL_TOLERANCE.shortConv;
  const n = 100; // not a multiple of any WG: the bounds check matters
  const maxSeqs = 4;

  /**
   * Two steps over the same slots: a prefill row longer than the kernel, a one-token decode row and
   * a two-token row, each slot starting from a nonzero state; the second step continues from the
   * first one's states with a verify run (a three-token row and two one-token rows on one slot: each
   * continues the state the row before left, checkpointed at rows 0 and 1) and a row on another
   * slot. y of both steps and the states and checkpoint rows after them against the reference.
   */
  async function run(precision: 'f32' | 'f16', wg: number, taps: number) {
    const { device } = await testGPU();
    const steps = [
      { lastToken: [4, 5, 7], rowSlot: [2, 0, 3] },
      { lastToken: [2, 3, 4, 6], rowSlot: [2, 2, 2, 0] },
    ];
    const maxTokens = 8;
    const w = random(n * taps, 5 + taps, 1);
    // The slots, then a checkpoint row per step row (from row maxSeqs on), as the engine's layer caches.
    const initial = random(2 * maxSeqs * (taps - 1) * n, 9, 2);
    const states = Array.from({ length: 2 * maxSeqs }, (_, s) => initial.slice(s * (taps - 1) * n, (s + 1) * (taps - 1) * n));
    const stateBuf = uploadBuffer(device, initial, STORAGE);
    const wBuf = uploadBuffer(device, w, STORAGE);
    const yBuf = createBuffer(device, maxTokens * n * 4, STORAGE);
    const results: { got: Float32Array; want: Float32Array }[] = [];
    for (const [i, step] of steps.entries()) {
      const T = step.lastToken[step.lastToken.length - 1]! + 1;
      const bcx = actRound(random(maxTokens * 3 * n, 20 + i, 2), precision);
      const meta = (xs: number[]) => uploadBuffer(device, Uint32Array.from([...xs, ...new Array(maxSeqs - xs.length).fill(0)]), STORAGE);
      const counts = uploadBuffer(device, Uint32Array.from([T, step.lastToken.length, 0, 0]), UNIFORM);
      const op = await createShortConvOp(opContext(device, precision), {
        bcx: uploadAct(device, bcx, precision),
        weight: wBuf,
        state: stateBuf,
        ckpt: maxSeqs,
        y: yBuf,
        lastToken: meta(step.lastToken),
        rowSlot: meta(step.rowSlot),
        counts,
        n,
        taps,
        wg,
      });
      await runPass(device, (pass) => op.encode(pass, step.lastToken.length));
      const got = await readAct(device, yBuf, T * n, precision);
      results.push({ got, want: actRound(shortConvRef(bcx, w, n, taps, step.lastToken, step.rowSlot, states, states.slice(maxSeqs)), precision) });
    }
    const gotState = new Float32Array(await readBuffer(device, stateBuf, initial.length * 4));
    return { results, gotState, wantState: Float32Array.from(states.flatMap((s) => [...s])) };
  }

  for (const precision of ['f32', 'f16'] as const) {
    for (const wg of SHORT_CONV_WG) {
      it(`matches the reference over two ragged steps at WG=${wg} in ${precision}, its states carried`, async (ctx) => {
        if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
        const { results, gotState, wantState } = await run(precision, wg, 3);
        for (const { got, want } of results) expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
        // u = B·x is formed from act values in f32, and the state stays f32: exact up to the sums' order.
        expect(maxRelDiff(gotState, wantState)).toBeLessThan(1e-6);
      });
    }
  }

  it('takes other kernel lengths (4 taps, f32)', async () => {
    const { results, gotState, wantState } = await run('f32', 64, 4);
    for (const { got, want } of results) expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE.f32);
    expect(maxRelDiff(gotState, wantState)).toBeLessThan(1e-6);
  });
});
