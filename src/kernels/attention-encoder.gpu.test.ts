import { describe, expect, it } from 'vitest';
import { createBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import { testGPU } from '../testing/gpu';
import { actRound, maxRelDiff, opContext, random, readAct, runPass, uploadAct } from '../testing/kernel-helpers';
import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { attentionRef } from './attention-ref';
import { createEncoderAttentionOp, ENCODER_ATTENTION_WG } from './attention-encoder';

describe('attn_encoder kernel (bidirectional, no KV cache)', () => {
  // Two sequences in one step, the second longer than a key chunk at every WG (70 > 64): each
  // token sees every token of its own sequence, before and after it, and none of the other's.
  const lens = [5, 70];
  const cases = [
    { nHeads: 4, nKv: 2, headDim: 64 },
    { nHeads: 2, nKv: 1, headDim: 72 },
  ];
  for (const precision of ['f32', 'f16'] as const) {
    // f16 once (the op's default WG, the GQA case): lavapipe, which runs the f16 step, takes ~20 s a case here.
    for (const wg of precision === 'f16' ? [64] : ENCODER_ATTENTION_WG) {
      for (const { nHeads, nKv, headDim: D } of precision === 'f16' ? cases.slice(0, 1) : cases) {
        it(`matches the reference over two sequences at WG=${wg}, ${nHeads}/${nKv} heads of ${D} in ${precision}`, async (ctx) => {
          const gpu = await testGPU();
          if (precision === 'f16' && !gpu.info.f16) ctx.skip();
          const { device } = gpu;
          const T = lens[0]! + lens[1]!;
          const q = actRound(random(T * nHeads * D, 1 + wg + D, 1), precision);
          const k = actRound(random(T * nKv * D, 2 + wg + D, 1), precision);
          const v = actRound(random(T * nKv * D, 3 + wg + D, 1), precision);
          const out = uploadAct(device, new Float32Array(T * nHeads * D), precision);
          const lastToken = new Uint32Array([lens[0]! - 1, T - 1]);
          const op = await createEncoderAttentionOp(opContext(device, precision), {
            q: uploadAct(device, q, precision),
            k: uploadAct(device, k, precision),
            v: uploadAct(device, v, precision),
            out,
            lastToken: uploadBuffer(device, lastToken, STORAGE),
            counts: uploadBuffer(device, new Uint32Array([T, 2, 0, 0]), UNIFORM),
            nHeads,
            nKv,
            headDim: D,
            wg,
          });
          await runPass(device, (pass) => op.encode(pass, T));
          const got = await readAct(device, out, T * nHeads * D, precision);
          const split = lens[0]! * nKv * D;
          const args = {
            q,
            keys: [k.subarray(0, split), k.subarray(split)],
            values: [v.subarray(0, split), v.subarray(split)],
            tokenSeq: Array.from({ length: T }, (_, t) => (t < lens[0]! ? 0 : 1)),
            positions: Array.from({ length: T }, (_, t) => (t < lens[0]! ? t : t - lens[0]!)),
            nHeads,
            nKv,
            headDim: D,
          };
          const want = attentionRef({ ...args, causal: false });
          expect(maxRelDiff(got, want)).toBeLessThan(KERNEL_TOLERANCE.attention[precision]);
          // Not the causal attention: an early token's output depends on later keys.
          expect(maxRelDiff(attentionRef(args), want)).toBeGreaterThan(0.01);
          op.destroy();
        });
      }
    }
  }

  // The symmetric window (EmbeddingGemma's local layers): half-window 5 over the same two
  // sequences, with WG=32 so the 70-token sequence's windows straddle key chunks.
  it('matches the reference with a symmetric half-window of 5', async () => {
    const { device } = await testGPU();
    const [nHeads, nKv, D, hw, wg] = [2, 1, 32, 5, 32];
    const T = lens[0]! + lens[1]!;
    const q = random(T * nHeads * D, 11, 1);
    const k = random(T * nKv * D, 12, 1);
    const v = random(T * nKv * D, 13, 1);
    const out = uploadAct(device, new Float32Array(T * nHeads * D), 'f32');
    const op = await createEncoderAttentionOp(opContext(device, 'f32'), {
      q: uploadAct(device, q, 'f32'), k: uploadAct(device, k, 'f32'), v: uploadAct(device, v, 'f32'), out,
      lastToken: uploadBuffer(device, new Uint32Array([lens[0]! - 1, T - 1]), STORAGE),
      counts: uploadBuffer(device, new Uint32Array([T, 2, 0, 0]), UNIFORM),
      nHeads, nKv, headDim: D, halfWindow: hw, wg,
    });
    await runPass(device, (pass) => op.encode(pass, T));
    const got = await readAct(device, out, T * nHeads * D, 'f32');
    const split = lens[0]! * nKv * D;
    const args = {
      q, keys: [k.subarray(0, split), k.subarray(split)], values: [v.subarray(0, split), v.subarray(split)],
      tokenSeq: Array.from({ length: T }, (_, t) => (t < lens[0]! ? 0 : 1)),
      positions: Array.from({ length: T }, (_, t) => (t < lens[0]! ? t : t - lens[0]!)),
      nHeads, nKv, headDim: D, causal: false,
    };
    const want = attentionRef({ ...args, halfWindow: hw });
    expect(maxRelDiff(got, want)).toBeLessThan(KERNEL_TOLERANCE.attention.f32);
    // The window masks something: full attention differs.
    expect(maxRelDiff(attentionRef(args), want)).toBeGreaterThan(0.01);
    // The reference's window is symmetricWindowSees's: token 30 of the long sequence sees 25..35 only.
    const only = attentionRef({ ...args, q: q.subarray((lens[0]! + 30) * nHeads * D, (lens[0]! + 31) * nHeads * D), tokenSeq: [0], positions: [5],
      keys: [k.subarray((lens[0]! + 25) * nKv * D, (lens[0]! + 36) * nKv * D)], values: [v.subarray((lens[0]! + 25) * nKv * D, (lens[0]! + 36) * nKv * D)] });
    expect(maxRelDiff(want.subarray((lens[0]! + 30) * nHeads * D, (lens[0]! + 31) * nHeads * D), only)).toBeLessThan(1e-6);
    op.destroy();
  });

  it('refuses a head wider than four columns per thread', async () => {
    const { device } = await testGPU();
    const b = createBuffer(device, 16, STORAGE);
    await expect(createEncoderAttentionOp(opContext(device, 'f32'), { q: b, k: b, v: b, out: b, lastToken: b, counts: b, nHeads: 1, nKv: 1, headDim: 160, wg: 32 })).rejects.toThrow(RangeError);
  });
});
