/**
 * The GPU pass's table of block kinds: a model with a layer kind the GPU does not run yet (Qwen3.5's
 * DeltaNet) is refused by GpuEngine.load before any GPU work, as unsupported_arch naming its layers.
 */
import { describe, expect, it } from 'vitest';
import { configFromHF } from '../../model/config-hf';
import type { OpenedModel } from '../../model/open';
import { makeFixture } from '../../testing/fixtures/model';
import { GpuEngine } from '../engine';
import { refuseGpuPending } from './blocks';

describe('layer kinds the GPU pass does not run yet', () => {
  it('refuses Qwen3.5 (DeltaNet layers) without touching a GPU; LFM2 and Qwen3 pass', async () => {
    const config = (arch: 'qwen35' | 'lfm2' | 'qwen3') => configFromHF(makeFixture({ arch, preset: 'tiny' }).config);
    expect(() => refuseGpuPending(config('qwen35'))).toThrow(expect.objectContaining({ code: 'unsupported_arch', message: expect.stringContaining('DeltaNet') }));
    expect(() => refuseGpuPending(config('lfm2'))).not.toThrow();
    expect(() => refuseGpuPending(config('qwen3'))).not.toThrow();
    // No gpu option and no weights: the refusal comes first.
    const opened = { config: config('qwen35'), tensors: new Map() } as unknown as OpenedModel;
    await expect(GpuEngine.load(opened)).rejects.toMatchObject({ code: 'unsupported_arch', field: 'layer_types' });
  });
});
