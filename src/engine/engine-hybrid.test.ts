/**
 * The GPU engine on a hybrid model (LFM2: gated short convolutions on layers 0 and 2, attention on
 * layer 1), where each sequence keeps a conv state in its slot: state carried across prefill
 * chunks, rows of one step each over their own slot, a slot reused after an abort and after a
 * preemption starting from zero, the prefix cache resuming from the state snapshots kept at page
 * boundaries (./state-snapshots.ts: a repeated prompt, `n` choices and a conversation's next turn
 * compute only what follows the last snapshot, with the cold run's tokens and logprobs), and
 * speculation: a verify step's rows past a rejected proposal rolled back out of the state (the
 * checkpoint at the miss, ./layer-cache.ts), with each proposer, and an abort mid-verify.
 * The grid's lfm2 cases (engine-matrix.ts) check the model itself over 16 steps. Qwen3.5's
 * DeltaNet (its conv window and per-head state in one slot) and Granite 4.0-H's Mamba-2 (its conv
 * window and per-head scan state) take the chunked prompt and concurrent requests, Qwen3.5 an
 * abort and a preemption mid-sequence too; Qwen3.5 and Granite speculate as LFM2 does; the
 * rest is the same slot-state machinery. Qwen3.5's MTP head runs here on the GPU beside that
 * engine, against the CPU reference. LoRA adapters apply to LFM2's and Qwen3.5's recurrent
 * projections (LFM2's conv in_proj/out_proj, Qwen3.5's DeltaNet qkv/z/b/a/out) as to attention
 * and the MLP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import { openModel, type OpenedModel } from '../model/open';
import { argmax, greedy, logitsFor, ReferenceModel } from '../reference/forward';
import { MtpReference } from '../reference/mtp';
import { maxAbsDiffAll } from '../testing/compare';
import { expectEngineMatchesReference } from '../testing/engine-check';
import { LOGIT_TOLERANCE } from '../testing/engine-matrix';
import { ensureLoraFixture } from '../testing/fixtures/lora-write';
import type { FixtureOptions } from '../testing/fixtures/model';
import { ensureFixture } from '../testing/fixtures/shared';
import { mergedReference } from '../testing/lora-reference';
import { testGPU } from '../testing/gpu';
import { drainGeneration, greedyRequest } from '../testing/sampling';
import { GpuEngine, VERIFY_ROWS } from './engine';
import { layerCacheKinds } from './layer-cache';
import { snapshotBytes } from './state-snapshots';
import type { GeneratedToken, GenerateRequest, GenerationResult } from './types';
import { uploadWeights } from './gpu-weights';
import { GpuMtpHead } from './mtp-head';
import type { MtpDrafter } from './mtp-proposer';
import { gpuBytesPerRow } from '../kernels/weights';

let gpu: GPUContext;
let opened: OpenedModel;
let ref: ReferenceModel;
let engine: GpuEngine;

beforeAll(async () => {
  gpu = await testGPU();
  const paths = await ensureFixture({ arch: 'lfm2', preset: 'tiny' });
  opened = await openModel(paths.gguf.Q8_0!);
  ref = await ReferenceModel.load(opened);
  engine = await GpuEngine.load(opened, { gpu, precision: 'f32', contextLength: 96, pageSize: 4, prefillChunk: 16, maxBatch: 4 });
  // The load compiles every pipeline: over a minute on SwiftShader beside the other engine files.
}, 300_000);
afterAll(() => engine?.dispose());

/**
 * A request aborted after 3 tokens beside another (`otherTokens` long), then a third taking the
 * aborted one's slot: both finish as the reference.
 */
async function expectAbortMidSequence(e: GpuEngine, r: ReferenceModel, p: (seed: number, n: number) => number[], otherTokens: number): Promise<void> {
  const ctl = new AbortController();
  const aborted = drainGeneration(e.generate({ ...greedyRequest(p(4, 12), 30), signal: ctl.signal }), (n) => n === 3 && ctl.abort());
  const other = drainGeneration(e.generate(greedyRequest(p(5, 9), otherTokens)));
  expect((await aborted).result.finishReason).toBe('abort');
  expect((await other).ids).toEqual(greedy(r, p(5, 9), otherTokens));
  expect((await drainGeneration(e.generate(greedyRequest(p(6, 13), 6)))).ids).toEqual(greedy(r, p(6, 13), 6));
}

/** Largest |a − b| over the last position's logits. */
const lastLogitsDiff = (a: ReferenceModel, b: ReferenceModel, ids: number[]) => {
  const [x, y] = [logitsFor(a, ids).at(-1)!, logitsFor(b, ids).at(-1)!];
  return x.reduce((m, v, i) => Math.max(m, Math.abs(v - y[i]!)), 0);
};

