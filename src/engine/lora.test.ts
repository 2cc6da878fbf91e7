/**
 * LoRA adapters on the GPU engine against the CPU reference with the adapter merged in float64
 * (W + scale·B·A): the engine never modifies W and adds each sequence's own adapter's low-rank
 * product in the step. Adapters come over HTTP through the loader, in both formats, onto HF and
 * GGUF bases (a `llama` GGUF's q/k rows are permuted: the adapter's B rows must follow).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import type { Arch } from '../model/arch';
import { openModel, type OpenedModel } from '../model/open';
import { greedy, ReferenceModel } from '../reference/forward';
import { expectEngineMatchesReference, generateGreedy } from '../testing/engine-check';
import { ensureLoraFixture } from '../testing/fixtures/lora-write';
import { mergedReference } from '../testing/lora-reference';
import { testGPU } from '../testing/gpu';
import { drainGeneration, greedyRequest, GREEDY } from '../testing/sampling';
import { serveDirectory, type StaticServer } from '../testing/server';
import { nodeKvStore } from '../loader/kv-store-node';
import { GpuEngine } from './engine';
import { LoraExistsError, LoraNotFoundError } from './errors';

/** f32: the GPU adds B·(A·x) to W·x where the reference multiplies by W + B·A: summation order only. */
const LOGIT_TOLERANCE = 1e-3;
/** f16 activations (see engine.f16.test.ts). */
const F16_LOGIT_TOLERANCE = 0.1;

interface Rig {
  server: StaticServer;
  at: (p: string) => string;
  model: Awaited<ReturnType<typeof ensureLoraFixture>>['model'];
  lora: Awaited<ReturnType<typeof ensureLoraFixture>>['lora'];
}

async function rig(arch: Arch): Promise<Rig> {
  const { model, lora } = await ensureLoraFixture({ arch, preset: 'tiny' });
  const server = await serveDirectory(model.root);
  return { server, model, lora, at: (p) => `${server.url}/${relative(model.root, p).split('\\').join('/')}` };
}

const prompt = (vocab: number, salt: number) => Array.from({ length: 20 }, (_, i) => (i * 7919 + salt) % vocab);

// llama: GGUF bases with permuted q/k rows (F32 and two quantised types) and the HF base;
// qwen3: q/k norms after the adapted projections.
const CASES: Array<[Arch, string[]]> = [
  ['llama', ['Q4_K_M', 'hf-F32']],
  ['qwen3', ['Q4_K']],
];

describe.each(CASES)('LoRA adapters on the GPU engine, tiny %s', (arch, bases) => {
  let r: Rig;
  let gpu: GPUContext;
  beforeAll(async () => {
    gpu = await testGPU();
    r = await rig(arch);
  });
  afterAll(() => r?.server.close());

  const baseUrl = (variant: string) => (variant.startsWith('hf-') ? r.at(r.model.hf[variant.slice(3) as 'F32']!) : r.at(r.model.gguf[variant as 'F32']!));

  it.each(bases)('%s base: each adapter (PEFT and GGUF) gives the merged reference’s greedy tokens and logits', async (variant) => {
    const opened = await openModel(baseUrl(variant));
    const engine = await GpuEngine.load(opened, {
      gpu,
      precision: 'f32',
      lora: { qv: { source: r.at(r.lora.peft['qv-r4']!) }, all: r.at(r.lora.gguf['all-r8-rslora']!) },
      loraPool: { maxAdapters: 3, maxRank: 8 },
    });
    try {
      expect(engine.loras().map((l) => [l.name, l.format, l.rank, l.targets.join('')])).toEqual([
        ['qv', 'peft', 4, 'qv'],
        ['all', 'gguf', 8, 'qkvogateupdown'],
      ]);
      const p = prompt(opened.config.vocabSize, 17);
      await expectEngineMatchesReference(engine, await mergedReference(opened, r.at(r.lora.peft['qv-r4']!)), p, 12, LOGIT_TOLERANCE, 'qv');
      await expectEngineMatchesReference(engine, await mergedReference(opened, r.at(r.lora.gguf['all-r8-rslora']!)), p, 12, LOGIT_TOLERANCE, 'all');
    } finally {
      await engine.dispose();
    }
  });
});

