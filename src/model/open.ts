/**
 * openModel(): one entry point for every place a model can be: a GGUF file (URL, path or byte
 * source) or a Hugging Face folder of safetensors. It reads headers only; tensors are read on
 * demand through each tensor's own byte source.
 */
import { readGGUF, type GGUFFile } from '../formats/gguf';
import { dequantize } from '../formats/quants';
import { readSafetensors, readSafetensorsIndex } from '../formats/safetensors';
import { fileSource, httpSource, type ByteSource } from '../formats/source';
import { elementCount, type TensorInfo } from '../formats/types';
import type { ModelConfig } from './config';
import { configFromGGUF } from './config-gguf';
import { configFromHF, isBidirectionalConfig } from './config-hf';
import { denseTensorsInFolder, embeddingFromFolder } from './embedding';
import { ModelError } from './errors';
import { isLocalPath, openFolder, readJson, toLocalPath, type Folder } from './folder';
import { canonicalName, expertPiece, fusedTensors, ggufCanonicalName, ggufReshaped, layerRow, mtpTensors, validateTensors } from './tensors';
import { openVisionInFolder, type OpenedVisionTower } from './vision-open';
import { towerConfigFromHF } from '../vision/tower';
import type { ModelLocation, OpenedTensor } from './location';

export type { ModelLocation, OpenedTensor } from './location';


export interface OpenedModel {
  config: ModelConfig;
  format: 'gguf' | 'safetensors';
  /** Keyed by canonical (llama.cpp) name. */
  tensors: Map<string, OpenedTensor>;
  tokenizer: {
    /** tokenizer.json of a Hugging Face folder. */
    json?: object;
    /** tokenizer_config.json of a Hugging Face folder. */
    config?: object;
    /** A GGUF file's metadata (its `tokenizer.ggml.*` keys describe the vocabulary). */
    gguf?: Map<string, unknown>;
  };
  chatTemplate: string | null;
  /** generation_config.json of a Hugging Face folder (sampling defaults such as temperature, top_p). */
  generationConfig?: Record<string, unknown>;
  /** Llama 3 rope scaling as GGUF stores it (`rope_freqs.weight`): per-frequency divisors. */
  ropeFreqFactors?: Float32Array;
  /**
   * The vision tower an HF Idefics3 / SmolVLM folder carries (`model.vision_model.*`,
   * `model.connector.*`, preprocessor_config.json): engines load it as they would an mmproj.
   */
  vision?: OpenedVisionTower;
  /** The tensor's bytes as stored. */
  readTensor(name: string): Promise<Uint8Array>;
  /** The tensor's values as float32, dequantised. */
  readTensorF32(name: string): Promise<Float32Array>;
}


export async function openModel(location: ModelLocation): Promise<OpenedModel> {
  const at = await resolveLocation(location);
  return 'folder' in at ? openHFFolder(at.folder) : openGGUF(at.gguf);
}

/**
 * What a location holds, opened: a GGUF file's byte source (a `.gguf` URL or path, or a
 * ByteSource) or a folder (any other URL or path, or a Folder). The encoder's reader shares it.
 */