/**
 * Loads the fixture's `rec-r4` adapter (PEFT: the recurrent layers' projections alone), and the
 * GGUF adapter `gguf` (`all-r8-rslora`: attention's and the MLP's; or `rec-r4` again), into `e`, and checks each against
 * the merged reference (teacher-forced logits and their argmax); the recurrent-only one must move
 * the logits, so an engine ignoring it fails.
 */
interface LoraCase {
  /** The GGUF adapter loaded beside the PEFT `rec-r4`. */
  gguf?: 'all-r8-rslora' | 'rec-r4';
  /** The engine's fixture, when not the tiny one of its family. */
  fixture?: FixtureOptions;
  /** How far `rec-r4` must move the last logits (0.5: LFM2's and Qwen3.5's logit std ≈ 5). */
  minMove?: number;
}

async function expectLoraAsMerged(e: GpuEngine, base: OpenedModel, baseRef: ReferenceModel, p: number[], { gguf, fixture = { arch: base.config.arch, preset: 'tiny' }, minMove = 0.5 }: LoraCase = {}): Promise<void> {
  const { lora } = await ensureLoraFixture(fixture, { hf: [], gguf: ['Q8_0'] });
  const adapters = { rec: lora.peft['rec-r4']!, ...(gguf ? { [gguf]: lora.gguf[gguf]! } : {}) };
  for (const [name, at] of Object.entries(adapters)) await e.loadLora(name, at, { cache: false });
  try {
    for (const [name, at] of Object.entries(adapters)) {
      const merged = await mergedReference(base, at);
      if (name === 'rec') expect(lastLogitsDiff(merged, baseRef, p)).toBeGreaterThan(minMove);
      await expectEngineMatchesReference(e, merged, p, 3, LOGIT_TOLERANCE, name, false);
    }
  } finally {
    for (const name of Object.keys(adapters)) await e.unloadLora(name);
  }
}

const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 131 + i * 17 + 3) % engine.config.vocabSize);

/** A greedy run with each token's logprob (a hit must give the cold run's logits, not only its argmax). */
async function withLogprobs(e: GpuEngine, p: number[], n: number): Promise<{ ids: number[]; logprobs: number[]; result: GenerationResult }> {
  const gen = e.generate(greedyRequest(p, n, { logprobs: true }));
  const tokens: GeneratedToken[] = [];
  for (let r = await gen.next(); ; r = await gen.next()) {
    if (r.done) return { ids: tokens.map((t) => t.id), logprobs: tokens.map((t) => t.logprob!), result: r.value };
    tokens.push(r.value);
  }
}

/** Same tokens, logprobs within `tol`. */
function expectSameRun(got: { ids: number[]; logprobs: number[] }, want: { ids: number[]; logprobs: number[] }, tol: number): void {
  expect(got.ids).toEqual(want.ids);
  got.logprobs.forEach((lp, i) => expect(Math.abs(lp - want.logprobs[i]!), `logprob ${i}`).toBeLessThan(tol));
}

