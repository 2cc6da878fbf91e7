/**
 * The block kinds of the GPU forward pass, one row each: the kinds `layerBlocks` (src/model/config.ts)
 * names for a layer, each built by its own file here. A new kind (a recurrent mixer, another FFN)
 * is its file, its row here, its name in LayerBlocks and its paragraph in the CPU reference.
 */
import type { FfnKind, MixerKind } from '../../model/config';
import { createAttentionBlock } from './attention';
import { createDeltaNetBlock } from './deltanet';
import type { Block, BlockBuilder } from './block';
import { createMamba2Block } from './mamba2';
import { createMlpBlock } from './mlp';
import { createMoeBlock } from './moe';
import { createShortConvBlock } from './shortconv';

export const BLOCK_KINDS: Readonly<Record<MixerKind | FfnKind, (b: BlockBuilder, layer: number) => Promise<Block>>> = {
  attention: createAttentionBlock,
  shortconv: createShortConvBlock,
  deltanet: createDeltaNetBlock,
  mamba2: createMamba2Block,
  mlp: createMlpBlock,
  moe: createMoeBlock,
};
