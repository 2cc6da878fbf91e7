/**
 * openEncoder(): a BERT sentence encoder (all-MiniLM, bge, gte, e5) from its GGUF (arch `bert`) or
 * its Hugging Face sentence-transformers folder (config.json `model_type` "bert"). An encoder is
 * not a decoder: it has its own config (./bert.ts), no chat template, no generation config, and
 * runs through its own forward (src/engine/forward/bert.ts). Tensors are keyed by llama.cpp name,
 * read on demand. Pooling is what the files say (sentence-transformers' Pooling module, GGUF
 * `bert.pooling_type`); a BERT file that says none pools by mean, as all of these models do.
 */
import { readGGUF, type GGUFFile } from '../formats/gguf';
import { dequantize } from '../formats/quants';
import { readSafetensors } from '../formats/safetensors';
import type { ByteSource } from '../formats/source';
import { elementCount } from '../formats/types';
import { bertCanonicalName, bertConfigFromGGUF, bertConfigFromHF, BERT_HEAD_TENSORS, BERT_LAYER_TENSORS, type BertConfig } from './bert';
import { denseFromGGUF, denseTensorsInFolder, embeddingFromFolder, embeddingFromGGUF, type EmbeddingConfig } from './embedding';
import { ModelError } from './errors';
import { readJson, type Folder } from './folder';
import { openModel, openParsedGGUF, resolveLocation, type ModelLocation, type OpenedModel, type OpenedTensor } from './open';

export interface OpenedEncoder {
  kind: 'bert';
  config: BertConfig;
  embedding: EmbeddingConfig;
  format: 'gguf' | 'safetensors';
  /** Keyed by llama.cpp name. */
  tensors: Map<string, OpenedTensor>;
  /** Its tokenizer's files (tokenizer.json and tokenizer_config.json, or the GGUF's metadata): text/from-model.ts `tokenizerOf`. */
  tokenizer: OpenedModel['tokenizer'];
  readTensor(name: string): Promise<Uint8Array>;
  readTensorF32(name: string): Promise<Float32Array>;
}

/** Whether a GGUF's metadata or a folder's config.json is a BERT encoder's. */
export const isBertGGUF = (metadata: Map<string, unknown>): boolean => metadata.get('general.architecture') === 'bert';
export const isBertConfig = (json: Record<string, unknown> | null): boolean => json?.model_type === 'bert';

export async function openEncoder(location: ModelLocation): Promise<OpenedEncoder> {
  const at = await resolveLocation(location);
  return 'folder' in at ? openBertFolder(at.folder) : openBertGGUF(at.gguf);
}

/**
 * Any model the engine serves: an encoder (OpenedEncoder, `kind` set) when the GGUF's
 * architecture or the folder's config.json says BERT, else the decoder's openModel. A GGUF's
 * header is read once either way.
 */
export async function openAnyModel(location: ModelLocation): Promise<OpenedModel | OpenedEncoder> {
  const at = await resolveLocation(location);
  if ('folder' in at) return isBertConfig(await readJson(at.folder, 'config.json', false)) ? openBertFolder(at.folder) : openModel(at.folder);
  const gguf = await readGGUF(at.gguf);
  return isBertGGUF(gguf.metadata) ? openBertGGUF(at.gguf, gguf) : openParsedGGUF(at.gguf, gguf);
}

/** Whether an opened model is an encoder's (openAnyModel's answer). */
export const isEncoder = (m: OpenedModel | OpenedEncoder): m is OpenedEncoder => (m as OpenedEncoder).kind === 'bert';

async function openBertGGUF(src: ByteSource, header?: GGUFFile): Promise<OpenedEncoder> {
  const gguf = header ?? (await readGGUF(src));
  if (!isBertGGUF(gguf.metadata))
    throw new ModelError('unsupported_arch', `${src.name}: general.architecture ${JSON.stringify(gguf.metadata.get('general.architecture'))} is not a BERT encoder`, 'general.architecture');
  const config = bertConfigFromGGUF(gguf.metadata);
  const tensors = new Map<string, OpenedTensor>(gguf.tensors.map((info) => [info.name, { info, source: src }]));
  const pooled = embeddingFromGGUF(gguf.metadata, 'bert') ?? { pooling: 'mean' as const, maxSeqLength: null };
  const dense = denseFromGGUF(tensors, config.hiddenSize);
  const embedding = dense.length ? { ...pooled, dense } : pooled;
  return finish(config, embedding, 'gguf', tensors, { gguf: gguf.metadata });
}

