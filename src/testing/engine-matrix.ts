/**
 * The engine-vs-reference grid of the Node engine tests (engine.test.ts and
 * engine-families.test.ts in f32, engine.f16.test.ts and engine-families.f16.test.ts on a device
 * with shader-f16): for each architecture, its tiny fixture served over HTTP and every listed
 * format checked with expectModelMatchesReference. The grid is split across files so that vitest
 * runs them side by side.
 */
import { beforeAll, describe, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import { ARCHES, type Arch } from '../model/arch';
import { expectModelMatchesReference, SHORT_STEPS, STEPS } from './engine-check';
import { useFixtureURLs, type FixtureVariant } from './fixture-server';
import { fixtureName } from './fixtures/shared';
import { testGPU } from './gpu';

import { F16_LOGIT_TOLERANCE, LOGIT_TOLERANCE } from './tolerances';

export { F16_LOGIT_TOLERANCE, LOGIT_TOLERANCE };
export { SHORT_STEPS, STEPS };

/** The first four families: engine.test.ts; the later ones: engine-families.test.ts. */
export const FIRST_FAMILIES: readonly Arch[] = ['llama', 'qwen2', 'qwen3', 'mistral'];

/**
 * The carriers' base formats: every format the generator wrote before issue #15, HF folders
 * included.
 */
const BASE_FORMATS = ['hf-F32', 'hf-F16', 'hf-BF16', 'F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q5_0', 'Q4_K', 'Q6_K', 'Q4_K_M'];
/** Issue #15's weight types and llama-quantize's presets (the Q2_K and IQ4_XS presets as *_MIX). */
export const NEW_TYPES = ['Q4_1', 'Q5_0', 'Q5_1', 'Q5_K', 'Q3_K', 'Q2_K', 'IQ4_NL', 'IQ4_XS', 'MXFP4'];
export const NEW_MIXES = ['Q4_K_M', 'Q5_K_M', 'Q4_K_S', 'Q3_K_M', 'Q2_K_MIX', 'IQ4_XS_MIX'];
/** Issue #16's formats on each family added after the first four (its HF folder and five GGUF). */
export const FAMILY_FORMATS = ['hf-F32', 'F32', 'F16', 'Q8_0', 'Q4_K', 'Q4_K_M'];

/**
 * Families with recurrent layers (issue #29): the HF folder (F32), Q8_0 and (LFM2) a K-quant; a
 * weight type changes only their linears, and engine-hybrid.test.ts tests LFM2's state handling.
 * Qwen3.5: its HF folder (grouped value heads, A_log, (1 + w) norms) and Q8_0 (llama.cpp's tiled
 * heads, ssm_a, F32 β/α/conv), about 2.5 minutes together on SwiftShader.
 */
const HYBRID_FORMATS: Partial<Record<Arch, readonly string[]>> = { lfm2: ['hf-F32', 'Q8_0', 'Q4_K'], qwen35: ['hf-F32', 'Q8_0'] };

/**
 * The weight types' carriers: every GGUF type and mix (issue #15) runs on a dense family and on an
 * MoE one (whose experts dequantise through the MoE kernels). A weight type changes only how the
 * linears, the experts and the embedding dequantise, the same kernels whatever the family; what a
 * family changes (names, norms, rotary, layouts) is checked by its own formats below. Every type
 * on every family (253 short checks, about 520 s of the Node step's test time) covered no kernel path
 * this covering design leaves out: every type × {dense, MoE}, every family × the #16 formats
 * (HF folder, F32, F16, a block-of-32 type, a K-quant and a mix).
 */
export const TYPE_CARRIERS: readonly Arch[] = ['llama', 'qwen3moe'];

/**
 * What each architecture runs: the carriers every type and mix and their HF folders in every
 * dtype, every other family issue #16's formats, hybrids theirs.
 */
export function requiredFormats(arch: Arch): string[] {
  const hybrid = HYBRID_FORMATS[arch];
  if (hybrid) return [...hybrid];
  if (!TYPE_CARRIERS.includes(arch)) return FAMILY_FORMATS;
  return [...new Set([...BASE_FORMATS, ...NEW_TYPES, ...NEW_MIXES])];
}

/**
 * The main grid (STEPS greedy steps through the GPU sampler, across the default 16-token KV
 * pages' boundaries), split in engine.test.ts (the first four) and engine-families.test.ts: what
 * a long run adds to the short check (KV pages, many decode steps, the sampler) belongs to the
 * family, not the weight type. Llama runs its HF folder, F32, F16, Q8_0 and the Q4_K_M mix long,
 * qwen3moe its HF folder and Q4_K_M (the experts from a K-quant mix); every other family its HF
 * folder. Every other required format takes the short check (typeGrid): a long case costs about
 * five short ones on SwiftShader (an MoE one about 15 s), and the other families' Q4_K_M, F16
 * and Q8_0 moved there for npm test's budget.
 */
const LONG = ['hf-F32'];
export const MAIN_GRID: ReadonlyArray<[Arch, readonly string[]]> = [
  ['llama', ['hf-F32', 'F32', 'F16', 'Q8_0', 'Q4_K_M']],
  ['qwen2', LONG],
  ['qwen3', LONG],
  ['mistral', LONG],
  ['smollm3', LONG],
  ['olmo2', LONG],
  ['gemma2', LONG],
  // Six tiny layers (one global).
  ['gemma3', LONG],
  ['granite', LONG],
  // Fused projections split at load, partial rotary and LongRoPE (the long factors: the default
  // context exceeds the fixture's original one).
  ['phi3', LONG],
  // Mixture of experts: routed experts from a K-quant mix on qwen3moe; the other two on their HF
  // folder (a shared expert; OLMoE's expert sizes).
  ['qwen3moe', ['hf-F32', 'Q4_K_M']],
  ['qwen2moe', LONG],
  ['olmoe', LONG],
  // Gated short convolutions on two of three layers, their state carried over 36 positions: the HF
  // folder (LFM2's names, the squeezed conv kernel); its GGUF files (token_embd_norm, per-layer KV
  // heads) take the short check.
  ['lfm2', ['hf-F32']],
  // Gated DeltaNet on two of three layers around a gated-attention layer (partial rotary): the HF
  // folder (grouped value heads, A_log); Q8_0 (tiled heads, ssm_a) takes the short check.
  ['qwen35', ['hf-F32']],
];

/**
 * Fixture layouts of a family other than the one its rows above run (issue #29), run by
 * engine-families.test.ts as the main grid's rows: Granite 4.0-H, the granite row's Mamba-2 layout
 * (mamba, NoPE attention, mamba), its HF folder (A_log, the shared MLP's fused gate/up, one B/C
 * group as the released models) long, the scan state carried over 36 positions.
 * engine-hybrid.test.ts runs its GGUF (granitehybrid, two groups) over prefill chunks, and
 * engine-families.f16.test.ts its Q8_0 in f16.
 */
export const LAYOUT_GRID: ReadonlyArray<{ arch: Arch; variant: FixtureVariant; long: readonly string[]; short: readonly string[] }> = [
  { arch: 'granite', variant: { options: { hybrid: { mambaGroups: 1 } }, which: { hf: ['F32'], gguf: [] } }, long: ['hf-F32'], short: [] },
];

/**
 * The type grid's parts, one file each: the plain and block-of-32 types (and the HF folders), the
 * K-quants and IQ4_XS (blocks of 256), and llama-quantize's mixes.
 */
export const TYPE_GROUPS = {
  blocks: ['hf-F32', 'hf-F16', 'hf-BF16', 'F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'IQ4_NL', 'MXFP4'],
  kquants: ['Q4_K', 'Q5_K', 'Q6_K', 'Q3_K', 'Q2_K', 'IQ4_XS'],
  mixes: NEW_MIXES,
} as const satisfies Record<string, readonly string[]>;

/**
 * Every (architecture × required format) the main grid leaves out, for the short check; `types`
 * picks a part of it (engine-types*.test.ts each take a group of types, so that a file compiles a
 * type's kernels once for all architectures and the files run side by side).
 */
export function typeGrid(types: readonly string[]): Array<[Arch, string[]]> {
  return ARCHES.map((arch): [Arch, string[]] => {
    const long = MAIN_GRID.find(([a]) => a === arch)?.[1] ?? [];
    return [arch, requiredFormats(arch).filter((f) => types.includes(f) && !long.includes(f))];
  }).filter(([, f]) => f.length > 0);
}

/**
 * The grid's checks (expectModelMatchesReference) of `cases` at `precision`; `steps` greedy steps,
 * which the short check (SHORT_STEPS) takes from the engine's teacher-forced logits rather than a
 * second run through the GPU sampler (the sampler does not depend on the weight type).
 */
export function describeEngineGrid(cases: Array<[Arch, readonly string[], FixtureVariant?]>, precision: 'f32' | 'f16' = 'f32', steps = STEPS): void {
  const sampled = steps !== SHORT_STEPS;
  const f16 = precision === 'f16';
  // A layout's fixture (LAYOUT_GRID) is named as its folder is.
  const named = cases.map(([arch, variants, layout]) => [layout ? fixtureName({ ...layout.options, arch, preset: 'tiny' }) : arch, arch, variants, layout] as const);
  describe.each(named)(`the ${f16 ? 'f16 ' : ''}GPU engine on the tiny %s fixture`, (_, arch, variants, layout) => {
    const urls = useFixtureURLs(arch, layout);
    let gpu: GPUContext;
    beforeAll(async () => {
      gpu = await testGPU();
    });

    // f16: the first case compiles every f16 pipeline, which takes a minute or two on lavapipe.
    it.for(variants)(`%s: greedy tokens and teacher-forced logits match the reference${f16 ? ' (f16)' : ''}`, { timeout: f16 ? 300_000 : undefined }, async (variant, { skip }) => {
      skip(f16 && !gpu.info.f16, 'the device has no shader-f16');
      await expectModelMatchesReference(gpu, urls()[variant]!, { precision, steps, tolerance: f16 ? F16_LOGIT_TOLERANCE : LOGIT_TOLERANCE, salt: 13 * (arch.length + 1), sampled });
    });
  });
}
