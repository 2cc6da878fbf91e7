/**
 * One in-memory form for a LoRA adapter, whatever file it came from (a PEFT folder or a llama.cpp
 * GGUF), and the one error its readers and checks throw.
 */

/**
 * The linear layers an adapter may target: attention's and the MLP's seven matrices, and the
 * recurrent layers' projections (LFM2's short convolution: conv_in, conv_out; Qwen3.5's gated
 * DeltaNet: dn_qkv, dn_z, dn_b, dn_a, dn_out; Granite 4.0-H's Mamba-2: mb_in, mb_out). A layer holds
 * those of its own blocks.
 */
export const LORA_TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down', 'conv_in', 'conv_out', 'dn_qkv', 'dn_z', 'dn_b', 'dn_a', 'dn_out', 'mb_in', 'mb_out'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/** One adapted matrix W [out, in]: its effective weight is W + scale · B · A. */
export interface LoraWeight {
  layer: number;
  target: LoraTarget;
  rank: number;
  inFeatures: number;
  outFeatures: number;
  /** [rank, inFeatures], row-major. */
  a: Float32Array;
  /** [outFeatures, rank], row-major; for q/k its rows are in the adapter's `qkRows` order, for dn_* in its `vHeadOrder`. */
  b: Float32Array;
  /** alpha / rank, or alpha / sqrt(rank) with rsLoRA (PEFT's `scaling`). */
  scale: number;
}

export interface LoraAdapter {
  /** Where it came from (a folder, a URL, a path), for messages. */
  name: string;
  /** The file holding the tensors (errors about them name it). */
  file: string;
  format: 'peft' | 'gguf';
  /**
   * The row order of q and k (and so of their B matrices): 'halves' as in HF checkpoints,
   * 'interleaved' as llama.cpp writes `llama` files (see model/qk-rows.ts).
   */
  qkRows: 'halves' | 'interleaved';
  /**
   * The order of a DeltaNet's value heads in the dn_* matrices (DeltaNetConfig.vHeadOrder):
   * 'grouped' as in HF checkpoints (PEFT), 'tiled' as llama.cpp writes `qwen35` files.
   */
  vHeadOrder: 'grouped' | 'tiled';
  /** `general.architecture` of a GGUF adapter (llama.cpp refuses a base of another one). */
  ggufArch?: string;
  /** Sorted by layer, then target in LORA_TARGETS order. */
  weights: LoraWeight[];
}

export type LoraErrorCode =
  | 'not_an_adapter' // the file is a model (or something else), not a LoRA adapter
  | 'invalid_config' // adapter_config.json or the GGUF metadata is missing a key or has a bad value
  | 'unsupported_option' // DoRA, biases, aLoRA, modules_to_save, ...
  | 'unsupported_target' // embeddings, lm_head, norms, or a module we do not know
  | 'missing_tensor' // lora_A without its lora_B (or the other way round)
  | 'tensor_shape' // A/B shapes disagree with each other, the rank, or the base (wrong base)
  | 'wrong_base'; // a GGUF adapter for another architecture, a layer the base does not have

/** Every adapter failure: `file` names the adapter file at fault, `message` says what is wrong. */
export class LoraError extends Error {
  override readonly name = 'LoraError';
  constructor(
    readonly code: LoraErrorCode,
    readonly file: string,
    readonly detail: string,
  ) {
    super(`${file}: ${detail}`);
  }

  toJSON(): { name: string; code: LoraErrorCode; file: string; message: string } {
    return { name: this.name, code: this.code, file: this.file, message: this.message };
  }
}

/** Sorts weights by layer, then by target in LORA_TARGETS order. */
export function sortWeights(weights: LoraWeight[]): LoraWeight[] {
  const order = (t: LoraTarget) => LORA_TARGETS.indexOf(t);
  return weights.sort((x, y) => x.layer - y.layer || order(x.target) - order(y.target));
}
