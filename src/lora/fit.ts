/**
 * An adapter checked against the base it is to run on, and put in that base's q/k row order.
 * Shapes are the only sign of a wrong base a PEFT adapter carries (its `base_model_name_or_path`
 * is a hint, not a contract), so every matrix is checked against the base's tensor table.
 */
import { ARCH } from '../model/arch';
import type { ModelConfig } from '../model/config';
import { permuteQK, unpermuteQK } from '../model/qk-rows';
import { targetInfo, targetShape } from './targets';
import { LoraError, type LoraAdapter, type LoraWeight } from './types';

/** How a base keeps its q/k rows: GGUF `llama` files permuted (and run with interleaved RoPE). */
export function baseQkRows(config: ModelConfig): LoraAdapter['qkRows'] {
  return config.ropeStyle === 'interleaved' ? 'interleaved' : 'halves';
}

/** Validates `adapter` for the base `config`; returns it with q/k B rows in the base's order. */
export function fitLora(adapter: LoraAdapter, config: ModelConfig): LoraAdapter {
  const fail = (code: 'wrong_base' | 'tensor_shape', detail: string): never => {
    throw new LoraError(code, adapter.file, detail);
  };
  const baseArch = ARCH[config.arch].gguf;
  if (adapter.ggufArch !== undefined && adapter.ggufArch !== baseArch)
    fail('wrong_base', `is an adapter for a "${adapter.ggufArch}" model, but the base is "${baseArch}"`);
  for (const w of adapter.weights) {
    const what = `layer ${w.layer} ${w.target}`;
    if (w.layer >= config.numLayers) fail('wrong_base', `adapts layer ${w.layer}, but the base has only ${config.numLayers} layers (0..${config.numLayers - 1}): an adapter for another base model?`);
    // A matrix this layer does not have: the dense FFN of a mixture-of-experts layer (its experts
    // are stacked matrices no adapter format here addresses). Refused, never silently skipped.
    const when = (targetInfo(w.target).row as { when?: (c: ModelConfig, layer?: number) => boolean }).when;
    if (when && !when(config, w.layer))
      throw new LoraError('unsupported_target', adapter.file, `${what}: this model has no ${w.target} matrix to adapt (a mixture-of-experts FFN: adapters of experts are not supported)`);
    const [out, inp] = targetShape(config, w.target);
    if (w.inFeatures !== inp || w.outFeatures !== out)
      fail(
        'tensor_shape',
        `${what}: A [${w.rank}, ${w.inFeatures}] and B [${w.outFeatures}, ${w.rank}] make a [${w.outFeatures}, ${w.inFeatures}] update, but the base's matrix is [${out}, ${inp}]: an adapter for another base model?`,
      );
  }
  const want = baseQkRows(config);
  if (adapter.qkRows === want) return adapter;
  const reorder = want === 'interleaved' ? permuteQK : unpermuteQK;
  const weights = adapter.weights.map((w): LoraWeight => {
    if (w.target !== 'q' && w.target !== 'k') return w;
    const heads = w.target === 'q' ? config.numHeads : config.numKvHeads;
    return { ...w, b: reorder(w.b, w.outFeatures, heads) };
  });
  return { ...adapter, qkRows: want, weights };
}