describe('the GPU engine on a hybrid model (LFM2)', () => {
  it('carries the conv state over a 40-token prompt in three prefill chunks, then decodes as the reference', async () => {
    expect(engine.config.shortConv?.layers).toEqual([0, 2]);
    await expectEngineMatchesReference(engine, ref, prompt(1, 40), 6, LOGIT_TOLERANCE);
  });

  it('runs concurrent requests (the same prompt twice, as n choices) each as the reference; the twin, a repeat and the next turn resume from state snapshots', async () => {
    const prompts = [prompt(2, 21), prompt(3, 7), prompt(2, 21)];
    const outs = await Promise.all(prompts.map((p) => withLogprobs(engine, p, 8)));
    prompts.forEach((p, i) => expect(outs[i]!.ids, `request ${i}`).toEqual(greedy(ref, p, 8)));
    // The twin waited for the first one's state at 20 tokens (the prompt's last page boundary) and computed one token.
    expect(outs.map((o) => o.result.cachedTokens)).toEqual([0, 0, 20]);
    expectSameRun(outs[2]!, outs[0]!, LOGIT_TOLERANCE);
    // Asked again: the same 20 tokens skipped, the cold run's tokens and logprobs.
    const again = await withLogprobs(engine, prompts[0]!, 8);
    expect(again.result.cachedTokens).toBe(20);
    expectSameRun(again, outs[0]!, LOGIT_TOLERANCE);
    // The next turn resumes where the last fed one's last full page ended: 21 + 7 tokens fed, 28 kept.
    const next = [...prompts[0]!, ...again.ids, 5, 6, 7];
    const turn = await drainGeneration(engine.generate(greedyRequest(next, 4)));
    expect(turn.result.cachedTokens).toBe(28);
    expect(turn.ids).toEqual(greedy(ref, next, 4));
  });

  it('speculates: a prediction wrong midway rolls the conv state back to the miss; its own output in one step; n-gram lookup; each as the reference', async () => {
    await expectSpeculation(engine, ref, prompt(10, 11));
  });

  it('a draft model (the same model) over the conv state: the output as the reference in fewer steps than tokens', async () => {
    const paths = await ensureFixture({ arch: 'lfm2', preset: 'tiny' });
    const target = await GpuEngine.load(opened, { gpu, precision: 'f32', contextLength: 96, pageSize: 4, prefillChunk: 16, maxBatch: 4, draft: { model: paths.gguf.Q8_0!, tokens: 4 } });
    try {
      const out = await run(target, prompt(11, 9), 12);
      expect(out.ids).toEqual(greedy(ref, prompt(11, 9), 12));
      expect(out.result.speculation!.accepted).toBeGreaterThan(0);
      // One step a draw, less those accepted, and one prefill chunk: the 9-token prompt's first 8 end at a page boundary (its state snapshot).
      expect(out.steps).toBe(12 - out.result.speculation!.accepted + 1);
      // The draft holds the KV a served model of its shape holds, without the snapshot pool of a
      // hybrid's prefix cache, which it has none of, and without the checkpoint rows of the served
      // model's verify rows beyond maxBatch (VERIFY_ROWS: it verifies nothing); the engine counts it in.
      const draft = target.draftModel!.memoryUse;
      const checkpointRow = layerCacheKinds(engine.config).reduce((n, k) => n + (k.kind === 'slot-state' && k.rollsBack ? k.floats * 4 : 0), 0);
      expect(checkpointRow).toBeGreaterThan(0);
      expect(draft.kvCache).toBe(engine.footprint.kvCacheBytes - VERIFY_ROWS * checkpointRow);
      expect(engine.memoryUse.kvCache).toBeGreaterThan(engine.footprint.kvCacheBytes);
      expect(target.memoryUse.kvCache).toBe(engine.memoryUse.kvCache + draft.kvCache);
    } finally {
      await target.dispose();
    }
  });

  it('an abort mid-verify leaves the page pool as before, and the slot starts from zero again', async () => {
    const p = prompt(12, 10);
    const want = greedy(ref, p, 12);
    const pages = engine.kvStats.pages.used;
    const ctl = new AbortController();
    let submits = 0;
    // Its second verify step is in flight when the abort lands.
    engine.trace = (e) => e === 'submit' && ++submits === 2 && ctl.abort();
    try {
      const prediction = [...want.slice(0, 2), (want[2]! + 1) % engine.config.vocabSize, ...want.slice(3)];
      const aborted = await drainGeneration(engine.generate({ ...greedyRequest(p, 12, {}, { speculation: { prediction } }), signal: ctl.signal }));
      expect(aborted.result.finishReason).toBe('abort');
    } finally {
      engine.trace = null;
    }
    expect(engine.kvStats.pages.used).toBe(pages);
    expect(engine.kvStats.running).toBe(0);
    expect((await drainGeneration(engine.generate(greedyRequest(p, 12)))).ids).toEqual(want);
  });

  it('starts a slot from zero after an abort mid-sequence', () => expectAbortMidSequence(engine, ref, prompt, 10));

  it('applies LoRA to the conv layers’ in_proj and out_proj as the merged reference', () => expectLoraAsMerged(engine, opened, ref, prompt(11, 12)));

  it('recomputes a preempted sequence from zero state or a snapshot, and finishes every request as the reference under a pool of 2 snapshots', async () => {
    // 48 tokens of KV for 3 sequences of up to 34 tokens each.
    const small = await GpuEngine.load(opened, { gpu, precision: 'f32', contextLength: 48, pageSize: 4, prefillChunk: 16, kvCacheTokens: 48, maxBatch: 3, stateSnapshots: 2 });
    try {
      const prompts = [prompt(7, 14), prompt(8, 10), prompt(9, 18)];
      const outs = await Promise.all(prompts.map((p) => drainGeneration(small.generate(greedyRequest(p, 16)))));
      prompts.forEach((p, i) => expect(outs[i]!.ids, `request ${i}`).toEqual(greedy(ref, p, 16)));
      expect(small.kvStats.preemptions).toBeGreaterThan(0);
      // The pool's two snapshots (both conv layers' states each) are counted with the KV cache.
      expect(small.memoryUse.kvCache - small.footprint.kvCacheBytes).toBe(2 * snapshotBytes(layerCacheKinds(engine.config)));
    } finally {
      await small.dispose();
    }
  });
});

