/**
 * The block kinds of the GPU forward pass, one row each: the kinds `layerBlocks` (src/model/config.ts)
 * names for a layer, each built by its own file here. A new kind (a recurrent mixer, another FFN)
 * is its file, its row here, its name in LayerBlocks and its paragraph in the CPU reference.
 */
import { layerBlocks, type FfnKind, type MixerKind, type ModelConfig } from '../../model/config';
import { ModelError } from '../../model/errors';
import { createAttentionBlock } from './attention';
import type { Block, BlockBuilder } from './block';
import { createMlpBlock } from './mlp';
import { createMoeBlock } from './moe';
import { createShortConvBlock } from './shortconv';

/**
 * Kinds the CPU reference runs and the GPU pass does not yet (Qwen3.5's gated DeltaNet, issue
 * #29): GpuEngine.load refuses a model holding one (refuseGpuPending) before uploading anything.
 */
const GPU_PENDING: Readonly<Partial<Record<MixerKind, string>>> = { deltanet: "Qwen3.5's gated DeltaNet layers" };

/** Throws `unsupported_arch` for a model with a layer kind the GPU pass does not run yet (GPU_PENDING). */
export function refuseGpuPending(config: ModelConfig): void {
  for (let l = 0; l < config.numLayers; l++) {
    const what = GPU_PENDING[layerBlocks(config, l).mixer];
    if (what) throw new ModelError('unsupported_arch', `${config.arch}: ${what} run on the CPU reference only; the GPU engine does not run them yet`, 'layer_types');
  }
}

const pending = async (b: BlockBuilder): Promise<Block> => {
  refuseGpuPending(b.config);
  throw new Error('unreachable: refuseGpuPending threw');
};

export const BLOCK_KINDS: Readonly<Record<MixerKind | FfnKind, (b: BlockBuilder, layer: number) => Promise<Block>>> = {
  attention: createAttentionBlock,
  shortconv: createShortConvBlock,
  deltanet: pending,
  mlp: createMlpBlock,
  moe: createMoeBlock,
};
