/**
 * BERT encoders (all-MiniLM, bge, gte, e5: HF `bert`, GGUF arch `bert`): their config and their
 * tensors under both names. An encoder is not a row of the decoder table (./arch.ts): learned
 * positions and token types, LayerNorm with biases after each residual add, bidirectional
 * attention, a plain GELU FFN with biases. The CPU reference is src/reference/bert.ts.
 */
import { ModelError } from './errors';

export interface BertConfig {
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  intermediateSize: number;
  /** Learned positions: the most tokens an input may have. */
  maxPositionEmbeddings: number;
  /** Rows of the token-type embedding (2: segments A and B; inputs here are all A). */
  typeVocabSize: number;
  layerNormEps: number;
}

type Json = Record<string, unknown>;

/** config.json of a `bert` model; anything this encoder does not run is refused naming its key. */
export function bertConfigFromHF(json: Json): BertConfig {
  const int = (key: string, fallback?: number): number => {
    const v = json[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) throw new ModelError('invalid_field', `config.json: ${key} must be a positive integer, got ${JSON.stringify(v)}`, key);
    return v;
  };
  // transformers' "gelu" is the exact (erf) one; BERT's other activations are not run here.
  if ((json.hidden_act ?? 'gelu') !== 'gelu') throw new ModelError('invalid_field', `config.json: hidden_act ${JSON.stringify(json.hidden_act)} is not supported (gelu is)`, 'hidden_act');
  if ((json.position_embedding_type ?? 'absolute') !== 'absolute')
    throw new ModelError('invalid_field', `config.json: position_embedding_type ${JSON.stringify(json.position_embedding_type)} is not supported (absolute is)`, 'position_embedding_type');
  const eps = json.layer_norm_eps ?? 1e-12;
  if (typeof eps !== 'number' || !(eps > 0)) throw new ModelError('invalid_field', `config.json: layer_norm_eps must be a positive number, got ${JSON.stringify(eps)}`, 'layer_norm_eps');
  const config = {
    vocabSize: int('vocab_size'),
    hiddenSize: int('hidden_size'),
    numLayers: int('num_hidden_layers'),
    numHeads: int('num_attention_heads'),
    intermediateSize: int('intermediate_size'),
    maxPositionEmbeddings: int('max_position_embeddings', 512),
    typeVocabSize: int('type_vocab_size', 2),
    layerNormEps: eps,
  };
  if (config.hiddenSize % config.numHeads !== 0) throw new ModelError('invalid_field', `config.json: num_attention_heads (${config.numHeads}) must divide hidden_size (${config.hiddenSize})`, 'num_attention_heads');
  return config;
}

/** A `bert` GGUF's metadata, as llama.cpp's converter writes it. */
export function bertConfigFromGGUF(meta: Map<string, unknown>): BertConfig {
  const get = (key: string, fallback?: number): number => {
    const v = meta.get(key) ?? fallback;
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n !== 'number' || !(n > 0)) throw new ModelError(v === undefined ? 'missing_field' : 'invalid_field', `GGUF ${key} must be a positive number, got ${String(v)}`, key);
    return n;
  };
  const tokens = meta.get('tokenizer.ggml.tokens');
  return {
    vocabSize: Array.isArray(tokens) ? tokens.length : get('bert.vocab_size'),
    hiddenSize: get('bert.embedding_length'),
    numLayers: get('bert.block_count'),
    numHeads: get('bert.attention.head_count'),
    intermediateSize: get('bert.feed_forward_length'),
    maxPositionEmbeddings: get('bert.context_length'),
    typeVocabSize: get('tokenizer.ggml.token_type_count', 2),
    layerNormEps: get('bert.attention.layer_norm_epsilon'),
  };
}

/** One tensor of a BERT encoder: its key in the weights, HF and llama.cpp names (`{l}` the layer), shape. */
export interface BertTensor {
  field: BertField;
  hf: string;
  gguf: string;
  shape(c: BertConfig): number[];
}

