import { KERNEL_TOLERANCE } from '../testing/tolerances';
import { describe, expect, it } from 'vitest';
import { createBuffer, STORAGE, UNIFORM, uploadBuffer } from '../gpu/buffers';
import type { Precision } from '../gpu/pipelines';
import { IN_BROWSER, testGPU } from '../testing/gpu';
import {
  attentionRef,
  createAttentionOp,
  DECODE_KEY_TILES,
  DECODE_TARGET_WORKGROUPS,
  decodeLayout,
  decodeSplits,
  decodeWorkgroupBytes,
  MIN_SPLIT_KEYS,
  PREFILL_TILES,
  prefillLayout,
  prefillWorkgroupBytes,
  stepSplits,
  type AttentionArgs,
  type AttentionMode,
} from './attention';
import { makePagedBatch, type SeqSpec } from '../testing/attention-batch';
import { actRound, maxRelDiff, opContext, readAct, runPass, uploadAct } from '../testing/kernel-helpers';

interface Case {
  nHeads: number;
  nKv: number;
  headDim: number;
  pageSize: number;
  seqs: SeqSpec[];
  precision?: Precision;
  decode?: AttentionArgs['decode'];
  prefill?: AttentionArgs['prefill'];
  /** Sliding window in keys; absent: full causal attention. */
  window?: number;
  /** q·k multiplier and score soft-cap (Gemma 2); absent: 1/sqrt(headDim), none. */
  scale?: number;
  softcap?: number;
}

// A mixed ragged batch: one sequence decodes a token, one starts with a 5-token prompt, one
// continues with an 11-token prefill run across a page boundary.
const MIXED: SeqSpec[] = [
  { len: 37, fresh: 1 },
  { len: 5, fresh: 5 },
  { len: 70, fresh: 11 },
];
const MAX_PAGES = 6;

/** Runs the op on a paged batch in one mode; returns GPU and reference outputs. */
async function run(c: Case, mode: AttentionMode, seed = 1, maxKeys?: number) {
  const gpu = await testGPU();
  const { device } = gpu;
  const precision = c.precision ?? 'f32';
  const b = makePagedBatch({ ...c, maxPagesPerSeq: MAX_PAGES, seed, window: c.window });
  const q = actRound(b.q, precision);
  const kCache = actRound(b.kCache, precision);
  const vCache = actRound(b.vCache, precision);
  const u32 = (x: Uint32Array) => uploadBuffer(device, x);
  const n = b.T * c.nHeads * c.headDim;
  const out = createBuffer(device, n * 4, STORAGE);
  // The path a case does not test gets small specs that other cases compile anyway (a pipeline
  // cache hit), not the defaults: those are the largest variants, the slowest to compile on
  // SwiftShader, and have cases of their own (a case that sets neither side runs both at defaults).
  const decode = c.decode ?? (c.prefill ? { keyTile: DECODE_KEY_TILES[c.headDim === 64 ? 0 : 1], splits: 3 } : undefined);
  const prefill = c.prefill ?? (c.decode ? PREFILL_TILES[0] : undefined);
  const op = await createAttentionOp(opContext(device, precision), {
    q: uploadAct(device, q, precision),
    kCache: uploadAct(device, kCache, precision),
    vCache: uploadAct(device, vCache, precision),
    out,
    positions: u32(b.positions),
    tokenSeq: u32(b.tokenSeq),
    blockTable: u32(b.blockTable),
    lastToken: u32(b.lastToken),
    counts: uploadBuffer(device, b.counts, UNIFORM),
    nHeads: c.nHeads,
    nKv: c.nKv,
    headDim: c.headDim,
    pageSize: c.pageSize,
    maxTokens: b.T,
    maxSeqs: c.seqs.length,
    maxPagesPerSeq: MAX_PAGES,
    window: c.window,
    scale: c.scale,
    softcap: c.softcap,
    decode: { maxTokens: b.T, ...decode },
    prefill,
  });
  let dispatches = 0;
  await runPass(device, (pass) => {
    const dispatch = pass.dispatchWorkgroups.bind(pass);
    pass.dispatchWorkgroups = (x: number, y?: number, z?: number) => (dispatches++, dispatch(x, y, z));
    op.encode(pass, b.T, mode, maxKeys);
  });
  const got = await readAct(device, out, n, precision);
  const want = attentionRef({
    q,
    keys: b.keys.map((k) => actRound(k, precision)),
    values: b.values.map((v) => actRound(v, precision)),
    tokenSeq: b.tokenSeq,
    positions: b.positions,
    window: c.window,
    scale: c.scale,
    softcap: c.softcap,
    nHeads: c.nHeads,
    nKv: c.nKv,
    headDim: c.headDim,
  });
  return { got, want, op, batch: b, dispatches };
}

