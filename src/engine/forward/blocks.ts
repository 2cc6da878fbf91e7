/**
 * The block kinds of the GPU forward pass, one row each: the kinds `layerBlocks` (src/model/config.ts)
 * names for a layer, each built by its own file here. A new kind (a recurrent mixer, another FFN)
 * is its file, its row here, its name in LayerBlocks and its paragraph in the CPU reference.
 */
import { layerBlocks, type FfnKind, type MixerKind, type ModelConfig } from '../../model/config';
import { ModelError } from '../../model/errors';
import { createAttentionBlock } from './attention';
import { createDeltaNetBlock } from './deltanet';
import type { Block, BlockBuilder } from './block';
import { createMlpBlock } from './mlp';
import { createMoeBlock } from './moe';
import { createShortConvBlock } from './shortconv';

/**
 * Kinds the CPU reference runs (or will) and the GPU pass does not yet (Granite 4.0-H's Mamba-2,
 * issue #29): GpuEngine.load refuses a model holding one (refuseGpuPending) before uploading anything.
 */
const GPU_PENDING: Readonly<Partial<Record<MixerKind, string>>> = { mamba2: "Granite 4.0-H's Mamba-2 layers" };

/** Throws `unsupported_arch` for a model with a layer kind the GPU pass does not run yet (GPU_PENDING). */
export function refuseGpuPending(config: ModelConfig): void {
  for (let l = 0; l < config.numLayers; l++) {
    const what = GPU_PENDING[layerBlocks(config, l).mixer];
    if (what) throw new ModelError('unsupported_arch', `${config.arch}: ${what} are not run by the GPU engine yet`, 'layer_types');
  }
}

const pending = (b: BlockBuilder): Promise<Block> => {
  refuseGpuPending(b.config);
  throw new Error('unreachable: a pending kind is refused above');
};

export const BLOCK_KINDS: Readonly<Record<MixerKind | FfnKind, (b: BlockBuilder, layer: number) => Promise<Block>>> = {
  attention: createAttentionBlock,
  shortconv: createShortConvBlock,
  deltanet: createDeltaNetBlock,
  mamba2: pending,
  mlp: createMlpBlock,
  moe: createMoeBlock,
};
