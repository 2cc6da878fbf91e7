/**
 * The targets' names in each format, read from the model's tensor table: PEFT names a module
 * (`self_attn.q_proj`), llama.cpp a tensor (`attn_q.weight`); the row gives the shape and whether
 * the rows are rotary (q/k, permuted in `llama` GGUF files).
 */
import type { ModelConfig } from '../model/config';
import { LAYER_TENSORS, type TensorRow } from '../model/tensors';
import { LORA_TARGETS, type LoraTarget } from './types';

const ROW_OF: Record<LoraTarget, string> = {
  q: 'wq',
  k: 'wk',
  v: 'wv',
  o: 'wo',
  gate: 'wGate',
  up: 'wUp',
  down: 'wDown',
};

export interface TargetInfo {
  target: LoraTarget;
  row: TensorRow;
  /** PEFT's module name within a layer: `self_attn.q_proj`. */
  peftModule: string;
  /** PEFT's `target_modules` entry: `q_proj`. */
  peftName: string;
  /** llama.cpp's tensor within a layer: `attn_q.weight`. */
  ggufTensor: string;
}

export const TARGETS: readonly TargetInfo[] = LORA_TARGETS.map((target) => {
  const row = LAYER_TENSORS.find((r) => r.field === ROW_OF[target])! as TensorRow;
  const peftModule = row.hf!.replace(/\.weight$/, '');
  return { target, row, peftModule, peftName: peftModule.split('.').pop()!, ggufTensor: row.gguf };
});

export const targetInfo = (t: LoraTarget): TargetInfo => TARGETS.find((x) => x.target === t)!;

/** The base matrix's [out, in] for a target. */
export function targetShape(config: ModelConfig, t: LoraTarget): [number, number] {
  const [out, inp] = targetInfo(t).row.shape(config);
  return [out!, inp!];
}

/** The canonical name of the base matrix a weight adapts: `blk.3.attn_q.weight`. */
export function baseTensorName(layer: number, t: LoraTarget): string {
  return `blk.${layer}.${targetInfo(t).ggufTensor}`;
}
