/**
 * The targets' names in each format, read from the model's tensor table: PEFT names a module
 * (`self_attn.q_proj`, or a family's own name for it: LFM2's `self_attn.out_proj`,
 * `feed_forward.w1`), llama.cpp a tensor (`attn_q.weight`); the row gives the shape, whether the
 * rows are rotary (q/k, permuted in `llama` GGUF files) and which layers hold it.
 */
import { ARCH, ARCHES, type Arch } from '../model/arch';
import { layerBlocks, type ModelConfig } from '../model/config';
import { LAYER_TENSORS, type TensorRow } from '../model/tensors';
import { LORA_TARGETS, type LoraTarget } from './types';

/** Each target's row of the tensor table (its field). */
const ROW_OF: Record<LoraTarget, string> = {
  q: 'wq',
  k: 'wk',
  v: 'wv',
  o: 'wo',
  gate: 'wGate',
  up: 'wUp',
  down: 'wDown',
  conv_in: 'convIn',
  conv_out: 'convOut',
  dn_qkv: 'dnQkv',
  dn_z: 'dnZ',
  dn_b: 'dnBeta',
  dn_a: 'dnAlpha',
  dn_out: 'dnOut',
  mb_in: 'mbIn',
  mb_out: 'mbOut',
};

export interface TargetInfo {
  target: LoraTarget;
  row: TensorRow;
  /** PEFT's module name within a layer: `self_attn.q_proj`. */
  peftModule: string;
  /** Every family's PEFT module names of it: the table's and the families' own (ArchInfo.hfTensorNames). */
  peftModules: readonly string[];
  /** PEFT's `target_modules` entries: `q_proj` (LFM2's `out_proj` for o). */
  peftNames: readonly string[];
  /** llama.cpp's tensor within a layer: `attn_q.weight`. */
  ggufTensor: string;
}

const moduleOf = (hfName: string) => hfName.replace(/\.weight$/, '');

export const TARGETS: readonly TargetInfo[] = LORA_TARGETS.map((target) => {
  const row = LAYER_TENSORS.find((r) => r.field === ROW_OF[target])! as TensorRow;
  const peftModule = moduleOf(row.hf!);
  const own = ARCHES.map((a) => ARCH[a].hfTensorNames?.[row.hf!]).filter((n): n is string => n !== undefined);
  const peftModules = [...new Set([peftModule, ...own.map(moduleOf)])];
  return { target, row, peftModule, peftModules, peftNames: [...new Set(peftModules.map((m) => m.split('.').pop()!))], ggufTensor: row.gguf };
});

export const targetInfo = (t: LoraTarget): TargetInfo => TARGETS.find((x) => x.target === t)!;

/** The PEFT module name of a target in a family's checkpoints (`self_attn.out_proj` for LFM2's o). */
export function familyPeftModule(arch: Arch, t: LoraTarget): string {
  const row = targetInfo(t).row;
  return moduleOf(ARCH[arch].hfTensorNames?.[row.hf!] ?? row.hf!);
}

/** Whether layer `layer` of the model holds the target's matrix (a conv layer has no q; a MoE layer no dense gate). */
export function layerHolds(config: ModelConfig, layer: number, t: LoraTarget): boolean {
  const row = targetInfo(t).row;
  return (!row.when || row.when(config, layer)) && (!row.mixer || layerBlocks(config, layer).mixer === row.mixer);
}

/** The base matrix's [out, in] for a target. */
export function targetShape(config: ModelConfig, t: LoraTarget): [number, number] {
  const [out, inp] = targetInfo(t).row.shape(config);
  return [out!, inp!];
}

/** The canonical name of the base matrix a weight adapts: `blk.3.attn_q.weight`. */
export function baseTensorName(layer: number, t: LoraTarget): string {
  return `blk.${layer}.${targetInfo(t).ggufTensor}`;
}
