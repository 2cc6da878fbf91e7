import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import { quantize } from '../formats/quants';
import type { DType } from '../formats/types';
import { createBuffer, STORAGE, uploadBuffer } from '../gpu/buffers';
import { KERNEL_TYPES, testGPU } from '../testing/gpu';
import { createEmbedOp, EMBED_WG, embedRef } from './embed';
import { actRound, maxRelDiff, opContext, random, readAct, runPass } from '../testing/kernel-helpers';
import { gpuBytesPerRow, uploadWeight, uploadWeightParts } from './weights';

describe('embed kernel', () => {
  // The GPU dequantises with the same f32 formulas as the reference: only rounding differs.
  // f16 activations add one rounding of the output (2^-11 relative).
  const TOLERANCE = KERNEL_TOLERANCE.embed;
  const [vocab, n] = [7, 768]; // three Q4_K/Q6_K super-blocks: 192 quads, not a multiple of WG=128

  async function run(dtype: DType, precision: 'f32' | 'f16', wg: number, ids: number[], scale?: number, xF32 = false) {
    const { device } = await testGPU();
    const table = quantize(dtype, random(vocab * n, 40 + vocab, 2));
    const maxTokens = ids.length + 1;
    const tokens = uploadBuffer(device, new Uint32Array([...ids, 0]), STORAGE);
    const x = createBuffer(device, maxTokens * n * 4, STORAGE);
    const op = await createEmbedOp(opContext(device, precision), { tokens, table: uploadWeight(device, dtype, table, n), x, xF32, dtype, n, vocab, scale, wg });
    await runPass(device, (pass) => op.encode(pass, ids.length));
    const out = xF32 ? 'f32' : precision;
    const got = await readAct(device, x, maxTokens * n, out);
    return { got, want: actRound(embedRef(dtype, table, vocab, n, ids, scale), out) };
  }

  for (const precision of ['f32', 'f16'] as const) {
    for (const dtype of KERNEL_TYPES) {
      for (const wg of EMBED_WG) {
        it(`gathers ${dtype} rows at WG=${wg} in ${precision}`, async (ctx) => {
          if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
          const ids = [3, 0, 6, 3];
          const { got, want } = await run(dtype, precision, wg, ids);
          const used = ids.length * n;
          expect(maxRelDiff(got.subarray(0, used), want)).toBeLessThan(TOLERANCE[precision]);
          // Rows of the table differ, so a wrong row shows; the slot past the step stays zero.
          expect(maxRelDiff(want.subarray(0, n), want.subarray(n, 2 * n))).toBeGreaterThan(0.1);
          expect(got.subarray(used).every((v) => v === 0)).toBe(true);
        });
      }
    }
  }

  // The f16 path's residual stream is f32 (x_t held at f32): rows scaled past f16's range (×1e5)
  // come out as f32, as the f32 path's.
  for (const wg of EMBED_WG) {
    it(`writes an f32 stream beyond f16 range at WG=${wg} (f16)`, async (ctx) => {
      if (!(await testGPU()).info.f16) ctx.skip();
      const ids = [5, 1];
      const { got, want } = await run('Q8_0', 'f16', wg, ids, 1e5, true);
      expect(Math.max(...want.map(Math.abs))).toBeGreaterThan(65504);
      expect(maxRelDiff(got.subarray(0, ids.length * n), want)).toBeLessThan(TOLERANCE.f32);
    });
  }

  // Gemma's sqrt(hidden) scale: one dtype per workgroup size and precision.
  for (const precision of ['f32', 'f16'] as const) {
    for (const wg of EMBED_WG) {
      it(`scales the rows it gathers at WG=${wg} in ${precision}`, async (ctx) => {
        if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
        const ids = [3, 0, 6];
        const { got, want } = await run('Q8_0', precision, wg, ids, Math.sqrt(n));
        const plain = await run('Q8_0', precision, wg, ids);
        expect(maxRelDiff(got.subarray(0, ids.length * n), want)).toBeLessThan(TOLERANCE[precision]);
        // The scale is there: sqrt(768) ≈ 27.7 times the unscaled rows.
        expect(maxRelDiff(want, plain.want.map((v) => v * Math.sqrt(n)))).toBeLessThan(TOLERANCE[precision]);
        expect(Math.abs(want[1]!)).toBeGreaterThan(Math.abs(plain.want[1]!) * 20);
      });
    }
  }

  // A table split by rows (3 rows per part: 3 + 3 + 1): each part's dispatch writes the tokens
  // whose row it holds, so every token, in any order, gets its row; an id past the vocabulary
  // still gets the last row (which only the last part holds).
  for (const precision of ['f32', 'f16'] as const) {
    for (const dtype of KERNEL_TYPES) {
      it(`gathers ${dtype} rows from a table split into 3 parts in ${precision}`, async (ctx) => {
        const { device, info } = await testGPU();
        if (precision === 'f16' && !info.f16) ctx.skip();
        const table = quantize(dtype, random(vocab * n, 40 + vocab, 2));
        const parts = uploadWeightParts(device, dtype, table, { rows: vocab, cols: n }, 3 * gpuBytesPerRow(dtype, n));
        expect(parts.map((p) => [p.row0, p.rows])).toEqual([[0, 3], [3, 3], [6, 1]]);
        const ids = [6, 0, 3, 5, 2, vocab + 9, 4];
        const tokens = uploadBuffer(device, new Uint32Array(ids), STORAGE);
        const x = createBuffer(device, ids.length * n * 4, STORAGE);
        const op = await createEmbedOp(opContext(device, precision), { tokens, table: parts, x, dtype, n, vocab, scale: 0.5 });
        await runPass(device, (pass) => op.encode(pass, ids.length));
        const got = await readAct(device, x, ids.length * n, precision);
        expect(maxRelDiff(got, actRound(embedRef(dtype, table, vocab, n, ids, 0.5), precision))).toBeLessThan(TOLERANCE[precision]);
        op.destroy();
        for (const p of parts) p.buffer.destroy();
      });
    }
  }

  it('clamps ids past the vocabulary to the last row instead of reading out of bounds', async () => {
    const { got, want } = await run('Q8_0', 'f32', 64, [vocab + 5]);
    expect(maxRelDiff(got.subarray(0, n), want)).toBeLessThan(1e-6);
    expect(maxRelDiff(want, embedRef('Q8_0', quantize('Q8_0', random(vocab * n, 40 + vocab, 2)), vocab, n, [vocab - 1]))).toBe(0);
  });
});
