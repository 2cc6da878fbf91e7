import { describe, expect, it } from 'vitest';
import { STORAGE, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { createBuffer } from '../gpu/buffers';
import { createLoraOp, LORA_ENTRY_WORDS, LORA_WG, loraRef, NO_ADAPTER, type LoraLayout, type LoraPoolView } from './lora';

/**
 * A hand-built pool of three adapters on a table of two matrices: ranks 1, 16 (the pool's largest)
 * and 5 on matrix 1; adapter 1 leaves matrix 0 alone (rank 0). Four step rows use adapters
 * 0, none, 2 and 1, so one dispatch mixes every case.
 */
function pool(k: number, n: number): LoraPoolView & { maxRank: number } {
  const ranks = [1, 16, 5];
  const maxRank = 16;
  const entries = new Uint32Array(3 * 2 * LORA_ENTRY_WORDS);
  const scales = new Float32Array(entries.buffer);
  let used = 7; // a non-zero start: offsets are honoured
  const parts: number[] = [];
  for (let a = 0; a < 3; a++) {
    for (let mat = 0; mat < 2; mat++) {
      const rank = a === 1 && mat === 0 ? 0 : ranks[a]!;
      const e = (a * 2 + mat) * LORA_ENTRY_WORDS;
      entries[e] = used;
      entries[e + 1] = used + rank * k;
      entries[e + 2] = rank;
      scales[e + 3] = [0.5, 2, -1.25][a]!;
      used += rank * (k + n);
      parts.push(rank);
    }
  }
  const weights = random(used + 3, 41, 0.5);
  return { weights, entries, maxRank };
}

describe('lora kernels (shrink + expand)', () => {
  // f32: k + rank products summed in f32, against float64: a few ulps of the sums' magnitude.
  // f16: y's own rounding when written back (2^-11 relative) dominates.
  const TOLERANCE = { f32: 1e-5, f16: 2e-3 };
  const tokenSeq = [0, 0, 1, 2, 3, 3, 2];
  const seqAdapter = [0, NO_ADAPTER, 2, 1];

  /** stream: x and y are the f32 residual stream ×1e5 (x_t, y_t held at f32 in the f16 variant). */
  async function run(precision: 'f32' | 'f16', wg: number, mat: number, fused: boolean, stream = false) {
    const { device } = await testGPU();
    const k = 70; // not a multiple of any WG
    const n = 45;
    const tokens = tokenSeq.length;
    const maxTokens = tokens + 1;
    const p = pool(k, n);
    // Fused: x and y are regions of wider rows (a fused q/k/v output, say).
    const layout: LoraLayout = fused
      ? { k, n, xStride: k + 9, xOffset: 4, yStride: n + 20, yOffset: 11, mat, numMats: 2, maxRank: p.maxRank }
      : { k, n, mat, numMats: 2, maxRank: p.maxRank };
    const xWidth = layout.xStride ?? k;
    const yWidth = layout.yStride ?? n;
    const io = stream ? 'f32' : precision;
    const x = actRound(random(maxTokens * xWidth + 4, 5 + wg, stream ? 1e5 : 1), io);
    const y0 = actRound(random(maxTokens * yWidth + 11, 6 + wg, stream ? 1e5 : 2), io);
    const yBuf = uploadAct(device, y0, io);
    const op = await createLoraOp(opContext(device, precision), {
      ...layout,
      wg,
      x: uploadAct(device, x, io),
      y: yBuf,
      xF32: stream,
      yF32: stream,
      weights: uploadBuffer(device, p.weights, STORAGE),
      entries: uploadBuffer(device, p.entries, STORAGE),
      tokenSeq: uploadBuffer(device, new Uint32Array(tokenSeq), STORAGE),
      seqAdapter: uploadBuffer(device, new Uint32Array(seqAdapter), STORAGE),
      h: createBuffer(device, maxTokens * p.maxRank * 4, STORAGE),
    });
    await runPass(device, (pass) => op.encode(pass, tokens));
    const got = await readAct(device, yBuf, y0.length, io);
    const want = actRound(loraRef(x, y0, tokens, layout, p, tokenSeq, seqAdapter), io);
    return { got, want, y0, layout, tokens };
  }

  for (const precision of ['f32', 'f16'] as const) {
    for (const wg of LORA_WG) {
      for (const fused of [false, true]) {
        it(`matches the reference at WG=${wg} in ${precision}${fused ? ' on regions of fused rows' : ''}`, async (ctx) => {
          if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
          for (const mat of [0, 1]) {
            const { got, want, y0, layout } = await run(precision, wg, mat, fused);
            expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
            // Rows with no adapter (step row 1: token 2) and, on matrix 0, adapter 1's rows
            // (tokens 4 and 5) are bit-for-bit what the base wrote; the adapted rows changed.
            const row = (t: number) => Array.from(got.subarray((layout.yOffset ?? 0) + t * (layout.yStride ?? layout.n), (layout.yOffset ?? 0) + t * (layout.yStride ?? layout.n) + layout.n));
            const base = (t: number) => Array.from(y0.subarray((layout.yOffset ?? 0) + t * (layout.yStride ?? layout.n), (layout.yOffset ?? 0) + t * (layout.yStride ?? layout.n) + layout.n));
            expect(row(2)).toEqual(base(2));
            if (mat === 0) expect(row(4)).toEqual(base(4));
            else expect(row(4)).not.toEqual(base(4));
            expect(row(0)).not.toEqual(base(0));
            // Past the step's tokens, and between fused regions, nothing is written.
            expect(row(7)).toEqual(base(7));
            if (fused) expect(got[0]).toBe(y0[0]);
          }
        });
      }
    }
  }

  // The f16 path's residual stream is f32: an adapter on o/down adds into it (expand's y), and one
  // on a matrix with no norm before it reads it (shrink's x). Both past f16's range (×1e5), so an
  // f16 x or y would be ±inf; f32 tolerance, relative to the stream.
  for (const wg of LORA_WG) {
    it(`reads and adds into an f32 stream beyond f16 range at WG=${wg} (f16)`, async (ctx) => {
      if (!(await testGPU()).info.f16) ctx.skip();
      const { got, want, y0 } = await run('f16', wg, 1, true, true);
      expect(Math.max(...y0.map(Math.abs))).toBeGreaterThan(65504);
      // Relative to the stream's scale: cancellation leaves some sums far below their terms.
      const scale = Math.max(...want.map(Math.abs));
      expect(Math.max(...got.map((v, i) => Math.abs(v - want[i]!))) / scale).toBeLessThan(TOLERANCE.f32);
      expect(got).not.toEqual(y0);
    });
  }

  it('reference by hand: y + scale · B · A · x for a rank-1 adapter', () => {
    // A = [1, 2], B = [3; -1], scale 0.5, x = [4, 5]: A·x = 14, update = 0.5 · [42, -14] = [21, -7].
    const entries = new Uint32Array([0, 2, 1, 0]);
    new Float32Array(entries.buffer)[3] = 0.5;
    const got = loraRef(new Float32Array([4, 5]), new Float32Array([1, 1]), 1, { k: 2, n: 2, mat: 0, numMats: 1, maxRank: 1 }, { weights: new Float32Array([1, 2, 3, -1]), entries }, [0], [0]);
    expect(Array.from(got)).toEqual([22, -6]);
  });
});
