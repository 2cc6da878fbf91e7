/**
 * An adapter checked against the base it is to run on, and put in that base's q/k row order.
 * Shapes are the only sign of a wrong base a PEFT adapter carries (its `base_model_name_or_path`
 * is a hint, not a contract), so every matrix is checked against the base's tensor table.
 */
import { ARCH } from '../model/arch';
import { layerBlocks, type ModelConfig } from '../model/config';
import { permuteQK, unpermuteQK } from '../model/qk-rows';
import { reorderVHeads, V_HEAD_SPANS } from '../model/v-heads';
import { layerHolds, targetInfo, targetShape } from './targets';
import { LoraError, type LoraAdapter, type LoraWeight } from './types';

/** How a base keeps its q/k rows: GGUF `llama` files permuted (and run with interleaved RoPE). */
export function baseQkRows(config: ModelConfig): LoraAdapter['qkRows'] {
  return config.ropeStyle === 'interleaved' ? 'interleaved' : 'halves';
}

/**
 * Validates `adapter` for the base `config`; returns it with q/k B rows and a DeltaNet's value
 * heads (B's rows, or A's columns for dn_out) in the base's order.
 */
export function fitLora(adapter: LoraAdapter, config: ModelConfig): LoraAdapter {
  const fail = (code: 'wrong_base' | 'tensor_shape', detail: string): never => {
    throw new LoraError(code, adapter.file, detail);
  };
  // A Mamba-2 hybrid's files name their own architecture (Granite 4.0-H: granitehybrid).
  const baseArch = (config.mamba2 && ARCH[config.arch].ggufHybrid) || ARCH[config.arch].gguf;
  if (adapter.ggufArch !== undefined && adapter.ggufArch !== baseArch)
    fail('wrong_base', `is an adapter for a "${adapter.ggufArch}" model, but the base is "${baseArch}"`);
  for (const w of adapter.weights) {
    const what = `layer ${w.layer} ${w.target}`;
    if (w.layer >= config.numLayers) fail('wrong_base', `adapts layer ${w.layer}, but the base has only ${config.numLayers} layers (0..${config.numLayers - 1}): an adapter for another base model?`);
    // A matrix this layer does not have: the dense FFN of a mixture-of-experts layer (its experts
    // are stacked matrices no adapter format here addresses), attention's on a hybrid's recurrent
    // layer, a recurrent layer's elsewhere. Refused, never silently skipped.
    if (!layerHolds(config, w.layer, w.target)) {
      const why = targetInfo(w.target).row.mixer || w.target.includes('_') ? `layer ${w.layer}'s token mixer is ${layerBlocks(config, w.layer).mixer}` : 'a mixture-of-experts FFN: adapters of experts are not supported';
      throw new LoraError('unsupported_target', adapter.file, `${what}: this model has no ${w.target} matrix to adapt (${why})`);
    }
    const [out, inp] = targetShape(config, w.target);
    if (w.inFeatures !== inp || w.outFeatures !== out)
      fail(
        'tensor_shape',
        `${what}: A [${w.rank}, ${w.inFeatures}] and B [${w.outFeatures}, ${w.rank}] make a [${w.outFeatures}, ${w.inFeatures}] update, but the base's matrix is [${out}, ${inp}]: an adapter for another base model?`,
      );
  }
  const want = baseQkRows(config);
  const d = config.deltaNet;
  const vHeads = d?.vHeadOrder ?? adapter.vHeadOrder;
  if (adapter.qkRows === want && adapter.vHeadOrder === vHeads) return adapter;
  const reorder = want === 'interleaved' ? permuteQK : unpermuteQK;
  const weights = adapter.weights.map((w): LoraWeight => {
    if ((w.target === 'q' || w.target === 'k') && adapter.qkRows !== want) {
      const heads = w.target === 'q' ? config.numHeads : config.numKvHeads;
      return { ...w, b: reorder(w.b, w.outFeatures, heads) };
    }
    const span = d && V_HEAD_SPANS[targetInfo(w.target).ggufTensor];
    if (!span) return w;
    // W = B·A: W's rows are B's, its columns A's.
    return span.dim === 'rows'
      ? { ...w, b: reorderVHeads(w.b, w.outFeatures, w.rank, span, d, adapter.vHeadOrder, vHeads) }
      : { ...w, a: reorderVHeads(w.a, w.rank, w.inFeatures, span, d, adapter.vHeadOrder, vHeads) };
  });
  return { ...adapter, qkRows: want, vHeadOrder: vHeads, weights };
}
