/**
 * Whether a model is a sentence-embedding model, and how its last layer's rows become one vector.
 * A Hugging Face folder says so with sentence-transformers' files (`modules.json` naming a
 * `Pooling` module, whose `config.json` picks the mode; `sentence_bert_config.json`'s
 * `max_seq_length`), a GGUF with `{arch}.pooling_type` (llama.cpp's enum). Every embedding the API
 * returns is then L2-normalised, as sentence-transformers' `Normalize` module, llama.cpp's server
 * and OpenAI do.
 */
import { ModelError } from './errors';
import { readJson, type Folder } from './folder';
import { readSafetensors } from '../formats/safetensors';
import type { OpenedTensor } from './location';

/**
 * How the rows of an input become its vector: the mean over every token (special tokens
 * included), the first token's row (`[CLS]`), or the last token's (after the final norm: the
 * `<|endoftext|>` a Qwen3-Embedding tokenizer appends).
 */
export type Pooling = 'mean' | 'cls' | 'last';

export interface EmbeddingConfig {
  pooling: Pooling;
  /** Tokens an input may have (`max_seq_length`); null: as many as the engine's context takes. */
  maxSeqLength: number | null;
  /** sentence-transformers' Dense modules after pooling, in order (absent: none); then L2. */
  dense?: DenseModule[];
}

/**
 * One Dense module: y = act(W x + b) on the pooled vector. Its tensors are `<name>.weight`
 * [outFeatures, inFeatures] and `<name>.bias` (llama.cpp's `dense_2`, `dense_3`: the module's
 * index in modules.json, as its folder `2_Dense` is named).
 */
export interface DenseModule {
  name: string;
  inFeatures: number;
  outFeatures: number;
  bias: boolean;
  /** sentence-transformers' `activation_function`: Tanh when the config names none (Dense's default), or Identity. */
  activation: 'tanh' | 'identity';
  /** An HF folder's module folder (`2_Dense`), whose model.safetensors holds `linear.weight` and `linear.bias`. */
  path?: string;
}

/** The activations a Dense config may name (torch class paths), and what they run as. */
const DENSE_ACTIVATIONS: Record<string, DenseModule['activation']> = {
  'torch.nn.modules.activation.Tanh': 'tanh',
  'torch.nn.modules.linear.Identity': 'identity',
};

/** The vector's size after the Dense modules: the last one's outFeatures, else the hidden size. */
export const embeddingSize = (e: EmbeddingConfig | undefined, hiddenSize: number): number => e?.dense?.at(-1)?.outFeatures ?? hiddenSize;

/** llama.cpp's `enum llama_pooling_type` (0 none, 4 rank: not an embedding this API serves). */
const GGUF_POOLING: Record<number, Pooling> = { 1: 'mean', 2: 'cls', 3: 'last' };

/** `pooling_mode_*` keys of sentence-transformers' Pooling config that we run. */
const ST_POOLING: ReadonlyArray<[string, Pooling]> = [
  ['pooling_mode_mean_tokens', 'mean'],
  ['pooling_mode_cls_token', 'cls'],
  ['pooling_mode_lasttoken', 'last'],
];

/** The modes sentence-transformers has and we do not run: refused naming the key. */
const ST_REFUSED = ['pooling_mode_max_tokens', 'pooling_mode_mean_sqrt_len_tokens', 'pooling_mode_weightedmean_tokens'];

/** The GGUF's `{arch}.pooling_type`, or null (absent, none, rank): a generative model. */
export function embeddingFromGGUF(metadata: Map<string, unknown>, prefix: string): EmbeddingConfig | null {
  const raw = metadata.get(`${prefix}.pooling_type`);
  const pooling = typeof raw === 'number' || typeof raw === 'bigint' ? GGUF_POOLING[Number(raw)] : undefined;
  return pooling ? { pooling, maxSeqLength: null } : null;
}

/**
 * A sentence-transformers folder's pooling: `modules.json`'s Pooling module and its config, and
 * `sentence_bert_config.json`'s `max_seq_length`. Null without a Pooling module.
 */
export async function embeddingFromFolder(folder: Folder): Promise<EmbeddingConfig | null> {
  const modules = await readJsonList(folder, 'modules.json');
  const module = modules?.find((m) => typeof m.type === 'string' && /(^|\.)Pooling$/.test(m.type));
  if (!module) return null;
  const dir = typeof module.path === 'string' ? module.path.replace(/\/+$/, '') : '1_Pooling';
  if (dir.includes('..') || dir.startsWith('/')) throw new ModelError('invalid_field', `modules.json names a bad Pooling path ${JSON.stringify(dir)}`, 'modules.json');
  const file = `${dir ? dir + '/' : ''}config.json`;
  const [config, bert] = await Promise.all([readJson(folder, file, true), readJson(folder, 'sentence_bert_config.json', false)]);
  const on = (key: string) => config![key] === true;
  const refused = ST_REFUSED.find(on);
  if (refused) throw new ModelError('invalid_field', `${file}: ${refused} is not supported (mean, cls and last-token pooling are)`, refused);
  const modes = ST_POOLING.filter(([key]) => on(key));
  if (modes.length !== 1) throw new ModelError('invalid_field', `${file} must turn on exactly one of ${ST_POOLING.map(([k]) => k).join(', ')}`, file);
  const max = bert?.max_seq_length;
  if (max !== undefined && max !== null && !(typeof max === 'number' && Number.isInteger(max) && max > 0))
    throw new ModelError('invalid_field', `sentence_bert_config.json: max_seq_length must be a positive integer, got ${JSON.stringify(max)}`, 'max_seq_length');
  const dense = await denseFromFolder(folder, modules!);
  return { pooling: modes[0]![1], maxSeqLength: typeof max === 'number' ? max : null, ...(dense.length ? { dense } : {}) };
}