describe('the GPU engine on Qwen3.5 (gated DeltaNet on layers 0 and 2, gated attention on layer 1)', () => {
  let q35: GpuEngine;
  let q35Ref: ReferenceModel;
  let q35Opened: OpenedModel;
  beforeAll(async () => {
    // Q8_0: llama.cpp's tiled value heads and ssm_a.
    q35Opened = await openModel((await ensureFixture({ arch: 'qwen35', preset: 'tiny' }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!);
    q35Ref = await ReferenceModel.load(q35Opened);
    q35 = await GpuEngine.load(q35Opened, { gpu, precision: 'f32', contextLength: 96, pageSize: 4, prefillChunk: 16, maxBatch: 4 });
  }, 300_000);
  afterAll(() => q35?.dispose());
  const q35Prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 131 + i * 17 + 3) % q35.config.vocabSize);

  it('carries the conv and delta-rule states over a 40-token prompt in three prefill chunks; concurrent requests each as the reference', async () => {
    expect(q35.config.deltaNet?.layers).toEqual([0, 2]);
    const p = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 131 + i * 17 + 3) % q35.config.vocabSize);
    await expectEngineMatchesReference(q35, q35Ref, p(1, 40), 6, LOGIT_TOLERANCE);
    const prompts = [p(2, 21), p(3, 7), p(2, 21)];
    const outs = await Promise.all(prompts.map((x) => withLogprobs(q35, x, 8)));
    prompts.forEach((x, i) => expect(outs[i]!.ids, `request ${i}`).toEqual(greedy(q35Ref, x, 8)));
    // The twin resumed from the first one's conv and delta-rule states at 20 tokens.
    expect(outs.map((o) => o.result.cachedTokens)).toEqual([0, 0, 20]);
    expectSameRun(outs[2]!, outs[0]!, LOGIT_TOLERANCE);
  });

  it('speculates after a 16-token prompt (a row the chunked form would take, its verify run walked by the recurrence): a prediction wrong midway rolls the conv and delta-rule states back to the miss; its own output in one step; n-gram lookup; each as the reference', async () => {
    await expectSpeculation(q35, q35Ref, Array.from({ length: 16 }, (_, i) => (10 * 131 + i * 17 + 3) % q35.config.vocabSize));
  });

  it('starts a slot from zero after an abort mid-sequence', () => expectAbortMidSequence(q35, q35Ref, q35Prompt, 6));

  it('recomputes a preempted sequence’s conv and delta-rule states, and finishes every request as the reference', async () => {
    // 48 tokens of KV (the one attention layer's) for 3 sequences of up to 26 tokens each.
    const small = await GpuEngine.load(q35Opened, { gpu, precision: 'f32', contextLength: 48, pageSize: 4, prefillChunk: 16, kvCacheTokens: 48, maxBatch: 3 });
    try {
      const prompts = [q35Prompt(7, 14), q35Prompt(8, 10), q35Prompt(9, 18)];
      const outs = await Promise.all(prompts.map((p) => drainGeneration(small.generate(greedyRequest(p, 8)))));
      prompts.forEach((p, i) => expect(outs[i]!.ids, `request ${i}`).toEqual(greedy(q35Ref, p, 8)));
      expect(small.kvStats.preemptions).toBeGreaterThan(0);
    } finally {
      await small.dispose();
    }
  });

  it('applies LoRA to the DeltaNet’s five projections (a PEFT adapter’s value heads moved to the file’s tiled order), and to gated attention’s q with its gate rows', () =>
    expectLoraAsMerged(q35, q35Opened, q35Ref, q35Prompt(11, 12), { gguf: 'all-r8-rslora' }));
});

/** GPU bytes of the MTP head's own tensors (blk.N.*: its layer, fc, norms) as the GPU holds them, from the file. */
function headOwnBytes(o: OpenedModel): number {
  const own = [...o.tensors].filter(([name]) => name.startsWith(`blk.${o.config.numLayers}.`));
  return own.reduce((n, [, { info: { dtype, shape } }]) => n + (shape.length === 1 ? 4 * shape[0]! : shape[0]! * gpuBytesPerRow(dtype, shape[1]!)), 0);
}