const LINEARS = [
  ['q', 'attention.self.query', 'attn_q'],
  ['k', 'attention.self.key', 'attn_k'],
  ['v', 'attention.self.value', 'attn_v'],
  ['o', 'attention.output.dense', 'attn_output'],
  ['up', 'intermediate.dense', 'ffn_up'],
  ['down', 'output.dense', 'ffn_down'],
] as const;
const NORMS = [
  ['attnNorm', 'attention.output.LayerNorm', 'attn_output_norm'],
  ['ffnNorm', 'output.LayerNorm', 'layer_output_norm'],
] as const;

type Linear = (typeof LINEARS)[number][0];
type Norm = (typeof NORMS)[number][0];
export type BertField = 'wordEmbd' | 'posEmbd' | 'typeEmbd' | 'embdNorm' | 'embdNormBias' | Linear | `${Linear}Bias` | Norm | `${Norm}Bias`;

const out = (f: Linear, c: BertConfig) => (f === 'up' ? c.intermediateSize : c.hiddenSize);
const inp = (f: Linear, c: BertConfig) => (f === 'down' ? c.intermediateSize : c.hiddenSize);

/** The embedding tensors, in file order. */
export const BERT_HEAD_TENSORS: readonly BertTensor[] = [
  { field: 'wordEmbd', hf: 'embeddings.word_embeddings.weight', gguf: 'token_embd.weight', shape: (c) => [c.vocabSize, c.hiddenSize] },
  { field: 'posEmbd', hf: 'embeddings.position_embeddings.weight', gguf: 'position_embd.weight', shape: (c) => [c.maxPositionEmbeddings, c.hiddenSize] },
  { field: 'typeEmbd', hf: 'embeddings.token_type_embeddings.weight', gguf: 'token_types.weight', shape: (c) => [c.typeVocabSize, c.hiddenSize] },
  { field: 'embdNorm', hf: 'embeddings.LayerNorm.weight', gguf: 'token_embd_norm.weight', shape: (c) => [c.hiddenSize] },
  { field: 'embdNormBias', hf: 'embeddings.LayerNorm.bias', gguf: 'token_embd_norm.bias', shape: (c) => [c.hiddenSize] },
];

/** Each layer's tensors (HF under `encoder.layer.{l}.`, GGUF under `blk.{l}.`). */
export const BERT_LAYER_TENSORS: readonly BertTensor[] = [
  ...LINEARS.flatMap(([field, hf, gguf]): BertTensor[] => [
    { field, hf: `${hf}.weight`, gguf: `${gguf}.weight`, shape: (c) => [out(field, c), inp(field, c)] },
    { field: `${field}Bias`, hf: `${hf}.bias`, gguf: `${gguf}.bias`, shape: (c) => [out(field, c)] },
  ]),
  ...NORMS.flatMap(([field, hf, gguf]): BertTensor[] => [
    { field, hf: `${hf}.weight`, gguf: `${gguf}.weight`, shape: (c) => [c.hiddenSize] },
    { field: `${field}Bias`, hf: `${hf}.bias`, gguf: `${gguf}.bias`, shape: (c) => [c.hiddenSize] },
  ]),
];

/**
 * The llama.cpp name of an HF BERT tensor (a sentence-transformers folder's bare names, or a
 * `bert.`-prefixed checkpoint's), or null for one the encoder does not use (the pooler, an MLM head).
 */
export function bertCanonicalName(name: string): string | null {
  const bare = name.replace(/^bert\./, '');
  const head = BERT_HEAD_TENSORS.find((t) => t.hf === bare);
  if (head) return head.gguf;
  const m = /^encoder\.layer\.(\d+)\.(.+)$/.exec(bare);
  const row = m && BERT_LAYER_TENSORS.find((t) => t.hf === m[2]);
  return row ? `blk.${m![1]}.${row.gguf}` : null;
}