async function openBertFolder(folder: Folder): Promise<OpenedEncoder> {
  const [configJson, tokenizerJson, tokenizerConfig, embedding] = await Promise.all([
    readJson(folder, 'config.json', true),
    readJson(folder, 'tokenizer.json', false),
    readJson(folder, 'tokenizer_config.json', false),
    embeddingFromFolder(folder),
  ]);
  if (!isBertConfig(configJson)) throw new ModelError('unsupported_arch', `config.json: model_type ${JSON.stringify(configJson!.model_type)} is not a BERT encoder`, 'model_type');
  if (!tokenizerJson) throw new ModelError('missing_file', `${folder.name}: a BERT folder needs its tokenizer.json`, 'tokenizer.json');
  const config = bertConfigFromHF(configJson!);
  const source = folder.source('model.safetensors');
  const tensors = new Map<string, OpenedTensor>();
  for (const info of (await readSafetensors(source)).tensors) {
    const name = bertCanonicalName(info.name);
    if (name) tensors.set(name, { info, source });
  }
  for (const [name, t] of await denseTensorsInFolder(folder, embedding?.dense ?? [])) tensors.set(name, t);
  return finish(config, embedding ?? { pooling: 'mean', maxSeqLength: null }, 'safetensors', tensors, { json: tokenizerJson, ...(tokenizerConfig ? { config: tokenizerConfig } : {}) });
}

function finish(config: BertConfig, embedding: EmbeddingConfig, format: 'gguf' | 'safetensors', tensors: Map<string, OpenedTensor>, tokenizer: OpenedModel['tokenizer']): OpenedEncoder {
  const want: Array<readonly [string, readonly number[]]> = [
    ...BERT_HEAD_TENSORS.map((t) => [t.gguf, t.shape(config)] as const),
    ...Array.from({ length: config.numLayers }, (_, l) => BERT_LAYER_TENSORS.map((t) => [`blk.${l}.${t.gguf}`, t.shape(config)] as const)).flat(),
  ];
  // The Dense modules after pooling: each takes what the one before gives (the first, the hidden size).
  let inFeatures = config.hiddenSize;
  for (const m of embedding.dense ?? []) {
    if (m.inFeatures !== inFeatures) throw new ModelError('tensor_shape', `Dense module ${m.name} takes ${m.inFeatures} features, but what it follows gives ${inFeatures}`, m.name);
    want.push([`${m.name}.weight`, [m.outFeatures, m.inFeatures]]);
    if (m.bias) want.push([`${m.name}.bias`, [m.outFeatures]]);
    inFeatures = m.outFeatures;
  }
  for (const [name, shape] of want) {
    const t = tensors.get(name);
    if (!t) throw new ModelError('missing_tensor', `BERT encoder: tensor ${name} is missing`, name);
    if (elementCount(t.info.shape) !== elementCount(shape)) throw new ModelError('tensor_shape', `BERT encoder: tensor ${name} has shape [${t.info.shape.join(', ')}], expected [${shape.join(', ')}]`, name);
  }
  if (embedding.pooling === 'last') throw new ModelError('invalid_field', 'a BERT encoder pools by mean or [CLS], not by the last token', 'pooling');
  const readTensor = async (name: string) => {
    const t = tensors.get(name);
    if (!t) throw new ModelError('missing_tensor', `BERT encoder: tensor ${name} is not in this model`, name);
    return t.source.read(t.info.offset, t.info.byteLength);
  };
  const readTensorF32 = async (name: string) => dequantize(tensors.get(name)!.info.dtype, await readTensor(name), elementCount(tensors.get(name)!.info.shape));
  return { kind: 'bert', config, embedding, format, tensors, tokenizer, readTensor, readTensorF32 };
}