/** modules.json's Dense modules after the Pooling, each from its folder's config.json; weights in `<path>/model.safetensors`. */
async function denseFromFolder(folder: Folder, modules: Array<Record<string, unknown>>): Promise<DenseModule[]> {
  const out: DenseModule[] = [];
  for (const [i, m] of modules.entries()) {
    if (typeof m.type !== 'string' || !/(^|\.)Dense$/.test(m.type)) continue;
    const path = typeof m.path === 'string' ? m.path.replace(/\/+$/, '') : '';
    if (!path || path.includes('..') || path.startsWith('/')) throw new ModelError('invalid_field', `modules.json names a bad Dense path ${JSON.stringify(m.path)}`, 'modules.json');
    const file = `${path}/config.json`;
    const c = (await readJson(folder, file, true))!;
    const int = (key: string) => {
      const v = c[key];
      if (!(typeof v === 'number' && Number.isInteger(v) && v > 0)) throw new ModelError('invalid_field', `${file}: ${key} must be a positive integer, got ${JSON.stringify(v)}`, key);
      return v;
    };
    const fn = c.activation_function;
    const activation = fn === undefined || fn === null ? 'tanh' : DENSE_ACTIVATIONS[String(fn)];
    if (!activation) throw new ModelError('invalid_field', `${file}: activation_function ${JSON.stringify(fn)} is not supported (${Object.keys(DENSE_ACTIVATIONS).join(', ')} are)`, 'activation_function');
    const idx = typeof m.idx === 'number' ? m.idx : i;
    out.push({ name: `dense_${idx}`, path, inFeatures: int('in_features'), outFeatures: int('out_features'), bias: c.bias !== false, activation });
  }
  return out;
}

/**
 * A GGUF's Dense modules: its `dense_<n>.weight` tensors in order of n (llama.cpp's EmbeddingGemma
 * conversion writes `dense_2`, `dense_3`), with a bias where `dense_<n>.bias` is there. llama.cpp
 * applies them with no activation, so they are Identity; `hiddenSize` is the first one's input.
 */
export function denseFromGGUF(tensors: ReadonlyMap<string, { info: { shape: readonly number[] } }>, hiddenSize: number): DenseModule[] {
  const ids = [...tensors.keys()].flatMap((n) => {
    const m = /^dense_(\d+)\.weight$/.exec(n);
    return m ? [Number(m[1])] : [];
  }).sort((a, b) => a - b);
  let inFeatures = hiddenSize;
  return ids.map((n) => {
    const name = `dense_${n}`;
    const count = tensors.get(`${name}.weight`)!.info.shape.reduce((a, b) => a * b, 1);
    if (count % inFeatures !== 0) throw new ModelError('tensor_shape', `${name}.weight has ${count} values, not a multiple of its input ${inFeatures}`, `${name}.weight`);
    const m: DenseModule = { name, inFeatures, outFeatures: count / inFeatures, bias: tensors.has(`${name}.bias`), activation: 'identity' };
    inFeatures = m.outFeatures;
    return m;
  });
}

/** Each Dense module's linear layer, in its own folder (`2_Dense/model.safetensors`), under llama.cpp's `dense_<n>` names. */
export async function denseTensorsInFolder(folder: Folder, dense: readonly DenseModule[]): Promise<Map<string, OpenedTensor>> {
  const tensors = new Map<string, OpenedTensor>();
  for (const m of dense) {
    const source = folder.source(`${m.path}/model.safetensors`);
    for (const info of (await readSafetensors(source)).tensors) {
      const field = /^linear\.(weight|bias)$/.exec(info.name)?.[1];
      if (field) tensors.set(`${m.name}.${field}`, { info, source });
    }
  }
  return tensors;
}

/** A JSON file holding a list of objects (modules.json), or null when absent. */
async function readJsonList(folder: Folder, file: string): Promise<Array<Record<string, unknown>> | null> {
  const text = await folder.text(file);
  if (text === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ModelError('invalid_field', `${folder.name}/${file} is not valid JSON: ${(e as Error).message}`, file);
  }
  if (!Array.isArray(v) || !v.every((m) => m && typeof m === 'object')) throw new ModelError('invalid_field', `${folder.name}/${file} must be a list of modules`, file);
  return v as Array<Record<string, unknown>>;
}