export async function resolveLocation(location: ModelLocation): Promise<{ gguf: ByteSource } | { folder: Folder }> {
  if (typeof location === 'object' && !(location instanceof URL)) {
    if (isFolder(location)) return { folder: location };
    if (typeof location.read !== 'function' || typeof location.size !== 'function')
      throw new ModelError('bad_location', 'openModel() takes a URL, a path, a ByteSource or a Folder');
    return { gguf: location };
  }
  const loc = location.toString();
  if (/\.gguf$/i.test(loc.replace(/[?#].*$/, ''))) return { gguf: isLocalPath(loc) ? fileSource(await toLocalPath(loc)) : httpSource(loc) };
  return { folder: await openFolder(loc) };
}

function isFolder(x: ByteSource | Folder): x is Folder {
  return typeof (x as Folder).source === 'function' && typeof (x as Folder).text === 'function';
}

const openGGUF = async (src: ByteSource): Promise<OpenedModel> => openParsedGGUF(src, await readGGUF(src));

/** A GGUF whose header was read already (the encoder's reader looks at its architecture first). */
export async function openParsedGGUF(src: ByteSource, gguf: GGUFFile): Promise<OpenedModel> {
  const config = configFromGGUF(gguf.metadata, gguf.tensors);
  const tensors = new Map<string, OpenedTensor>();
  // A family's own names (ArchInfo.ggufTensorNames: LFM2's final norm is token_embd_norm) under the canonical ones.
  for (const info of gguf.tensors) tensors.set(ggufCanonicalName(config.arch, info.name), { info, source: src });
  // Mamba-2's ssm_a, ssm_d ([heads, 1]) and grouped norm ([groups, inner / groups]) read as the table's shapes.
  for (const [name, { file, shape }] of ggufReshaped(config)) {
    const t = tensors.get(name);
    if (t && t.info.shape.join() === file.join()) tensors.set(name, { ...t, info: { ...t.info, shape } });
  }
  const template = gguf.metadata.get('tokenizer.chat_template');
  return finish({
    config,
    format: 'gguf',
    tensors,
    tokenizer: { gguf: gguf.metadata },
    chatTemplate: typeof template === 'string' ? template : null,
  });
}

async function openHFFolder(folder: Folder): Promise<OpenedModel> {
  const [configJson, generationJson, tokenizerJson, tokenizerConfig, templateFile, indexJson] = await Promise.all([
    readJson(folder, 'config.json', true),
    readJson(folder, 'generation_config.json', false),
    readJson(folder, 'tokenizer.json', false),
    readJson(folder, 'tokenizer_config.json', false),
    folder.text('chat_template.jinja'),
    readJson(folder, 'model.safetensors.index.json', false),
  ]);
  // A sentence-transformers folder (Qwen3-Embedding, BERT) says how its rows are pooled.
  const embedding = await embeddingFromFolder(folder);
  // Dense modules run on the BERT encoder and EmbeddingGemma (bidirectional); a decoder's hidden-states channel has none.
  if (embedding?.dense && !isBidirectionalConfig(configJson!))
    throw new ModelError('invalid_field', `${folder.name}: sentence-transformers Dense modules are supported on BERT encoders and EmbeddingGemma only`, 'modules.json');
  const config = { ...configFromHF(configJson, generationJson ?? undefined), ...(embedding ? { embedding } : {}) };

  // A sharded checkpoint lists its shards in the index; otherwise there is one model.safetensors.
  const shardFiles = indexJson ? shardsOf(indexJson) : ['model.safetensors'];
  const tensors = new Map<string, OpenedTensor>();
  // Mixture-of-experts checkpoints store each expert's matrices apart: stacked below.
  const pieces = new Map<string, OpenedTensor[]>();
  // Every tensor as stored, for the vision tower (its names are not the text model's).
  const stored: OpenedTensor[] = [];
  await Promise.all(
    shardFiles.map(async (file) => {
      const source = folder.source(file);
      const { tensors: infos } = await readSafetensors(source);
      for (const info of infos) {
        stored.push({ info, source });
        const name = canonicalName(info.name, config);
        // A depthwise Conv1d's [channels, 1, taps] reads as the table's [channels, taps] (hfSqueezed).
        const squeeze = name && layerRow(name)?.hfSqueezed && info.shape.length === 3 && info.shape[1] === 1;
        if (name) tensors.set(name, { info: squeeze ? { ...info, shape: [info.shape[0]!, info.shape[2]!] } : info, source });
        const piece = config.moe ? expertPiece(info.name) : null;
        if (piece && piece.expert < config.moe!.numExperts) {
          const list = pieces.get(piece.name) ?? [];
          list[piece.expert] = { info, source };
          pieces.set(piece.name, list);
        }
      }
    }),
  );
  for (const [name, list] of pieces) tensors.set(name, stackExperts(name, list, config.moe!.numExperts));
  for (const [name, t] of await denseTensorsInFolder(folder, embedding?.dense ?? [])) tensors.set(name, t);
  const vision = configJson && towerConfigFromHF(configJson) ? await openVisionInFolder(folder, configJson, stored) : undefined;

  return finish({
    config,
    format: 'safetensors',
    tensors,
    tokenizer: { json: tokenizerJson ?? undefined, config: tokenizerConfig ?? undefined },
    chatTemplate: templateFile ?? hfChatTemplate(tokenizerConfig),
    generationConfig: generationJson ?? undefined,
    ...(vision ? { vision } : {}),
  });
}

/**
 * One tensor [experts, ...] from each expert's own (a Hugging Face MoE checkpoint's
 * `mlp.experts.{e}.*`), read through a byte source that concatenates theirs in expert order: the
 * same bytes as GGUF's stacked tensor of that type. Every expert must be there, all of one type
 * and shape.
 */
function stackExperts(name: string, list: OpenedTensor[], numExperts: number): OpenedTensor {
  const first = list.find((t) => t !== undefined)!;
  for (let e = 0; e < numExperts; e++) {
    const t = list[e];
    if (!t) throw new ModelError('missing_tensor', `tensor ${first.info.name.replace(/experts\.\d+\./, `experts.${e}.`)} is missing (expert ${e} of ${numExperts} for ${name})`, name);
    if (t.info.dtype !== first.info.dtype || t.info.shape.join() !== first.info.shape.join())
      throw new ModelError(
        'tensor_shape',
        `tensor ${t.info.name} is ${t.info.dtype} [${t.info.shape.join(', ')}], unlike ${first.info.name} (${first.info.dtype} [${first.info.shape.join(', ')}]): experts must match`,
        name,
      );
  }
  const parts = list.slice(0, numExperts);
  const each = first.info.byteLength;
  const source: ByteSource = {
    name: `${first.source.name} (${name}: ${numExperts} experts)`,
    size: async () => each * numExperts,
    async read(offset, length) {
      const out = new Uint8Array(length);
      for (let e = Math.floor(offset / each); e < numExperts && e * each < offset + length; e++) {
        const from = Math.max(offset, e * each);
        const to = Math.min(offset + length, (e + 1) * each);
        const p = parts[e]!;
        out.set(await p.source.read(p.info.offset + from - e * each, to - from), from - offset);
      }
      return out;
    },
  };
  const info: TensorInfo = {
    name: first.info.name.replace(/experts\.\d+\./, 'experts.*.'),
    dtype: first.info.dtype,
    shape: [numExperts, ...first.info.shape],
    offset: 0,
    byteLength: each * numExperts,
  };
  return { info, source };
}

/** The distinct shard files named by a model.safetensors.index.json, in first-use order. */
function shardsOf(index: Record<string, unknown>): string[] {
  const { files } = readSafetensorsIndex(index);
  for (const f of files) {
    // Shard names are bare file names; refuse anything that could climb out of the folder.
    if (f.includes('..') || f.startsWith('/'))
      throw new ModelError('invalid_field', `model.safetensors.index.json names a bad shard file ${JSON.stringify(f)}`, 'weight_map');
  }
  return files;
}

/** tokenizer_config.json's chat_template: a string, or a list of named templates (take "default"). */
function hfChatTemplate(tokenizerConfig: Record<string, unknown> | null): string | null {
  const t = tokenizerConfig?.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t as { name?: unknown; template?: unknown }[];
    const pick = named.find((x) => x.name === 'default') ?? named[0];
    return typeof pick?.template === 'string' ? pick.template : null;
  }
  return null;
}

type Parts = Pick<OpenedModel, 'config' | 'format' | 'tensors' | 'tokenizer' | 'chatTemplate' | 'generationConfig' | 'vision'>;

/**
 * Splits the fused matrices some checkpoints hold (Phi-3's q/k/v and gate/up) by rows into the
 * per-projection tensors every family has: each part is a byte range of the fused tensor (whole
 * rows, so whole quant blocks), so nothing is copied or re-quantised. The GPU and the reference
 * then see the same per-projection matrices as for Llama. (If the engine later concatenates
 * projections into one matrix itself, this split and that concatenation compose: it still
 * receives the usual parts.)
 */
function splitFused(config: ModelConfig, tensors: Map<string, OpenedTensor>): void {
  for (let l = 0; l < config.numLayers; l++) {
    for (const f of fusedTensors(config, l)) {
      const t = tensors.get(f.name);
      const rows = f.parts.reduce((n, p) => n + p.rows, 0);
      // A file may hold the projections split already; then there is nothing to do.
      if (!t || (t.info.shape[0] !== rows && f.parts.some((p) => p.name === f.name))) continue;
      const [got, cols] = t.info.shape;
      if (t.info.shape.length !== 2 || got !== rows || cols !== config.hiddenSize)
        throw new ModelError('tensor_shape', `tensor ${t.info.name} has shape [${t.info.shape.join(', ')}], expected [${rows}, ${config.hiddenSize}] (fused ${f.parts.map((p) => p.name.split('.').slice(2).join('.')).join(' + ')})`, f.name);
      const rowBytes = t.info.byteLength / rows;
      if (!Number.isInteger(rowBytes)) throw new ModelError('tensor_shape', `tensor ${t.info.name} cannot be split into rows (${t.info.byteLength} bytes for ${rows} rows)`, f.name);
      tensors.delete(f.name);
      let row = 0;
      for (const p of f.parts) {
        const info = { ...t.info, shape: [p.rows, cols], offset: t.info.offset + row * rowBytes, byteLength: p.rows * rowBytes };
        tensors.set(p.name, { info, source: t.source });
        row += p.rows;
      }
    }
  }
}

/** Validates the tensors against the config and adds the readers. */
async function finish(parts: Parts): Promise<OpenedModel> {
  splitFused(parts.config, parts.tensors);
  const { tensors } = parts;
  let { config } = parts;
  // An embedding model saved from the bare model (Qwen3-Embedding-8B) has no LM head, whatever
  // tie_word_embeddings says: its head is never run (src/engine/forward/head.ts), so the
  // embedding stands in and nothing more is uploaded.
  if (config.embedding && !config.tieWordEmbeddings && !tensors.has('output.weight')) config = { ...config, tieWordEmbeddings: true };
  // A config stating an MTP head whose tensors the file left out (converters and exports that
  // drop it) loads without one.
  const mtpFc = mtpTensors(config).find((t) => t.row.field === 'fc');
  if (mtpFc && !tensors.has(mtpFc.name)) config = { ...config, mtpLayers: 0 };
  validateTensors(
    config,
    new Map([...tensors].map(([name, t]) => [name, t.info])),
  );

  const get = (name: string): OpenedTensor => {
    const t = tensors.get(name);
    if (!t) throw new ModelError('missing_tensor', `tensor ${name} is not in this model`, name);
    return t;
  };
  const readTensor = (name: string): Promise<Uint8Array> => {
    const { info, source } = get(name);
    return source.read(info.offset, info.byteLength);
  };
  const readTensorF32 = async (name: string): Promise<Float32Array> => {
    const { info } = get(name);
    return dequantize(info.dtype, await readTensor(name), elementCount(info.shape));
  };

  // GGUF LongRoPE: its factor lists live in two tensors (config.json states them inline).
  const s = config.ropeScaling;
  if (s?.type === 'longrope' && s.longFactor.length === 0) {
    const [longFactor, shortFactor] = await Promise.all(['rope_factors_long.weight', 'rope_factors_short.weight'].map(async (n) => Array.from(await readTensorF32(n))));
    config = { ...config, ropeScaling: { ...s, longFactor: longFactor!, shortFactor: shortFactor! } };
  }
  const model: OpenedModel = { ...parts, config, readTensor, readTensorF32 };
  if (tensors.has('rope_freqs.weight')) model.ropeFreqFactors = await readTensorF32('rope_freqs.weight');
  return model;
}
