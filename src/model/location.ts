/**
 * Where a model is and what a tensor of it is, apart from the loaders (open.ts for the text model,
 * vision-open.ts for a vision tower, which open.ts calls on an HF SmolVLM folder).
 */
import type { ByteSource } from '../formats/source';
import type { TensorInfo } from '../formats/types';
import type { Folder } from './folder';

export interface OpenedTensor {
  /** `info.name` is the name in the file; the map key is the canonical name. */
  info: TensorInfo;
  source: ByteSource;
}

/**
 * A URL or path to a `.gguf` file or a Hugging Face folder, a byte source over a GGUF file, or a
 * Folder whose files come from elsewhere (the loader's cache, files the user picked).
 */
export type ModelLocation = string | URL | ByteSource | Folder;