/**
 * Head dims of the grids below: both in Node; in Chromium (the same Dawn and Tint) one, which
 * still runs every path and tile there.
 */
const HEAD_DIMS = IN_BROWSER ? [64] : [64, 128];

/**
 * The grid's shapes in f16 (lavapipe, where each pipeline compiles for seconds): each GQA shape
 * at one page size, so both softmax forms (subgroups at page 16, serial at 32) and both workgroup
 * groupings still run at each head dim; page size is a uniform, not a specialisation.
 */
const F16_SHAPES = new Set(['2/2@16', '4/1@32']);
/**
 * f16 at head dim 64 alone: a cold lavapipe compiles each f16 attention pipeline for about ten
 * seconds (the grid took 284 s at both head dims), the head dim changes only the loop bounds the
 * f32 grid runs at 128, and selfcheck runs both in f16 on GPUs that have it.
 */
const headDimsFor = (precision: Precision) => (precision === 'f16' ? HEAD_DIMS.slice(0, 1) : HEAD_DIMS);

describe('paged attention kernels', () => {
  // f32 dots over ≤ 128 elements and softmax sums over ≤ 70 keys: ~1e-6; outputs are O(1).
  // f16: inputs are rounded alike on both sides, the output itself is rounded to f16 (2^-11).
  const TOLERANCE = KERNEL_TOLERANCE.attention;

  for (const precision of ['f32', 'f16'] as const) {
    for (const headDim of headDimsFor(precision)) {
      for (const [nHeads, nKv] of [[2, 2], [4, 1]] as const) {
        for (const pageSize of [16, 32]) {
          if (precision === 'f16' && !F16_SHAPES.has(`${nHeads}/${nKv}@${pageSize}`)) continue;
          const c: Case = { nHeads, nKv, headDim, pageSize, seqs: MIXED, precision };
          const where = `headDim ${headDim}, ${nHeads}/${nKv} heads, page ${pageSize}, ${precision}`;
          const skipUnlessF16 = async (ctx: { skip(): void }) => {
            if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
          };

          // 3 splits divide the 70-key context in 3 (the short sequences leave splits empty); one
          // split writes the output without a combine pass.
          // The softmax by subgroups at page 16 (where the device has them), by one thread per head
          // at page 32: both at every shape without running each case twice.
          const subgroups = pageSize === 16;
          for (const splits of [3, 1]) {
            // One key tile per head dim: each extra variant costs seconds of SwiftShader compile.
            const keyTile = DECODE_KEY_TILES[headDim === 64 ? 0 : 1];
            it(`decodes a mixed batch with ${splits === 1 ? 'one split' : `${splits} splits`} (key tile ${keyTile}, ${subgroups ? 'subgroup' : 'serial'} softmax, ${where})`, async (ctx) => {
              await skipUnlessF16(ctx);
              const { got, want, op, dispatches } = await run({ ...c, decode: { splits, keyTile, subgroups } }, 'decode');
              expect(op.decodeSubgroups).toBe(subgroups && (await testGPU()).info.subgroups);
              expect(op.nSplits).toBe(splits);
              expect(op.decodeGroup).toBe(nHeads / nKv); // the whole GQA group in one workgroup
              expect(dispatches).toBe(splits === 1 ? 1 : 2);
              expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
            });
          }

          // Prefill's softmax likewise, but serial only at the small tiles (the large ones take
          // seconds more to compile, and the scan is the same loop over fewer keys), and in f16
          // subgroup only (what f16 devices with subgroups run): each f16 pipeline costs seconds
          // to compile on lavapipe, and the serial scan is decode's softmax_tile, run in f16 above.
          for (const tile of PREFILL_TILES) {
            const prefillSubgroups = subgroups || precision === 'f16' || tile !== PREFILL_TILES[0];
            it(`prefills a mixed batch in ${tile.tq}×${tile.tk} tiles (${prefillSubgroups ? 'subgroup' : 'serial'} softmax, ${where})`, async (ctx) => {
              await skipUnlessF16(ctx);
              const { got, want, op } = await run({ ...c, prefill: { ...tile, subgroups: prefillSubgroups } }, 'prefill');
              expect(op.prefillSubgroups).toBe(prefillSubgroups && (await testGPU()).info.subgroups);
              // 4 query heads on one KV head share a workgroup where the rows fit (4 tokens do).
              if (nKv === 1 && tile.tq === 4) expect(op.prefillTile.group).toBe(4);
              expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
            });
          }
        }
      }
    }
  }

  // A 20-key sliding window over MIXED: the 37-key sequence loses its first 17 keys (whole
  // splits and pages of them), the 70-key one its first 40 to 50 (prefill tiles straddle the
  // window's start), the 5-key one nothing. Keys no token sees are NaN in the cache, so reading
  // them fails the test. One case per specialisation (page 16, 4/1 heads).
  const WINDOW = 20;
  for (const precision of ['f32', 'f16'] as const) {
    for (const headDim of headDimsFor(precision)) {
      const c: Case = { nHeads: 4, nKv: 1, headDim, pageSize: 16, seqs: MIXED, precision, window: WINDOW };
      const where = `headDim ${headDim}, ${precision}`;
      const skipUnlessF16 = async (ctx: { skip(): void }) => {
        if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
      };
      const keyTile = DECODE_KEY_TILES[headDim === 64 ? 0 : 1];
      it(`decodes a mixed batch under a ${WINDOW}-key sliding window, skipping what it hides (key tile ${keyTile}, ${where})`, async (ctx) => {
        await skipUnlessF16(ctx);
        const { got, want } = await run({ ...c, decode: { splits: 3, keyTile } }, 'decode');
        expect(got.every(Number.isFinite)).toBe(true); // no NaN key was read
        expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
      });
      for (const tile of PREFILL_TILES) {
        it(`prefills a mixed batch under a ${WINDOW}-key sliding window in ${tile.tq}×${tile.tk} tiles, skipping what it hides (${where})`, async (ctx) => {
          await skipUnlessF16(ctx);
          const { got, want } = await run({ ...c, prefill: tile }, 'prefill');
          expect(got.every(Number.isFinite)).toBe(true); // no NaN key was read
          expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
        });
      }
    }
  }

  // Soft-capped scores (Gemma 2) with a query scale of its own: a scale of 1 spreads the scores
  // over several units, and a cap of 2 bends most of them. Every specialisation of both paths.
  // In f16 at the grid's 2/2 shape (page 16, subgroup softmax): the cap and the scale are
  // uniforms, so the f16 cases compile no pipeline the grid has not (4/2 heads, a workgroup
  // grouping of its own, cost a cold lavapipe about 35 s of compiling).
  for (const precision of ['f32', 'f16'] as const) {
    for (const headDim of headDimsFor(precision)) {
      const c: Case = { nHeads: precision === 'f16' ? 2 : 4, nKv: 2, headDim, pageSize: 16, seqs: MIXED, precision, scale: 1, softcap: 2 };
      const where = `headDim ${headDim}, ${precision}`;
      const keyTile = DECODE_KEY_TILES[headDim === 64 ? 0 : 1];
      it(`soft-caps the scaled scores when decoding (key tile ${keyTile}, ${where})`, async (ctx) => {
        if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
        const { got, want } = await run({ ...c, decode: { splits: 3, keyTile } }, 'decode');
        expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
      });
      for (const tile of PREFILL_TILES) {
        it(`soft-caps the scaled scores when prefilling in ${tile.tq}×${tile.tk} tiles (${where})`, async (ctx) => {
          if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
          const { got, want } = await run({ ...c, prefill: tile }, 'prefill');
          expect(maxRelDiff(got, want)).toBeLessThan(TOLERANCE[precision]);
        });
      }
    }
  }

  it('soft-capping and the scale each change the answer; a cap far above the scores does not', async () => {
    // headDim 40, 2/1 heads at the default specs: the sweep's pipelines (a cache hit).
    const c: Case = { nHeads: 2, nKv: 1, headDim: 40, pageSize: 16, seqs: [{ len: 30, fresh: 6 }], scale: 1 };
    const capped = await run({ ...c, softcap: 2 }, 'prefill', 5);
    const uncapped = await run(c, 'prefill', 5);
    const defaultScale = await run({ ...c, scale: undefined }, 'prefill', 5);
    const farCap = await run({ ...c, softcap: 1e4 }, 'prefill', 5);
    expect(maxRelDiff(capped.want, uncapped.want)).toBeGreaterThan(1e-2);
    expect(maxRelDiff(defaultScale.want, uncapped.want)).toBeGreaterThan(1e-2);
    expect(maxRelDiff(farCap.got, uncapped.want)).toBeLessThan(1e-3);
    expect(maxRelDiff(capped.got, capped.want)).toBeLessThan(1e-5);
    await expect(run({ ...c, softcap: -1 }, 'prefill')).rejects.toThrow(/softcap/);
  });

  it('narrows attention to the window on both paths, down to a window of one key', async () => {
    const c: Case = { nHeads: 2, nKv: 1, headDim: 40, pageSize: 16, seqs: [{ len: 40, fresh: 9 }, { len: 3, fresh: 1 }] };
    for (const window of [1, 7]) {
      const decode = await run({ ...c, window, decode: { splits: 4 } }, 'decode', 3);
      const prefill = await run({ ...c, window }, 'prefill', 3);
      expect(maxRelDiff(decode.got, decode.want)).toBeLessThan(1e-5);
      expect(maxRelDiff(prefill.got, decode.want)).toBeLessThan(1e-5);
      // The window matters: full attention over the same batch is another answer.
      const full = await run(c, 'prefill', 3);
      expect(maxRelDiff(full.want, decode.want)).toBeGreaterThan(1e-2);
    }
    // A window of one key returns each token's own value row, whatever the scores.
    const { got, batch } = await run({ ...c, window: 1 }, 'prefill', 3);
    const own = new Float32Array(got.length);
    for (let t = 0; t < batch.T; t++) {
      const values = batch.values[batch.tokenSeq[t]!]!;
      for (let h = 0; h < c.nHeads; h++) own.set(values.subarray(batch.positions[t]! * c.headDim, (batch.positions[t]! + 1) * c.headDim), (t * c.nHeads + h) * c.headDim);
    }
    expect(maxRelDiff(got, own)).toBeLessThan(1e-6);
  });

  it('rejects a window that is not a positive key count', async () => {
    await expect(run({ nHeads: 2, nKv: 1, headDim: 64, pageSize: 16, seqs: [{ len: 3, fresh: 1 }], window: 0 }, 'prefill')).rejects.toThrow(/window/);
  });

  it('gives the same answer on both paths when every sequence decodes one token', async () => {
    const c: Case = { nHeads: 4, nKv: 1, headDim: 64, pageSize: 16, seqs: [{ len: 90, fresh: 1 }, { len: 1, fresh: 1 }, { len: 17, fresh: 1 }] };
    // The tiles the mixed-batch cases at this shape compile (a cache hit).
    const decode = await run({ ...c, decode: { splits: 2, keyTile: DECODE_KEY_TILES[0] } }, 'decode', 7);
    const prefill = await run({ ...c, prefill: PREFILL_TILES[1] }, 'prefill', 7);
    expect(maxRelDiff(decode.got, decode.want)).toBeLessThan(1e-5);
    expect(maxRelDiff(prefill.got, decode.got)).toBeLessThan(1e-5);
  });

  // Every head dim a config can state (a multiple of 4: the kernels read vec4s): odd multiples of
  // 8, the common sizes, 256, and 20/4. The specs the engine picks by default (the largest
  // variants: 32-key decode tiles, 16-token prefill tiles) at the smallest, an odd and the largest
  // head dim in f32 and an odd one in f16; the other dims at small tiles, which compile in a
  // fraction of the time and run the same head-dim arithmetic.
  const small = { decode: { keyTile: 8, splits: 2 }, prefill: PREFILL_TILES[0] };
  const sweep: [number, Precision, 'default' | 'small'][] = [
    ...[4, 40, 256].map((d) => [d, 'f32', 'default'] as [number, Precision, 'default']),
    [40, 'f16', 'default'],
    ...[20, 24, 72, 80, 96, 112].map((d) => [d, 'f32', 'small'] as [number, Precision, 'small']),
    ...[24, 72].map((d) => [d, 'f16', 'small'] as [number, Precision, 'small']),
  ];
  for (const [headDim, precision, specs] of sweep) {
    const c: Case = { nHeads: 2, nKv: 1, headDim, pageSize: 16, seqs: [{ len: 21, fresh: 1 }, { len: 19, fresh: 19 }], precision, ...(specs === 'small' ? small : {}) };
    it(`runs both paths with the ${specs} specs at headDim ${headDim} (${precision})`, async (ctx) => {
      if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
      for (const mode of ['decode', 'prefill'] as const) {
        const { got, want } = await run(c, mode, headDim);
        expect(maxRelDiff(got, want), `${mode}`).toBeLessThan(TOLERANCE[precision]);
      }
    });
  }

  it('refuses a head dim that is not a multiple of 4 at creation, saying why', async () => {
    await expect(run({ nHeads: 2, nKv: 1, headDim: 18, pageSize: 16, seqs: [{ len: 3, fresh: 1 }] }, 'prefill')).rejects.toThrow(/multiple of 4/);
  });

  it('picks default splits and tiles that fit the device', async () => {
    const { device } = await testGPU();
    const limit = device.limits.maxComputeWorkgroupStorageSize;
    const { op } = await run({ nHeads: 2, nKv: 1, headDim: 40, pageSize: 16, seqs: [{ len: 20, fresh: 20 }] }, 'prefill');
    expect(op.nSplits).toBe(2); // 6 pages of 16 keys: 96 keys make two splits of at least MIN_SPLIT_KEYS
    expect(op.decodeGroup).toBe(2);
    expect(decodeWorkgroupBytes(40, 2, op.keyTile, 128)).toBeLessThanOrEqual(limit);
    expect(op.scratchBytes).toBeGreaterThan(0);
    expect(limit).toBeGreaterThanOrEqual(16384);
    // A long context on one KV head: splits reach the workgroup target; on 8 KV heads, an eighth.
    expect(decodeSplits(1, 32768)).toBe(DECODE_TARGET_WORKGROUPS);
    expect(decodeSplits(8, 32768)).toBe(DECODE_TARGET_WORKGROUPS / 8);
    expect(decodeSplits(8, 100)).toBe(2);
    // A step runs one split while its longest context is short or its tokens fill the device.
    expect(stepSplits(16, 8, 1, MIN_SPLIT_KEYS)).toBe(1);
    expect(stepSplits(16, 8, 1, MIN_SPLIT_KEYS + 1)).toBe(16);
    expect(stepSplits(16, 8, DECODE_TARGET_WORKGROUPS / 8, 4096)).toBe(1);
    expect(stepSplits(16, 8, 1)).toBe(16);
    // A wide GQA group that does not fit one workgroup is split into the largest divisor that does.
    // Prefill: a Llama-3-8B-like head layout takes its whole GQA group of 4 heads, 4 tokens each.
    expect(prefillLayout(128, 32, 8, { bytes: 32768, threads: 256 })).toMatchObject({ group: 4, tq: 4, tk: 16 });
    expect(prefillWorkgroupBytes(128, 4, 16, 4)).toBeLessThanOrEqual(32768);
    const wide = decodeLayout(256, 64, 1, { bytes: 32768, threads: 256 });
    expect(wide.group).toBe(8);
    expect(decodeWorkgroupBytes(256, wide.group, wide.keyTile, wide.wg)).toBeLessThanOrEqual(32768);
  });

  // The engine passes each step's longest context: a short one runs a single split and no combine
  // pass even where the op has several splits for long contexts; a long one runs them all.
  for (const precision of ['f32', 'f16'] as const) {
    it(`runs one split for a short decode step and all of them for a long one (${precision})`, async (ctx) => {
      if (precision === 'f16' && !(await testGPU()).info.f16) ctx.skip();
      const c: Case = { nHeads: 4, nKv: 1, headDim: 64, pageSize: 16, seqs: [{ len: 60, fresh: 1 }, { len: 9, fresh: 1 }], precision, decode: { splits: 4, keyTile: 8 } };
      const short = await run(c, 'decode', 11, 60);
      expect(short.dispatches).toBe(1);
      expect(maxRelDiff(short.got, short.want)).toBeLessThan(TOLERANCE[precision]);
      const long = await run({ ...c, seqs: [{ len: 90, fresh: 1 }, { len: 9, fresh: 1 }] }, 'decode', 11, 90);
      expect(long.dispatches).toBe(2);
      expect(maxRelDiff(long.got, long.want)).toBeLessThan(TOLERANCE[precision]);
    });
  }

  // The subgroup softmax where a workgroup's runs of lanes are fewer than its rows (8 threads:
  // 2 runs of SwiftShader's 4 lanes, 1 of lavapipe's 8, for 4 heads, or prefill's 4 tokens × 1
  // head) and a key tile of 12 keys (no power of two: runs of 4 or 8 lanes take 3 or 2 keys a
  // lane, the last tile fewer). f32 where the device has no f16 (SwiftShader), else f16 alone
  // (lavapipe, where each pipeline takes seconds to compile and SwiftShader has run the f32 ones).
  it('decodes and prefills with the subgroup softmax over several trips of rows and a 12-key tile (f32 and f16)', async (ctx) => {
    const gpu = await testGPU();
    if (!gpu.info.subgroups) ctx.skip();
    for (const precision of gpu.info.f16 ? (['f16'] as const) : (['f32'] as const)) {
      const c: Case = { nHeads: 4, nKv: 1, headDim: 40, pageSize: 16, seqs: MIXED, precision, decode: { splits: 2, keyTile: 12, wg: 8 }, prefill: { tq: 4, tk: 12, wg: 8 } };
      const decode = await run(c, 'decode', 17);
      expect(decode.op.decodeSubgroups).toBe(true);
      expect(maxRelDiff(decode.got, decode.want), `decode ${precision}`).toBeLessThan(TOLERANCE[precision]);
      const prefill = await run(c, 'prefill', 17);
      expect(prefill.op.prefillSubgroups).toBe(true);
      expect(prefill.op.prefillTile).toEqual({ tq: 4, group: 1 });
      expect(maxRelDiff(prefill.got, prefill.want), `prefill ${precision}`).toBeLessThan(TOLERANCE[precision]);
    }
  });

  // Part of a GQA group per workgroup (where a whole one would not fit): 8 query heads on 2 KV
  // heads, in workgroups of 2 heads, at an odd head dim.
  it('decodes with a partial GQA group per workgroup (f32 and f16)', async (ctx) => {
    for (const precision of ['f32', 'f16'] as const) {
      if (precision === 'f16' && !(await testGPU()).info.f16) continue;
      const { got, want, op } = await run({ nHeads: 8, nKv: 2, headDim: 40, pageSize: 16, seqs: MIXED, precision, decode: { splits: 2, group: 2, keyTile: 8 } }, 'decode', 13);
      expect(op.decodeGroup).toBe(2);
      expect(maxRelDiff(got, want), precision).toBeLessThan(TOLERANCE[precision]);
    }
  });
});
