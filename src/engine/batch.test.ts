/**
 * The GPU engine serving many sequences at once: concurrent requests share steps, and each one's
 * output is what it is alone (sampling depends on the seed and the tokens so far, penalties and
 * masks live per sequence), greedy batches equal the CPU reference, a pool too small for the batch
 * preempts and still finishes every request exactly, and aborted sequences give their pages back.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maskWords } from '../kernels/mask-ref';
import { openModel, type OpenedModel } from '../model/open';
import { greedy, ReferenceModel } from '../reference/forward';
import type { Constraint } from '../structured/grammar';
import { ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { maxRelDiff } from '../testing/kernel-helpers';
import { drainGeneration, greedyRequest } from '../testing/sampling';
import type { GPUContext } from '../gpu/device';
import { nodeKvStore } from '../loader/kv-store-node';
import type { KvStore } from '../loader/kv-store';
import { GpuEngine, type EngineOptions } from './engine';
import { pageName } from './kv-page-file';
import type { GenerateRequest } from './types';

let gpu: GPUContext;
let opened: OpenedModel;
let engine: GpuEngine;

beforeAll(async () => {
  gpu = await testGPU();
  const paths = await ensureFixture({ arch: 'llama', preset: 'tiny' });
  opened = await openModel(paths.gguf.Q8_0!);
  engine = await GpuEngine.load(opened, { gpu, precision: 'f32', contextLength: 128, pageSize: 4, prefillChunk: 16 });
});
afterAll(() => engine?.dispose());

const V = () => engine.config.vocabSize;
const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => (seed * 131 + i * 17 + 3) % V());

/** Allows the tokens ≡ k (mod 3) at step k: a grammar whose mask changes every step. */
function modThree(vocab: number): Constraint {
  let step = 0;
  return {
    words: maskWords(vocab),
    async mask(out) {
      out.fill(0);
      for (let id = step % 3; id < vocab; id += 3) out[id >>> 5]! |= 1 << (id & 31);
    },
    accept: (id) => id % 3 === step++ % 3,
    isTerminated: () => false,
    dispose() {},
  };
}

/** Sixteen requests, each with its own settings: every sampling path and per-sequence processor. */
function sixteen(): Array<() => GenerateRequest> {
  const vocab = V();
  return [
    () => greedyRequest(prompt(1, 5), 12),
    () => greedyRequest(prompt(2, 23), 9),
    () => greedyRequest(prompt(3, 9), 14, { temperature: 0.9, seed: 11 }),
    () => greedyRequest(prompt(4, 31), 10, { temperature: 1.2, topK: 20, seed: 12 }),
    () => greedyRequest(prompt(5, 7), 16, { temperature: 0.8, topP: 0.7, seed: 13 }),
    () => greedyRequest(prompt(6, 13), 11, { temperature: 1, minP: 0.05, seed: 14 }),
    () => greedyRequest(prompt(7, 17), 12, { frequencyPenalty: 0.8, presencePenalty: 0.4 }),
    () => greedyRequest(prompt(8, 4), 13, { repetitionPenalty: 1.5, temperature: 0.7, seed: 15 }),
    () => greedyRequest(prompt(9, 11), 10, { logitBias: { 7: 5, 9: -100 } }),
    () => greedyRequest(prompt(10, 19), 8, { logprobs: true, topLogprobs: 3 }),
    () => greedyRequest(prompt(11, 6), 12, {}, { minTokens: 6, ignoreEos: false, stopTokenIds: [prompt(11, 6)[2]!] }),
    () => greedyRequest(prompt(12, 15), 9, {}, { stopTokenIds: [5, 6, 7, 8, 9, 10, 11, 12] }),
    () => greedyRequest(prompt(13, 8), 10, { dry: { multiplier: 0.8, base: 1.75, allowedLength: 2, sequenceBreakers: ['\n'] } }),
    () => greedyRequest(prompt(14, 10), 9, { temperature: 1, seed: 16 }, { constraint: modThree(vocab) }),
    () => greedyRequest(prompt(15, 27), 11, { temperature: 0.6, seed: 17, frequencyPenalty: 0.5, logprobs: true, topLogprobs: 2 }),
    () => greedyRequest(prompt(16, 3), 15, { mirostat: { mode: 2, tau: 5, eta: 0.1 }, temperature: 1, seed: 18 }),
  ];
}