describe('LoRA serving: mixed batches, the prefix cache, load and unload', () => {
  let r: Rig;
  let gpu: GPUContext;
  let opened: OpenedModel;
  let engine: GpuEngine;
  const refs = new Map<string, ReferenceModel>();
  beforeAll(async () => {
    gpu = await testGPU();
    r = await rig('llama');
    opened = await openModel(r.at(r.model.gguf.Q8_0!));
    engine = await GpuEngine.load(opened, { gpu, precision: 'f32', pageSize: 4, loraPool: { maxAdapters: 2, maxRank: 8 } });
    refs.set('', await ReferenceModel.load(opened));
    refs.set('a', await mergedReference(opened, r.at(r.lora.peft['qv-r4']!)));
    refs.set('b', await mergedReference(opened, r.at(r.lora.peft['all-r8-rslora']!)));
  });
  afterAll(async () => {
    await engine?.dispose();
    await r?.server.close();
  });

  it('loads adapters at run time, and runs a batch mixing two adapters and the base, each request its own output', async () => {
    await engine.loadLora('a', r.at(r.lora.peft['qv-r4']!), { cache: false });
    await engine.loadLora('b', r.at(r.lora.gguf['all-r8-rslora']!), { cache: false });
    const vocab = opened.config.vocabSize;
    // The same prompt under each, and other prompts: six sequences in one batch.
    const jobs = [
      { lora: 'a', p: prompt(vocab, 3) },
      { lora: undefined, p: prompt(vocab, 3) },
      { lora: 'b', p: prompt(vocab, 3) },
      { lora: 'b', p: prompt(vocab, 5) },
      { lora: undefined, p: prompt(vocab, 7) },
      { lora: 'a', p: prompt(vocab, 7) },
    ];
    const got = await Promise.all(jobs.map((j) => generateGreedy(engine, j.p, 12, j.lora)));
    const want = jobs.map((j) => greedy(refs.get(j.lora ?? '')!, j.p, 12));
    // Under the tolerance rule each would be checked to its first near-tie; the fixture's margins
    // on these prompts are wide (measured), and a wrong adapter changes most tokens.
    expect(got).toEqual(want);
    expect(want[0]).not.toEqual(want[1]);
    expect(want[2]).not.toEqual(want[1]);
  });

  it('keys the prefix cache by adapter: the same prompt under another adapter computes its own pages', async () => {
    const p = prompt(opened.config.vocabSize, 11);
    const run = async (lora?: string) => {
      const it = engine.generate({ promptIds: p, maxTokens: 4, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, ...(lora ? { lora } : {}) });
      const ids: number[] = [];
      let n = await it.next();
      while (!n.done) (ids.push(n.value.id), (n = await it.next()));
      return { ids, cached: n.value.cachedTokens };
    };
    expect((await run()).cached).toBe(0);
    const a = await run('a');
    expect(a.cached).toBe(0); // the base's pages are not the adapter's
    expect(a.ids).toEqual(greedy(refs.get('a')!, p, 4));
    const again = await run('a');
    expect(again.cached).toBe(Math.floor((p.length - 1) / 4) * 4);
    expect(again.ids).toEqual(a.ids);
  });

  it('refuses an unknown adapter (404) and a second load of a name (409); unload waits for requests in flight', async () => {
    const p = prompt(opened.config.vocabSize, 19);
    await expect(generateGreedy(engine, p, 2, 'nope')).rejects.toMatchObject({ status: 404, code: 'lora_not_found', message: expect.stringContaining('"nope" is not loaded (loaded: "a", "b")') });
    await expect(engine.loadLora('a', r.at(r.lora.peft['qv-r4']!), { cache: false })).rejects.toBeInstanceOf(LoraExistsError);
    // A long request with adapter a; unload a while it runs: the request completes exactly.
    const longRun = generateGreedy(engine, p, 24, 'a');
    await new Promise((res) => setTimeout(res, 20));
    let unloaded = false;
    const unloading = engine.unloadLora('a').then(() => (unloaded = true));
    await expect(generateGreedy(engine, p, 2, 'a')).rejects.toBeInstanceOf(LoraNotFoundError);
    const tokens = await longRun;
    expect(tokens).toEqual(greedy(refs.get('a')!, p, 24));
    await unloading;
    expect(unloaded).toBe(true);
    expect(engine.loras().map((l) => l.name)).toEqual(['b']);
    // Its id and pool room go to the next adapter, and b is unaffected.
    await engine.loadLora('a2', r.at(r.lora.gguf['qv-r4']!), { cache: false });
    expect(await generateGreedy(engine, p, 8, 'a2')).toEqual(greedy(refs.get('a')!, p, 8));
    expect(await generateGreedy(engine, p, 8, 'b')).toEqual(greedy(refs.get('b')!, p, 8));
    await expect(engine.unloadLora('a')).rejects.toMatchObject({ status: 404 });
  });

  it('persists an adapter’s KV pages under its content: the same adapter after a restart reads them back, another or none never', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kv-lora-'));
    const p = prompt(opened.config.vocabSize, 13);
    /** `p` for 4 greedy tokens on a new engine persisting to `dir`, with `adapter` loaded as `name`. */
    const restart = async (adapter: string | null, name = 'x') => {
      const e = await GpuEngine.load(opened, { gpu, precision: 'f32', pageSize: 4, contextLength: 64, loraPool: { maxAdapters: 1, maxRank: 8 }, persistKv: { store: nodeKvStore(dir) } });
      try {
        if (adapter) await e.loadLora(name, r.at(adapter), { cache: false });
        const { ids, result } = await drainGeneration(e.generate(greedyRequest(p, 4, {}, adapter ? { lora: name } : {})));
        return { ids, cached: result.cachedTokens, restored: e.persist!.counters.restored };
      } finally {
        await e.dispose();
      }
    };
    try {
      const a = r.lora.peft['qv-r4']!;
      const cold = await restart(a);
      expect(cold).toEqual({ ids: greedy(refs.get('a')!, p, 4), cached: 0, restored: 0 });
      // Under another name: the key is the adapter's content. Every whole page but the prompt's last.
      expect(await restart(a, 'y')).toEqual({ ids: cold.ids, cached: 16, restored: 4 });
      expect(await restart(r.lora.peft['all-r8-rslora']!)).toMatchObject({ cached: 0, restored: 0 });
      expect(await restart(null)).toMatchObject({ cached: 0, restored: 0 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses an adapter made for another base, naming the file and the mismatch', async () => {
    const other = await rig('qwen3');
    try {
      // Its GGUF says qwen3; the base is llama (a PEFT file would pass if the shapes agreed).
      await expect(engine.loadLora('wrong', other.at(other.lora.gguf['all-r8-rslora']!), { cache: false })).rejects.toMatchObject({
        name: 'LoraError',
        code: 'wrong_base',
        message: expect.stringMatching(/all-r8-rslora\.gguf.*"qwen3" model, but the base is "llama"/),
      });
      expect(engine.loras().map((l) => l.name)).not.toContain('wrong');
    } finally {
      await other.server.close();
    }
  });
});

describe('LoRA on the f16 path', () => {
  it('each adapter gives the merged reference’s greedy tokens and logits (f16)', { timeout: 300_000 }, async ({ skip }) => {
    const gpu = await testGPU();
    skip(!gpu.info.f16, 'the device has no shader-f16');
    const r = await rig('llama');
    try {
      const opened = await openModel(r.at(r.model.gguf.Q4_K_M!));
      const engine = await GpuEngine.load(opened, { gpu, precision: 'f16', lora: { all: r.at(r.lora.peft['all-r8-rslora']!) }, loraPool: { maxRank: 8 } });
      try {
        const ref = await mergedReference(opened, r.at(r.lora.peft['all-r8-rslora']!));
        await expectEngineMatchesReference(engine, ref, prompt(opened.config.vocabSize, 23), 16, F16_LOGIT_TOLERANCE, 'all');
      } finally {
        await engine.dispose();
      }
    } finally {
      await r.server.close();
    }
  });
});
