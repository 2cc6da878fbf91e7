import type { ModelConfig } from './config';
import { ModelError } from './errors';

// Per-layer Hugging Face names (after `model.layers.N.`) and their llama.cpp names (after `blk.N.`).
const HF_LAYER_NAMES: Record<string, string> = {
  'input_layernorm.weight': 'attn_norm.weight',
  'self_attn.q_proj.weight': 'attn_q.weight',
  'self_attn.q_proj.bias': 'attn_q.bias',
  'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.k_proj.bias': 'attn_k.bias',
  'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.v_proj.bias': 'attn_v.bias',
  'self_attn.o_proj.weight': 'attn_output.weight',
  'self_attn.o_proj.bias': 'attn_output.bias',
  'self_attn.q_norm.weight': 'attn_q_norm.weight',
  'self_attn.k_norm.weight': 'attn_k_norm.weight',
  'post_attention_layernorm.weight': 'ffn_norm.weight',
  'mlp.gate_proj.weight': 'ffn_gate.weight',
  'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.down_proj.weight': 'ffn_down.weight',
};

const HF_GLOBAL_NAMES: Record<string, string> = {
  'model.embed_tokens.weight': 'token_embd.weight',
  'model.norm.weight': 'output_norm.weight',
  'lm_head.weight': 'output.weight',
};

/**
 * Maps a safetensors (Hugging Face) tensor name to its canonical llama.cpp name, or null for
 * tensors we do not use (e.g. `rotary_emb.inv_freq`).
 */
export function canonicalName(hfName: string): string | null {
  const global = HF_GLOBAL_NAMES[hfName];
  if (global) return global;
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hfName);
  if (!m) return null;
  const local = HF_LAYER_NAMES[m[2]];
  return local ? `blk.${m[1]}.${local}` : null;
}

export interface ExpectedTensor {
  name: string;
  /** Outermost first, as in TensorInfo (a linear layer is [out, in]). */
  shape: number[];
  /** Used when present, not required (e.g. attn_output.bias, rope_freqs.weight). */
  optional?: boolean;
}

/** Every canonical tensor the config implies, with its shape. */
export function expectedTensors(config: ModelConfig): ExpectedTensor[] {
  const { hiddenSize: d, intermediateSize: ff, headDim, numHeads, numKvHeads, vocabSize } = config;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const out: ExpectedTensor[] = [
    { name: 'token_embd.weight', shape: [vocabSize, d] },
    // llama.cpp's converter writes Llama 3 rope scaling as per-frequency divisors.
    { name: 'rope_freqs.weight', shape: [headDim / 2], optional: true },
  ];
  for (let l = 0; l < config.numLayers; l++) {
    const p = `blk.${l}.`;
    out.push({ name: p + 'attn_norm.weight', shape: [d] });
    out.push({ name: p + 'attn_q.weight', shape: [qDim, d] });
    out.push({ name: p + 'attn_k.weight', shape: [kvDim, d] });
    out.push({ name: p + 'attn_v.weight', shape: [kvDim, d] });
    if (config.attentionBias) {
      out.push({ name: p + 'attn_q.bias', shape: [qDim] });
      out.push({ name: p + 'attn_k.bias', shape: [kvDim] });
      out.push({ name: p + 'attn_v.bias', shape: [kvDim] });
    }
    if (config.qkNorm) {
      out.push({ name: p + 'attn_q_norm.weight', shape: [headDim] });
      out.push({ name: p + 'attn_k_norm.weight', shape: [headDim] });
    }
    out.push({ name: p + 'attn_output.weight', shape: [d, qDim] });
    // Llama/Qwen3 with attention_bias also bias o_proj; Qwen2 never does.
    out.push({ name: p + 'attn_output.bias', shape: [d], optional: true });
    out.push({ name: p + 'ffn_norm.weight', shape: [d] });
    out.push({ name: p + 'ffn_gate.weight', shape: [ff, d] });
    out.push({ name: p + 'ffn_up.weight', shape: [ff, d] });
    out.push({ name: p + 'ffn_down.weight', shape: [d, ff] });
  }
  out.push({ name: 'output_norm.weight', shape: [d] });
  // When tied, output.weight may still be in the file (some HF exports keep lm_head); it is ignored.
  if (!config.tieWordEmbeddings) out.push({ name: 'output.weight', shape: [vocabSize, d] });
  return out;
}

/**
 * Checks the file's tensors (canonical names) against the config: every required tensor present,
 * every shape as expected. Unknown extra tensors are ignored.
 */
export function validateTensors(config: ModelConfig, found: ReadonlyMap<string, { shape: readonly number[] }>): void {
  for (const want of expectedTensors(config)) {
    const got = found.get(want.name);
    if (!got) {
      if (want.optional) continue;
      throw new ModelError('missing_tensor', `tensor ${want.name} is missing (expected shape [${want.shape.join(', ')}])`, want.name);
    }
    if (!sameShape(got.shape, want.shape))
      throw new ModelError(
        'tensor_shape',
        `tensor ${want.name} has shape [${got.shape.join(', ')}], expected [${want.shape.join(', ')}]`,
        want.name,
      );
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