describe('the GPU engine with many sequences in flight', () => {
  it('gives 16 concurrent requests with different settings each its output alone', async () => {
    const makers = sixteen();
    const alone: Array<Awaited<ReturnType<typeof drainGeneration>>> = [];
    for (const make of makers) alone.push(await drainGeneration(engine.generate(make())));
    const stepsBefore = engine.kvStats.steps;
    const together = await Promise.all(makers.map((make) => drainGeneration(engine.generate(make()))));
    const steps = engine.kvStats.steps - stepsBefore;
    together.forEach((t, i) => {
      expect(t.ids, `request ${i}`).toEqual(alone[i]!.ids);
      expect(t.result.finishReason, `request ${i}`).toBe(alone[i]!.result.finishReason);
    });
    // Batched: far fewer steps than the tokens produced.
    const tokens = together.reduce((n, t) => n + t.ids.length, 0);
    expect(steps).toBeLessThan(tokens / 4);
    expect(engine.kvStats.pages.used).toBe(0);
  });

  it('batches greedy sequences that equal the CPU reference token for token', async () => {
    const ref = await ReferenceModel.load(opened);
    const prompts = [prompt(21, 6), prompt(22, 19), prompt(23, 2), prompt(24, 33)];
    const outs = await Promise.all(prompts.map((p) => drainGeneration(engine.generate(greedyRequest(p, 12, {}, { cachePrompt: false })))));
    prompts.forEach((p, i) => expect(outs[i]!.ids).toEqual(greedy(ref, p, 12)));
  });

  it('returns the logprobs a request gets alone, in a batch', async () => {
    const req = () => greedyRequest(prompt(31, 9), 6, { logprobs: true, topLogprobs: 4 });
    const alone: number[] = [];
    for await (const t of engine.generate(req())) alone.push(t.logprob!);
    const [mine] = await Promise.all([
      (async () => {
        const lp: number[] = [];
        for await (const t of engine.generate(req())) lp.push(t.logprob!);
        return lp;
      })(),
      drainGeneration(engine.generate(greedyRequest(prompt(32, 14), 8, { temperature: 1, seed: 3 }))),
    ]);
    mine.forEach((lp, i) => expect(lp).toBeCloseTo(alone[i]!, 4));
  });

  it('preempts when the page pool runs dry and finishes every request exactly', async () => {
    // 48 tokens of KV for 6 sequences of up to 36 tokens each.
    const small = await GpuEngine.load(opened, { gpu, precision: 'f32', contextLength: 48, pageSize: 4, prefillChunk: 16, kvCacheTokens: 48 });
    try {
      const reqs = Array.from({ length: 6 }, (_, i) => () => greedyRequest(prompt(40 + i, 6 + 2 * i), 20, i % 2 ? { temperature: 1, seed: i, frequencyPenalty: 0.5 } : {}));
      const alone: number[][] = [];
      for (const r of reqs) alone.push((await drainGeneration(small.generate(r()))).ids);
      const together = await Promise.all(reqs.map((r) => drainGeneration(small.generate(r()))));
      together.forEach((t, i) => expect(t.ids, `request ${i}`).toEqual(alone[i]));
      expect(small.kvStats.preemptions).toBeGreaterThan(0);
      expect(small.kvStats.pages.used).toBe(0);
    } finally {
      await small.dispose();
    }
  });

  it('gives back every page of 40 sequences aborted at random points, and the others finish exactly', async () => {
    const keep = [() => greedyRequest(prompt(51, 12), 40), () => greedyRequest(prompt(52, 20), 40, { temperature: 1, seed: 9 })];
    const want = [];
    for (const k of keep) want.push((await drainGeneration(engine.generate(k()))).ids);
    let seed = 7;
    const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    // 40: about 6 at each of the 7 abort points (36 s for 100 on SwiftShader, npm test's budget).
    const aborts = Array.from({ length: 40 }, (_, i) => {
      const ctl = new AbortController();
      // Aborted before its first token (in the queue or mid-prefill), or after 1 to 6 tokens.
      const at = Math.floor(rand() * 7);
      const gen = engine.generate({ ...greedyRequest(prompt(60 + i, 3 + Math.floor(rand() * 20)), 30), signal: ctl.signal });
      if (at === 0) setTimeout(() => ctl.abort(), Math.floor(rand() * 50));
      return drainGeneration(gen, (n) => n === at && ctl.abort());
    });
    const [kept0, kept1, ...ended] = await Promise.all([...keep.map((k) => drainGeneration(engine.generate(k()))), ...aborts]);
    expect(kept0!.ids).toEqual(want[0]);
    expect(kept1!.ids).toEqual(want[1]);
    for (const e of ended) expect(e.result.finishReason).toBe('abort');
    const { pages } = engine.kvStats;
    expect(pages.used).toBe(0);
    expect(pages.free + pages.cached).toBe(pages.total);
  });

  it('serves a repeated prompt from the prefix cache and reports the cached tokens', async () => {
    // Counting down from the top of the vocabulary: no other prompt here starts this way.
    const p = Array.from({ length: 30 }, (_, i) => V() - 1 - 5 * i);
    const first = await drainGeneration(engine.generate(greedyRequest(p, 4)));
    const second = await drainGeneration(engine.generate(greedyRequest([...p, 1, 2], 4)));
    expect(first.result.cachedTokens).toBe(0);
    expect(second.result.cachedTokens).toBe(28); // whole pages of 4 of the 30 shared tokens
  });
  it('submits each decode step before the step before it is read back (the loop never waits on the CPU)', async () => {
    const events: Array<'submit' | 'readback'> = [];
    engine.trace = (e) => events.push(e);
    try {
      const reqs = [greedyRequest(prompt(71, 6), 10), greedyRequest(prompt(72, 9), 10, { temperature: 1, seed: 5, frequencyPenalty: 0.5 })];
      const outs = await Promise.all(reqs.map((r) => drainGeneration(engine.generate(r))));
      for (const o of outs) expect(o.ids.length).toBe(10);
    } finally {
      engine.trace = null;
    }
    // The j-th readback (every step here samples) comes after the (j+1)-th submit, but for the
    // last steps, which have no step after them.
    const readbacks = events.flatMap((e, i) => (e === 'readback' ? [i] : []));
    expect(readbacks.length).toBeGreaterThanOrEqual(10);
    readbacks.slice(0, -1).forEach((at, j) => {
      const submitted = events.slice(0, at).filter((e) => e === 'submit').length;
      expect(submitted, `readback ${j + 1}`).toBeGreaterThanOrEqual(j + 2);
    });
  });
  it('returns each token\'s final hidden state (GPU- and CPU-sampled rows), as the reference computes it', async () => {
    const ref = await ReferenceModel.load(opened);
    const reqs = [
      greedyRequest(prompt(81, 7), 5, {}, { returnHiddenStates: true }),
      greedyRequest(prompt(82, 12), 5, { dry: { multiplier: 0.8, base: 1.75, allowedLength: 2, sequenceBreakers: [] } }, { returnHiddenStates: true }),
      greedyRequest(prompt(83, 9), 5),
    ];
    const outs = await Promise.all(
      reqs.map(async (r) => {
        const tokens = [];
        for await (const t of engine.generate(r)) tokens.push(t);
        return tokens;
      }),
    );
    expect(outs[2]!.every((t) => t.hidden === undefined)).toBe(true);
    for (const [i, tokens] of outs.slice(0, 2).entries()) {
      const ids = [...reqs[i]!.promptIds, ...tokens.map((t) => t.id)];
      ref.reset();
      for (let pos = 0; pos < ids.length - 1; pos++) {
        ref.forward(ids[pos]!, pos);
        const k = pos - (reqs[i]!.promptIds.length - 1);
        if (k < 0) continue;
        const got = tokens[k]!.hidden!;
        expect(got.length).toBe(engine.config.hiddenSize);
        expect(maxRelDiff(got, ref.hidden), `request ${i} token ${k}`).toBeLessThan(1e-3);
      }
    }
  });
});

