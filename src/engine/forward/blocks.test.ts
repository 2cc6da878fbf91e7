/**
 * The GPU pass's table of block kinds: a model with a layer kind the GPU does not run yet (Granite
 * 4.0-H's Mamba-2) is refused by GpuEngine.load before any GPU work, as unsupported_arch.
 */
import { describe, expect, it } from 'vitest';
import { PLAIN_MATH, type ModelConfig } from '../../model/config';
import type { OpenedModel } from '../../model/open';
import { GpuEngine } from '../engine';
import { refuseGpuPending } from './blocks';

const base = {
  arch: 'granite', vocabSize: 8, hiddenSize: 8, intermediateSize: 8, numLayers: 2, numHeads: 2, numKvHeads: 1, headDim: 4, rmsNormEps: 1e-5,
  ropeTheta: 10000, ropeScaling: null, ropeStyle: 'interleaved', maxPositionEmbeddings: 32, tieWordEmbeddings: true, attentionBias: false, qkNorm: false,
  slidingWindow: null, noRopeLayers: [], qkNormScope: 'head', normPlacement: 'pre', ...PLAIN_MATH, bosTokenId: null, eosTokenIds: [],
} satisfies ModelConfig;
const hybrid: ModelConfig = { ...base, mamba2: { layers: [0], convKernel: 4, numHeads: 2, headDim: 8, stateSize: 4, numGroups: 1, aStored: 'log' } };

describe('layer kinds the GPU pass does not run yet', () => {
  it('refuses Mamba-2 layers without touching a GPU; attention only passes', async () => {
    expect(() => refuseGpuPending(hybrid)).toThrow(expect.objectContaining({ code: 'unsupported_arch', message: expect.stringContaining('Mamba-2') }));
    expect(() => refuseGpuPending(base)).not.toThrow();
    // No gpu option and no weights: the refusal comes first.
    const opened = { config: hybrid, tensors: new Map() } as unknown as OpenedModel;
    await expect(GpuEngine.load(opened)).rejects.toMatchObject({ code: 'unsupported_arch', field: 'layer_types' });
  });
});
