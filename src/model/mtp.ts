/**
 * A multi-token-prediction head's decoder layer seen as a one-layer model (ModelConfig.mtpLayers):
 * the trunk's config with one attention layer (no DeltaNet), whose layer 0 is the file's layer
 * numLayers, whose output norm is the head's last norm (`nextn.shared_head_norm`) and whose
 * embedding and LM head are the trunk's. Both the CPU reference (reference/mtp.ts) and the GPU
 * head (engine/mtp-head.ts) run the layer as such a model, fed the head's fc rows in place of
 * embeddings; the fc and the two input norms (mtpTensors' own rows) stay the caller's.
 */
import type { ModelConfig } from './config';
import { ModelError } from './errors';
import type { OpenedModel } from './open';
import { modelTensors, mtpTensors } from './tensors';

/** The head's decoder layer as a one-layer config. */
export function mtpLayerConfig(config: ModelConfig): ModelConfig {
  if (!config.mtpLayers) throw new ModelError('unsupported_arch', `${config.arch}: this model has no multi-token-prediction head`);
  // Qwen3.5's MoE checkpoints' heads route experts: not read yet (the dense family's only).
  if (config.moe) throw new ModelError('unsupported_arch', `${config.arch}: a mixture-of-experts MTP head is not supported`);
  return { ...config, numLayers: 1, deltaNet: null, mtpLayers: 0 };
}

/** The canonical name in the opened model of each tensor of the one-layer model. */
export function mtpLayerNames(config: ModelConfig): Map<string, string> {
  const one = mtpLayerConfig(config);
  const l = config.numLayers;
  const names = new Map<string, string>();
  for (const t of modelTensors(one)) {
    if (t.name === 'output_norm.weight') names.set(t.name, mtpTensors(config).find((m) => m.row.field === 'norm')!.name);
    else names.set(t.name, t.layer === 0 ? t.name.replace(/^blk\.0\./, `blk.${l}.`) : t.name);
  }
  return names;
}

/** The opened model's head layer as a one-layer OpenedModel (its tensors read through to the file's). */
export function mtpLayerModel(opened: OpenedModel): OpenedModel {
  const names = mtpLayerNames(opened.config);
  const tensors = new Map([...names].flatMap(([own, file]) => (opened.tensors.has(file) ? [[own, opened.tensors.get(file)!] as const] : [])));
  const file = (name: string) => names.get(name) ?? name;
  return {
    ...opened,
    config: mtpLayerConfig(opened.config),
    tensors,
    readTensor: (name) => opened.readTensor(file(name)),
    readTensorF32: (name) => opened.readTensorF32(file(name)),
  };
}