/**
 * The prefix cache across restarts (issue #33 part 2; ./kv-persist.ts): here because these
 * engines load with this file's options, so they reuse its compiled pipelines (a cold SwiftShader
 * compiles them for about 50 s). An engine writes its full pages to a directory; a new engine on
 * it uploads them instead of computing them (cached tokens) and answers as the cold run did; a
 * corrupt page file is removed with a warning and computed again; a store that refuses writes
 * turns persistence off, never a request.
 */
describe('KV persistence across restarts', () => {
  let dir: string;
  beforeAll(async () => void (dir = await mkdtemp(join(tmpdir(), 'kv-persist-'))));
  afterAll(() => rm(dir, { recursive: true, force: true }));
  const PAGE = 4;

  /** `prompt` for 8 greedy tokens on a new engine persisting to `store`, then unloaded (its writes settle). */
  async function restart(persistKv: EngineOptions['persistKv'], prompt: number[]): Promise<{ ids: number[]; cached: number; engine: GpuEngine }> {
    const e = await GpuEngine.load(opened, { gpu, precision: 'f32', contextLength: 128, pageSize: PAGE, prefillChunk: 16, persistKv });
    try {
      const { ids, result } = await drainGeneration(e.generate(greedyRequest(prompt, 8)));
      return { ids, cached: result.cachedTokens, engine: e };
    } finally {
      await e.dispose();
    }
  }
  const pageFiles = async () => (await readdir(dir, { recursive: true })).filter((f) => String(f).endsWith('.kv'));

  it('uploads a restarted engine’s prompt pages from disk with the cold output; a flipped byte is recomputed', async () => {
    const p = prompt(40, 48);
    const cold = await restart({ store: nodeKvStore(dir) }, p);
    expect(cold.cached).toBe(0);
    // The K/V of 55 tokens (the last one drawn is never fed): 13 full pages.
    expect(await pageFiles()).toHaveLength(13);

    const warm = await restart({ store: nodeKvStore(dir) }, p);
    expect(warm.ids).toEqual(cold.ids);
    expect(warm.cached).toBe(44); // every whole page but the one with the prompt's last token
    expect(warm.engine.persist!.counters.restored).toBe(11);

    // A flipped byte in the third page's file: two pages come from disk, the rest are computed.
    const name = await pageName({ model: warm.engine.persist!.modelKey, namespace: '', pageSize: PAGE, ids: p.slice(0, 3 * PAGE) });
    const file = join(dir, `${name}.kv`);
    const bytes = await readFile(file);
    bytes[bytes.length - 100]! ^= 0x10;
    await writeFile(file, bytes);
    const warnings: string[] = [];
    const again = await restart({ store: nodeKvStore(dir), warn: (m) => warnings.push(m) }, p);
    expect(again.ids).toEqual(cold.ids);
    expect(again.cached).toBe(2 * PAGE);
    expect(warnings.join('\n')).toMatch(/ignored and removed: checksum mismatch/);
    // Removed, then written again by the run that computed it.
    expect(await pageFiles()).toHaveLength(13);
  });

  it('turns itself off when the store refuses writes, and the request still answers', async () => {
    const full: KvStore = {
      name: 'a full disk',
      open: async () => {},
      has: () => false,
      read: async () => null,
      write: () => Promise.reject(new Error('ENOSPC: no space left on device')),
      remove: async () => {},
      label: async () => {},
    };
    const warnings: string[] = [];
    const { ids } = await restart({ store: full, warn: (m) => warnings.push(m) }, prompt(41, 30));
    expect(ids).toHaveLength(8);
    expect(warnings).toEqual(['KV persistence is off: cannot write to a full disk: ENOSPC: no space left on device']);
  });
});
