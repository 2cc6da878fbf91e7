/**
 * The WebGPU engine against the CPU reference on the families added after the first four (SmolLM3,
 * OLMo 2, Gemma 2/3, Granite, Phi-3, the mixtures of experts), and their special cases: the same
 * rule as engine.test.ts (teacher-forced logits within LOGIT_TOLERANCE, greedy tokens up to the
 * reference's first near-tie).
 */
import { relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import { openModel } from '../model/open';
import { logitsFor, ReferenceModel } from '../reference/forward';
import { expectEngineMatchesReference, expectModelMatchesReference } from '../testing/engine-check';
import { GpuEngine } from './engine';
import { GREEDY } from '../testing/sampling';
import { describeEngineGrid, FIRST_FAMILIES, LAYOUT_GRID, LOGIT_TOLERANCE, MAIN_GRID, SHORT_STEPS, STEPS } from '../testing/engine-matrix';
import { useFixtureURLs } from '../testing/fixture-server';
import { D288_MIXES, ensureFixture } from '../testing/fixtures/shared';
import { testGPU } from '../testing/gpu';
import { serveDirectory } from '../testing/server';

describeEngineGrid(MAIN_GRID.filter(([a]) => !FIRST_FAMILIES.includes(a)));
// Other fixture layouts (Granite 4.0-H, issue #29), long and short.
describeEngineGrid(LAYOUT_GRID.filter((l) => l.long.length).map((l) => [l.arch, l.long, l.variant]));
describeEngineGrid(LAYOUT_GRID.filter((l) => l.short.length).map((l) => [l.arch, l.short, l.variant]), 'f32', SHORT_STEPS);

describe('the GPU engine on LongRoPE from the GGUF (typed "longrope"), on each side of its switch', () => {
  const urls = useFixtureURLs('phi3');
  // The tiny phi3 fixture's original context is 512: an engine of 512 tokens takes the short
  // factors, one of 528 the long ones (as the grid's default 2048). The short check (the type
  // grid's): the factors change the rotation at every position of the prefill and each step.
  it.each([512, 528])('Q8_0 with a %i-token context: teacher-forced logits and greedy tokens match the reference', async (contextLength) => {
    await expectModelMatchesReference(await testGPU(), urls().Q8_0!, { precision: 'f32', steps: SHORT_STEPS, tolerance: LOGIT_TOLERANCE, salt: 5, engine: { contextLength }, sampled: false });
  });
});

/**
 * llama-quantize's mixes on a hidden size that is a multiple of 32 but not of 256 (as Qwen2.5-0.5B's
 * 896): rows of 288 fall back to Q5_0 / Q5_1 / Q4_0 / IQ4_NL / Q8_0 while rows of 256 and 512
 * (attn_output, ffn_down) keep the preset's K- and IQ-quants. Q4_K_M (Q5_0 and Q8_0 rows) and
 * IQ4_XS_MIX (IQ4_NL rows) run here; Q5_K_M's Q5_1 and Q2_K's Q4_0 rows are types the grid above
 * runs already, and the written files' types are checked in write.test.ts.
 */
describe('the GPU engine on mixes whose rows are not whole 256-blocks (hidden 288)', () => {
  const mixes = ['Q4_K_M', 'IQ4_XS_MIX'] as const;
  // The fixture as every test writes it (all of D288_MIXES), so one copy serves them all.
  const urls = useFixtureURLs('llama', { options: { hiddenSize: 288 }, which: { hf: [], gguf: D288_MIXES } });
  let gpu: GPUContext;
  beforeAll(async () => {
    gpu = await testGPU();
  });

  it.each(mixes)('%s: greedy tokens and teacher-forced logits match the reference', async (variant) => {
    await expectModelMatchesReference(gpu, urls()[variant]!, { precision: 'f32', steps: STEPS, tolerance: LOGIT_TOLERANCE, salt: 288 });
  });
});

describe('the GPU engine on a multimodal Gemma 3 folder', () => {
  // config.json nests the text config, tensors sit under language_model., a vision tower and
  // projector are skipped; the text weights are the text fixture's.
  it('runs the text model as gemma3_text: engine = reference, whose logits equal the text folder’s', async () => {
    const gpu = await testGPU();
    const [mm, text] = await Promise.all([
      ensureFixture({ arch: 'gemma3', preset: 'tiny', multimodal: true }, { hf: ['F32'] }),
      ensureFixture({ arch: 'gemma3', preset: 'tiny' }),
    ]);
    const opened = await openModel(mm.hf.F32!);
    expect([...opened.tensors.keys()].some((n) => !/^(token_embd|output_norm|blk\.\d+\.)/.test(n))).toBe(false);
    const ids = Array.from({ length: 12 }, (_, i) => (i * 31 + 7) % opened.config.vocabSize);
    const [fromMM, fromText] = await Promise.all([ReferenceModel.load(opened), openModel(text.hf.F32!).then((m) => ReferenceModel.load(m))]);
    expect(logitsFor(fromMM, ids)).toEqual(logitsFor(fromText, ids));
    const server = await serveDirectory(mm.root);
    try {
      const url = `${server.url}/${relative(mm.root, mm.hf.F32!).split('\\').join('/')}`;
      await expectModelMatchesReference(gpu, url, { precision: 'f32', steps: 16, tolerance: LOGIT_TOLERANCE, salt: 3 });
    } finally {
      await server.close();
    }
  });
});

describe('the GPU engine on a dense Granite 4.0 folder (granitemoehybrid)', () => {
  // config.json says granitemoehybrid (attention on every layer, no routed experts, RoPE) and the
  // MLP is the shared one, gate/up fused; the weights are the granite fixture's.
  it('runs it as granite: engine = reference, whose logits equal the granite folder’s', async () => {
    const gpu = await testGPU();
    const [hybrid, plain] = await Promise.all([
      ensureFixture({ arch: 'granite', preset: 'tiny', hybrid: true }, { hf: ['F32'] }),
      ensureFixture({ arch: 'granite', preset: 'tiny' }, { hf: ['F32'], gguf: [] }),
    ]);
    const opened = await openModel(hybrid.hf.F32!);
    expect(opened.tensors.get('blk.1.ffn_gate.weight')?.info.name).toBe('model.layers.1.shared_mlp.input_linear.weight');
    const ids = Array.from({ length: 12 }, (_, i) => (i * 31 + 7) % opened.config.vocabSize);
    const [fromHybrid, fromPlain] = await Promise.all([ReferenceModel.load(opened), openModel(plain.hf.F32!).then((m) => ReferenceModel.load(m))]);
    expect(logitsFor(fromHybrid, ids)).toEqual(logitsFor(fromPlain, ids));
    const server = await serveDirectory(hybrid.root);
    try {
      const url = `${server.url}/${relative(hybrid.root, hybrid.hf.F32!).split('\\').join('/')}`;
      await expectModelMatchesReference(gpu, url, { precision: 'f32', steps: 16, tolerance: LOGIT_TOLERANCE, salt: 4 });
    } finally {
      await server.close();
    }
  });
});

describe('the GPU engine on a mixture of experts with a dense layer (qwen3moe, layer 0 dense)', () => {
  // config.json's mlp_only_layers [0] (HF) and leading_dense_block_count 1 (GGUF): layer 0 runs the
  // dense MLP, layer 1 the experts.
  const urls = useFixtureURLs('qwen3moe', { options: { leadingDense: 1 }, which: { hf: ['F32'], gguf: ['Q8_0'] } });

  it.each(['hf-F32', 'Q8_0'])('%s: engine = reference; return_routed_experts gives the dense layer -1s, the other the reference routing', async (variant) => {
    const gpu = await testGPU();
    const opened = await openModel(urls()[variant]!);
    const { config } = opened;
    expect(config.moe!.denseLayers).toEqual([0]);
    expect(['blk.0.ffn_gate.weight', 'blk.1.ffn_gate_exps.weight'].every((n) => opened.tensors.has(n))).toBe(true);
    expect(['blk.0.ffn_gate_exps.weight', 'blk.1.ffn_gate.weight'].some((n) => opened.tensors.has(n))).toBe(false);
    const ref = await ReferenceModel.load(opened);
    const engine = await GpuEngine.load(opened, { gpu, precision: 'f32' });
    try {
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 7919 + 16) % config.vocabSize);
      await expectEngineMatchesReference(engine, ref, prompt, STEPS, LOGIT_TOLERANCE);
      // Each generated token's routing, against the reference's along the engine's own tokens.
      const got: { id: number; routed: number[][] }[] = [];
      for await (const t of engine.generate({ promptIds: prompt, maxTokens: 3, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, returnRoutedExperts: true }))
        got.push({ id: t.id, routed: t.routedExperts! });
      ref.reset();
      prompt.forEach((id, pos) => ref.forward(id, pos));
      const k = config.moe!.numExpertsUsed;
      got.forEach(({ id, routed }, s) => {
        expect(routed[0], `token ${s}, dense layer 0`).toEqual(new Array(k).fill(-1));
        expect(routed, `token ${s}`).toEqual(ref.routedExperts);
        ref.forward(id, prompt.length + s);
      });
    } finally {
      await engine.dispose();
    }
  });
});