// Beside the Qwen3.5 engine above: the head's pipelines are mostly that engine's (Q8_0 at f32, one
// device per file), compiled once.
describe("Qwen3.5's MTP head on the GPU (engine/mtp-head.ts) against the CPU reference (reference/mtp.ts)", () => {
  it('Q8_0: the same logits over 7 rows, 4 fed at once then one by one, and after a rollback; 3 chained guesses as the reference chains them', async () => {
    const mtpOpened = await openModel((await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!);
    const V = mtpOpened.config.vocabSize;
    const ids = Array.from({ length: 9 }, (_, i) => (i * 7919 + 13) % V);
    // The trunk's hidden states teacher-forced on the CPU; the head's rows (h_t, token t+1).
    const trunk = await ReferenceModel.load(mtpOpened);
    const hidden = ids.map((id, t) => (trunk.forward(id, t), trunk.hidden));
    const headRef = await MtpReference.load(mtpOpened);
    const want = ids.slice(1).map((next, t) => headRef.forward(hidden[t]!, next, t));
    const trunkWeights = await uploadWeights(gpu.device, mtpOpened);
    const head = await GpuMtpHead.create(gpu, mtpOpened, trunkWeights, { precision: 'f32', limits: { maxTokens: 8, maxSeqs: 1, numPages: 4, pageSize: 16, maxPagesPerSeq: 4, contextLength: 64, maxGuesses: 3 } });
    try {
      // The head's own weights are its file tensors (blk.N.*: the layer, fc, norms) as the GPU
      // holds them: no copy of the embedding or LM head, which it reads from the trunk's weights.
      expect(head.weightBytes).toBe(headOwnBytes(mtpOpened));
      const rows = (from: number, to: number) => Float32Array.from(hidden.slice(from, to).flatMap((h) => [...h]));
      // One guess a run (read back alone: a token id), the logits looked at through the test hook.
      const run = async (from: number, to: number, next: number[]) => {
        const [guess] = await head.run(0, rows(from, to), next);
        const logits = await head.lastLogits();
        expect(guess).toBe(argmax(logits));
        return logits;
      };
      const got = [await run(0, 4, ids.slice(1, 5))];
      for (let t = 4; t < 7; t++) got.push(await run(t, t + 1, [ids[t + 1]!]));
      // Rolled back to 5 rows after a wrong row at position 5, it gives row 5's logits again.
      head.truncate(0, 5);
      await head.run(0, rows(0, 1), [(ids[6]! + 1) % V], 0);
      head.truncate(0, 5);
      expect(head.length(0)).toBe(5);
      got.push(await run(5, 6, [ids[6]!]));
      // Within 1e-3 of logits of spread about 5: the reference reads the same Q8_0 blocks, summed in another order.
      expect(maxAbsDiffAll(got, [want[3]!, ...want.slice(4, 7), want[5]!])).toBeLessThan(1e-3);

      // Row 6 fed with a chain of 3: guess j + 1 from the head's own hidden state of guess j's row.
      // The third guess's logits within 1e-3 of the reference's chain (feeding the trunk's row
      // again instead moves them by over 1e-2: reference/mtp.test.ts); the guesses equal while the
      // reference's top-2 margin exceeds twice that (the fixture's margins are ~0.1).
      const chain = headRef.chain(hidden[6]!, ids[7]!, 6, 3);
      const guesses = await head.run(0, rows(6, 7), [ids[7]!], 3);
      expect(maxAbsDiffAll([await head.lastLogits()], [chain.logits[2]!])).toBeLessThan(1e-3);
      const close = chain.logits.findIndex((l) => top2Margin(l) < 2e-3);
      const sure = close < 0 ? 3 : close;
      expect(guesses.length).toBe(3);
      expect(guesses.slice(0, sure)).toEqual(chain.ids.slice(0, sure));
      // The chained rows left the head's KV: row 7 is fed at position 7, over them.
      expect(head.length(0)).toBe(7);
      got.push(await run(7, 8, [ids[8]!]));
      expect(maxAbsDiffAll([got.at(-1)!], [want[7]!])).toBeLessThan(1e-3);
    } finally {
      head.destroy();
      trunkWeights.destroy();
    }
  });

  it("Q8_0: a chain stops short where the head's KV has no room: fewer guesses, the reference chain's first ones, the KV back to the fed rows", async () => {
    const mtpOpened = await openModel((await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!);
    const V = mtpOpened.config.vocabSize;
    // One page of 16 rows for the sequence (the pool's only page): row 13 fed leaves room for 2
    // chained rows (3 guesses), row 14 for 1 (2 guesses), row 15 for none (1 guess).
    const ids = Array.from({ length: 17 }, (_, i) => (i * 7919 + 29) % V);
    const trunk = await ReferenceModel.load(mtpOpened);
    const hidden = ids.slice(0, 16).map((id, t) => (trunk.forward(id, t), trunk.hidden));
    const rows = (from: number, to: number) => Float32Array.from(hidden.slice(from, to).flatMap((h) => [...h]));
    const headRef = await MtpReference.load(mtpOpened);
    ids.slice(1, 14).forEach((next, t) => headRef.forward(hidden[t]!, next, t));
    const trunkWeights = await uploadWeights(gpu.device, mtpOpened);
    const head = await GpuMtpHead.create(gpu, mtpOpened, trunkWeights, { precision: 'f32', limits: { maxTokens: 8, maxSeqs: 1, numPages: 1, pageSize: 16, maxPagesPerSeq: 1, contextLength: 16, maxGuesses: 3 } });
    try {
      await head.run(0, rows(0, 8), ids.slice(1, 9), 0);
      await head.run(0, rows(8, 13), ids.slice(9, 14), 0);
      for (const [t, k] of [[13, 3], [14, 2], [15, 1]] as const) {
        const chain = headRef.chain(hidden[t]!, ids[t + 1]!, t, 3);
        const guesses = await head.run(0, rows(t, t + 1), [ids[t + 1]!], 3);
        expect(guesses.length, `row ${t}`).toBe(k);
        // The last pass is guess k's: its logits are the reference chain's k-th (within 1e-3, as above).
        expect(maxAbsDiffAll([await head.lastLogits()], [chain.logits[k - 1]!]), `row ${t}`).toBeLessThan(1e-3);
        const close = chain.logits.slice(0, k).findIndex((l) => top2Margin(l) < 2e-3);
        expect(guesses.slice(0, close < 0 ? k : close)).toEqual(chain.ids.slice(0, close < 0 ? k : close));
        // The chained rows left; the fed row stays, and the next feed writes position t + 1.
        expect(head.length(0), `row ${t}`).toBe(t + 1);
      }
      // Full: a further row does not fit, and the head still holds its 16.
      await expect(head.run(0, rows(0, 1), [ids[1]!], 1)).rejects.toThrow(/context/);
      expect(head.length(0)).toBe(16);
    } finally {
      head.destroy();
      trunkWeights.destroy();
    }
  });

  it('loads the head only when asked for (EngineOptions.mtp): without it memoryUse lacks the head\'s weights and KV pages, and a request asking for the head is told how to load it', async () => {
    const mtpOpened = await openModel((await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!);
    const opts = { gpu, precision: 'f32', contextLength: 64, pageSize: 4, prefillChunk: 16, maxBatch: 2 } as const;
    const [bare, withHead] = [await GpuEngine.load(mtpOpened, opts), await GpuEngine.load(mtpOpened, { ...opts, mtp: true })];
    try {
      expect(withHead.memoryUse.weights - bare.memoryUse.weights).toBe(headOwnBytes(mtpOpened));
      // Its KV pages: K and V of its one attention layer (f32) for as many pages as the model's pool.
      const c = mtpOpened.config;
      expect(withHead.memoryUse.kvCache - bare.memoryUse.kvCache).toBe(bare.kvStats.pages.total * opts.pageSize * 2 * c.numKvHeads * c.headDim * 4);
      // Its run state, and the trunk's every-row hidden states it reads the prompt from (f32 [maxTokens, hidden]).
      const head = (withHead as unknown as { mtp: MtpDrafter }).mtp.head;
      expect(withHead.memoryUse.other - bare.memoryUse.other).toBe(head.cacheBytes.state + withHead.limits.maxTokens * c.hiddenSize * 4);
      await expect(drainGeneration(bare.generate(greedyRequest(prompt(1, 4), 2, {}, { speculation: { mtp: { k: 1 } } })))).rejects.toMatchObject({ code: 'invalid_field', status: 400, param: 'speculative', message: expect.stringMatching(/mtp: true/) });
    } finally {
      await bare.dispose();
      await withHead.dispose();
    }
  });

  it('as a proposer (speculative {type: "mtp", k: 3}): its KV holds the prompt\'s rows, prefilled in chunks or after a cached prefix, and its first guess is the reference head\'s over them; the same greedy output, 3 guesses a step where they fit; k out of 1..8 and a model without a head refuse it', async () => {
    const mtpOpened = await openModel((await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!);
    // maxBatch 4 (the verify rows beyond it, engine.ts VERIFY_ROWS, would take the 3 proposals at any maxBatch).
    const e = await GpuEngine.load(mtpOpened, { gpu, precision: 'f32', contextLength: 64, pageSize: 4, prefillChunk: 16, maxBatch: 4, mtp: true });
    // Each guess, with the head's KV length after it: the rows it attended over.
    const drafter = (e as unknown as { mtp: MtpDrafter }).mtp;
    const guesses: { length: number; id: number }[] = [];
    const guess = drafter.guess.bind(drafter);
    drafter.guess = async (slot, ...rest) => {
      const id = await guess(slot, ...rest);
      guesses.push({ length: drafter.head.length(slot), id: [id].flat()[0]! });
      return id;
    };
    const trunk = await ReferenceModel.load(mtpOpened);
    const headRef = await MtpReference.load(mtpOpened);
    /**
     * The reference head's logits after rows `from`.. of `ids` (the prompt and the first token):
     * the trunk's hidden state at t with token t+1, the first at the head's position 0.
     */
    const refLogits = (ids: readonly number[], from: number) => {
      trunk.reset();
      headRef.reset();
      const hidden = ids.slice(0, -1).map((id, t) => (trunk.forward(id, t), trunk.hidden));
      let logits: Float32Array = new Float32Array(0);
      for (let t = from; t < ids.length - 1; t++) logits = headRef.forward(hidden[t]!, ids[t + 1]!, t - from);
      return logits;
    };
    /**
     * The GPU head's first guess is the reference's argmax: its trunk rows and the head's sums
     * differ from the CPU's by about 1e-3 (the engine's logit tolerance), so the reference's top two
     * must be further apart than 0.01 for the guess to be sure (this prompt's are 1.0 and 1.7).
     */
    const expectGuess = (got: number, logits: Float32Array) => {
      expect(top2Margin(logits)).toBeGreaterThan(0.01);
      expect(got).toBe(argmax(logits));
    };
    try {
      // 20 tokens: a chunk of 16 that only fills the KV, then 4 that sample (prefillChunk 16).
      const p = Array.from({ length: 20 }, (_, i) => (i * 31 + 5) % e.config.vocabSize);
      const before = e.kvStats.speculative;
      const gen = e.generate(greedyRequest(p, 8, {}, { speculation: { mtp: { k: 3 } } }));
      const tokens: GeneratedToken[] = [];
      let r = await gen.next();
      for (; !r.done; r = await gen.next()) tokens.push(r.value);
      // The first guess after every prompt row and the first token's: rows 0..19 at positions 0..19.
      expect(guesses[0]!.length).toBe(20);
      expectGuess(guesses[0]!.id, refLogits([...p, tokens[0]!.id], 0));
      // The same output without speculation (its prompt now served from the prefix cache).
      const plain = await drainGeneration(e.generate(greedyRequest(p, 8)));
      expect(tokens.map((t) => t.id)).toEqual(plain.ids);
      // The head's rows read the hidden states back; the output carries none it did not ask for.
      expect(tokens.some((t) => t.hidden)).toBe(false);
      // The random head's guesses are not taken (0 of 96 in reference/mtp.test.ts), so each step
      // outputs one token: from the second on, 3 guesses while max_tokens leaves room for them, then
      // 2 and 1 (room 8 − generated − 1), none at the last: 3 + 3 + 3 + 3 + 2 + 1.
      const { proposed, accepted } = r.value.speculation!;
      expect([proposed, accepted]).toEqual([15, 0]);
      const after = e.kvStats.speculative;
      expect([after.proposed - before.proposed, after.accepted - before.accepted]).toEqual([proposed, accepted]);
      await expect(drainGeneration(e.generate(greedyRequest(p, 2, {}, { speculation: { mtp: { k: 9 } } })))).rejects.toMatchObject({ code: 'invalid_field', param: 'speculative' });
      // A cached prefix: the head's rows start after it (their hidden states were never computed).
      guesses.length = 0;
      const cached = await drainGeneration(e.generate(greedyRequest(p, 3, {}, { speculation: { mtp: { k: 1 } } })));
      const c = cached.result.cachedTokens;
      expect(c).toBeGreaterThan(0);
      expect(guesses[0]!.length).toBe(20 - c);
      expectGuess(guesses[0]!.id, refLogits([...p, cached.ids[0]!], c));
      expect(cached.ids).toEqual(plain.ids.slice(0, 3));
    } finally {
      await e.dispose();
    }
    await expect(drainGeneration(engine.generate(greedyRequest(prompt(1, 4), 2, {}, { speculation: { mtp: { k: 1 } } })))).rejects.toMatchObject({ code: 'invalid_field', param: 'speculative' });
    // The engine option on such a model, or with k out of range, fails the load, before anything goes to the GPU.
    await expect(GpuEngine.load(opened, { gpu, speculative: { type: 'mtp' } })).rejects.toMatchObject({ name: 'ModelError', code: 'invalid_field', field: 'speculative' });
    await expect(GpuEngine.load(mtpOpened, { gpu, speculative: { type: 'mtp', k: 0 } })).rejects.toMatchObject({ name: 'ModelError', code: 'invalid_field', field: 'speculative' });
  });
});

/** The largest logit less the second: below the GPU's error, the two may swap. */
function top2Margin(l: Float32Array): number {
  const top = argmax(l);
  return l[top]! - l.reduce((m, v, i) => (i === top ? m : Math.max(m, v)), -Infinity);
}

describe('the GPU engine on Granite 4.0-H (Mamba-2 on layers 0 and 2, NoPE attention on layer 1)', () => {
  let gh: GpuEngine;
  let ghRef: ReferenceModel;
  let ghOpened: OpenedModel;
  const ghFixture: FixtureOptions = { arch: 'granite', preset: 'tiny', hybrid: { mambaGroups: 2 } };
  beforeAll(async () => {
    // Q8_0: llama.cpp's granitehybrid file (ssm_a, ssm_norm [groups, inner / groups]), two B/C groups (heads 0-3 read group 0, 4-7 group 1).
    ghOpened = await openModel((await ensureFixture(ghFixture, { hf: [], gguf: ['Q8_0'] })).gguf.Q8_0!);
    ghRef = await ReferenceModel.load(ghOpened);
    gh = await GpuEngine.load(ghOpened, { gpu, precision: 'f32', contextLength: 96, pageSize: 4, prefillChunk: 16, maxBatch: 4 });
  }, 300_000);
  afterAll(() => gh?.dispose());

  it('carries the conv and scan states over a 40-token prompt in three prefill chunks; concurrent requests each as the reference', async () => {
    expect(gh.config.mamba2?.layers).toEqual([0, 2]);
    const p = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 131 + i * 17 + 3) % gh.config.vocabSize);
    await expectEngineMatchesReference(gh, ghRef, p(1, 40), 6, LOGIT_TOLERANCE);
    const prompts = [p(2, 21), p(3, 7), p(2, 21)];
    const outs = await Promise.all(prompts.map((x) => withLogprobs(gh, x, 8)));
    prompts.forEach((x, i) => expect(outs[i]!.ids, `request ${i}`).toEqual(greedy(ghRef, x, 8)));
    // The twin resumed from the first one's conv and scan states at 20 tokens.
    expect(outs.map((o) => o.result.cachedTokens)).toEqual([0, 0, 20]);
    expectSameRun(outs[2]!, outs[0]!, LOGIT_TOLERANCE);
  });

  it('speculates: a prediction wrong midway rolls the conv and scan states back to the miss; its own output in one step; n-gram lookup; each as the reference', async () => {
    await expectSpeculation(gh, ghRef, Array.from({ length: 11 }, (_, i) => (10 * 131 + i * 17 + 3) % gh.config.vocabSize));
  });

  // PEFT (mamba.in_proj / mamba.out_proj) and GGUF (granitehybrid: ssm_in / ssm_out, not the DeltaNet's
  // ssm_out); in_proj's update lands in its z, xBC and dt regions. Granite divides its logits
  // (std ≈ 0.75 here): the adapter moves them by 0.45, against a tolerance of LOGIT_TOLERANCE.
  it('applies LoRA to the Mamba-2 layers’ in_proj and out_proj as the merged reference', () =>
    expectLoraAsMerged(gh, ghOpened, ghRef, Array.from({ length: 12 }, (_, i) => (11 * 131 + i * 17 + 3) % gh.config.vocabSize), { gguf: 'rec-r4', fixture: ghFixture, minMove: 0.2 }));
});

/** One greedy generation, and the target's steps it took. */
async function run(e: GpuEngine, p: number[], maxTokens: number, speculation?: GenerateRequest['speculation']) {
  const before = e.kvStats.steps;
  const gen = e.generate(greedyRequest(p, maxTokens, { logprobs: true }, speculation ? { speculation } : {}));
  const tokens: GeneratedToken[] = [];
  for (let r = await gen.next(); ; r = await gen.next()) {
    if (r.done) return { ids: tokens.map((t) => t.id), logprobs: tokens.map((t) => t.logprob!), result: r.value, steps: e.kvStats.steps - before };
    tokens.push(r.value);
  }
}

/**
 * The reference's 8 greedy tokens after `p` (at most 16 tokens: prefilled in one step) with each
 * proposer, their logprobs those of decoding without:
 * a prediction right for two tokens, then wrong (the prompt's step verifies [w0, w1, x2], takes two
 * and draws w2: the states must forget row 3's x2 and hold what row 2 left; without the rollback the
 * logprobs after it differ, and on LFM2 and Qwen3.5 the tokens too); a prediction of the output
 * itself (the prompt's step verifies all 7 on the verify rows beyond maxBatch, VERIFY_ROWS: 1 step);
 * n-gram lookup (3 proposals a step, verified by decode steps).
 */
async function expectSpeculation(e: GpuEngine, r: ReferenceModel, p: number[]): Promise<void> {
  const off = await run(e, p, 8);
  expect(off.ids).toEqual(greedy(r, p, 8));
  const want = off.ids;
  const wrong = await run(e, p, 8, { prediction: [...want.slice(0, 2), (want[2]! + 1) % e.config.vocabSize, ...want.slice(3)] });
  expectSameRun(wrong, off, 1e-3);
  expect(wrong.result.speculation!.accepted).toBeGreaterThanOrEqual(2);
  expect(wrong.result.speculation!.proposed).toBeGreaterThan(wrong.result.speculation!.accepted);
  const own = await run(e, p, 8, { prediction: want });
  expectSameRun(own, off, 1e-3);
  expect(own.steps).toBe(1);
  expectSameRun(await run(e, p, 8, { ngram: { n: 1, k: 3 } }), off, 1e-3);
}
