import type { TestProject } from 'vitest/node';

/**
 * Relative paths (under `fixturesURL`) of each tiny fixture's formats: `hf-F32`, `Q4_K`, ... (and
 * llama's LoRA adapters, `lora/qv-r4`, `lora/qv-r4.gguf`, ...); keyed by arch, plus `llama-d288`
 * (hidden 288: the D288_MIXES files only).
 */
export type FixtureIndex = Record<string, Record<string, string>>;

/**
 * Runs in Node before the Chromium tests. Fixture models are written here (the browser cannot
 * write files) and served over real HTTP; tests read `inject('fixturesURL')` and
 * `inject('fixtures')` (per arch, the relative path of every format).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { relative } = await import('node:path');
  const { serveDirectory } = await import('./server');
  const { D288_MIXES, ensureFixture, fixtureDir } = await import('./fixtures/shared');
  const root = fixtureDir();
  const index: FixtureIndex = {};
  for (const arch of ['llama', 'qwen2', 'qwen3', 'mistral', 'smollm3', 'olmo2', 'gemma2', 'gemma3', 'granite', 'phi3', 'qwen3moe', 'qwen2moe', 'olmoe', 'lfm2', 'qwen35'] as const) {
    const paths = await ensureFixture({ arch, preset: 'tiny' });
    const rel = (p: string) => relative(root, p).split('\\').join('/');
    index[arch] = {};
    for (const [k, p] of Object.entries(paths.hf)) index[arch][`hf-${k}`] = rel(p as string);
    for (const [k, p] of Object.entries(paths.gguf)) index[arch][k] = rel(p as string);
  }
  // The llama fixture's LoRA adapters: `lora/<name>` (PEFT folders) and `lora/<name>.gguf`.
  const { ensureLoraFixture } = await import('./fixtures/lora-write');
  const { lora } = await ensureLoraFixture({ arch: 'llama', preset: 'tiny' });
  for (const [name, p] of Object.entries(lora.peft)) index.llama![`lora/${name}`] = relative(root, p).split('\\').join('/');
  for (const [name, p] of Object.entries(lora.gguf)) index.llama![`lora/${name}.gguf`] = relative(root, p).split('\\').join('/');
  // Hidden 288 (a multiple of 32, not of 256): llama-quantize's mixes with their row fallbacks.
  const d288 = await ensureFixture({ arch: 'llama', preset: 'tiny', hiddenSize: 288 }, { hf: [], gguf: D288_MIXES });
  index['llama-d288'] = Object.fromEntries(Object.entries(d288.gguf).map(([k, p]) => [k, relative(root, p as string).split('\\').join('/')]));
  // Gemma 3's multimodal checkpoint: an HF folder only (its text model's GGUF is gemma3's).
  const mm = await ensureFixture({ arch: 'gemma3', preset: 'tiny', multimodal: true }, { hf: ['F32'] });
  index['gemma3-mm'] = { 'hf-F32': relative(root, mm.hf.F32!).split('\\').join('/') };
  // Granite 4.0-H (Mamba-2 layers beside NoPE attention): its granitehybrid Q8_0 file.
  const graniteH = await ensureFixture({ arch: 'granite', preset: 'tiny', hybrid: { mambaGroups: 1 } }, { hf: [], gguf: ['Q8_0'] });
  index['granite-h'] = { Q8_0: relative(root, graniteH.gguf.Q8_0!).split('\\').join('/') };
  // Qwen3.5 with its MTP head (speculative {type: "mtp"}): its Q8_0 file.
  const q35mtp = await ensureFixture({ arch: 'qwen35', preset: 'tiny', mtp: true }, { hf: [], gguf: ['Q8_0'] });
  index['qwen35-mtp'] = { Q8_0: relative(root, q35mtp.gguf.Q8_0!).split('\\').join('/') };
  // The Qwen3-Embedding checkpoint (bare-model names, sentence-transformers files): its folder.
  const embed = await ensureFixture({ arch: 'qwen3', preset: 'tiny', embedding: true }, { hf: ['F32'], gguf: [] });
  index['qwen3-embed'] = { 'hf-F32': relative(root, embed.hf.F32!).split('\\').join('/') };
  // The tiny SmolVLM as an HF Idefics3 folder (text model, vision tower, processor files).
  const smolvlm = await ensureFixture({ arch: 'llama', preset: 'tiny', vision: true }, { hf: ['F32'], gguf: [] });
  index.smolvlm = { 'hf-F32': relative(root, smolvlm.hf.F32!).split('\\').join('/') };
  // The tiny BERT encoder's sentence-transformers folder.
  const { ensureBertFixture } = await import('./fixtures/bert-write');
  const bert = await ensureBertFixture({ hf: ['F32'], gguf: [] });
  index.bert = { 'hf-F32': relative(root, bert.hf.F32!).split('\\').join('/') };
  // The tiny EmbeddingGemma (bidirectional gemma3, sentence-transformers files): its Q8_0 GGUF.
  const egemma = await ensureFixture({ arch: 'gemma3', preset: 'tiny', embedding: true }, { hf: [], gguf: ['Q8_0'] });
  index['gemma3-embed'] = { Q8_0: relative(root, egemma.gguf.Q8_0!).split('\\').join('/') };
  const server = await serveDirectory(root);
  project.provide('fixturesURL', server.url);
  project.provide('fixtures', index);
  return () => server.close();
}

declare module 'vitest' {
  export interface ProvidedContext {
    fixturesURL: string;
    fixtures: FixtureIndex;
  }
}
