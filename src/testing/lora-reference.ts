/**
 * The oracle of the LoRA tests: a model's float32 weights (dequantised as the reference reads
 * them) with an adapter merged in float64 (W + scale·B·A, src/lora/merge.ts), run by the CPU
 * reference forward pass. Shared by the engine, server, CLI and Chromium tests.
 */
import { openLoraWithCache } from '../lora/load';
import { mergeLora } from '../lora/merge';
import type { OpenedModel } from '../model/open';
import { modelTensors } from '../model/tensors';
import { ReferenceModel } from '../reference/forward';

/** The model's weight tensors as float32, by canonical name. */
export async function baseWeights(m: OpenedModel): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const { row, name } of modelTensors(m.config)) if (row.field && m.tensors.has(name)) out.set(name, await m.readTensorF32(name));
  return out;
}

/** The reference with the adapter at `adapter` (a URL or path; read through the loader, uncached) merged in. */
export async function mergedReference(base: OpenedModel, adapter: string, weights?: Map<string, Float32Array>): Promise<ReferenceModel> {
  const fitted = await openLoraWithCache(adapter, base.config, { cache: false });
  return ReferenceModel.fromWeights(base.config, mergeLora(base.config, weights ?? (await baseWeights(base)), fitted), base.ropeFreqFactors);
}
