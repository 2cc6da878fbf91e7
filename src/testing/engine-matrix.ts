/**
 * The engine-vs-reference grid of the Node engine tests (engine.test.ts and
 * engine-families.test.ts in f32, engine.f16.test.ts and engine-families.f16.test.ts on a device
 * with shader-f16): for each architecture, its tiny fixture served over HTTP and every listed
 * format checked with expectModelMatchesReference. The grid is split across files so that vitest
 * runs them side by side.
 */
import { beforeAll, describe, it } from 'vitest';
import type { GPUContext } from '../gpu/device';
import type { Arch } from '../model/config';
import { expectModelMatchesReference } from './engine-check';
import { useFixtureURLs } from './fixture-server';
import { testGPU } from './gpu';

/** f32 path: GPU and reference read the same dequantised weights; only summation order differs. */
export const LOGIT_TOLERANCE = 1e-3;
/**
 * f16 path: every activation is rounded to f16 (relative error 2^-11 ≈ 4.9e-4) after each op of
 * each layer, and the KV cache is f16. Measured on lavapipe: worst logit difference 0.037 (qwen2,
 * Q4_K_M) with logits up to 23 in magnitude; a wrong kernel moves logits by whole units. 0.1 ≈
 * 0.5% of the largest logit, with ~2.7× headroom over the worst measured case.
 */
export const F16_LOGIT_TOLERANCE = 0.1;
export const STEPS = 32;

export function describeEngineGrid(cases: Array<[Arch, readonly string[]]>, precision: 'f32' | 'f16' = 'f32'): void {
  const f16 = precision === 'f16';
  describe.each(cases)(`the ${f16 ? 'f16 ' : ''}GPU engine on the tiny %s fixture`, (arch, variants) => {
    const urls = useFixtureURLs(arch);
    let gpu: GPUContext;
    beforeAll(async () => {
      gpu = await testGPU();
    });

    // f16: the first case compiles every f16 pipeline, which takes a minute or two on lavapipe.
    it.for(variants)(`%s: greedy tokens and teacher-forced logits match the reference${f16 ? ' (f16)' : ''}`, { timeout: f16 ? 300_000 : undefined }, async (variant, { skip }) => {
      skip(f16 && !gpu.info.f16, 'the device has no shader-f16');
      await expectModelMatchesReference(gpu, urls()[variant]!, { precision, steps: STEPS, tolerance: f16 ? F16_LOGIT_TOLERANCE : LOGIT_TOLERANCE, salt: 13 * (arch.length + 1) });
    });
  });
}
