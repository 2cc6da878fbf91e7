/**
 * openVisionTower(): a vision tower from either form a model ships it in: llama.cpp's mmproj GGUF
 * (`clip.projector_type` "idefics3", beside the text GGUF) or a Hugging Face
 * `Idefics3ForConditionalGeneration` / SmolVLM folder (config.json's vision_config and scale_factor,
 * preprocessor_config.json, the `model.vision_model.*` and `model.connector.*` tensors). Headers
 * only; tensors are read on demand, under their canonical (mmproj) names.
 */
import { readGGUF } from '../formats/gguf';
import { dequantize } from '../formats/quants';
import { readSafetensors } from '../formats/safetensors';
import { fileSource, httpSource, type ByteSource } from '../formats/source';
import { elementCount } from '../formats/types';
import { settingsFromGGUF, settingsFromHF, type ImageProcessorSettings } from '../vision/settings';
import { towerConfigFromGGUF, towerConfigFromHF, towerTensors, type VisionTowerConfig } from '../vision/tower';
import { ModelError } from './errors';
import { isLocalPath, openFolder, readJson, toLocalPath, type Folder } from './folder';
import type { ModelLocation, OpenedTensor } from './location';

export interface OpenedVisionTower {
  config: VisionTowerConfig;
  processor: ImageProcessorSettings;
  format: 'gguf' | 'safetensors';
  /** Keyed by canonical (mmproj) name. */
  tensors: Map<string, OpenedTensor>;
  readTensorF32(name: string): Promise<Float32Array>;
}

export async function openVisionTower(location: ModelLocation): Promise<OpenedVisionTower> {
  if (typeof location === 'object' && !(location instanceof URL)) {
    if (typeof (location as Folder).text === 'function') return openHF(location as Folder);
    return openGGUF(location as ByteSource);
  }
  const loc = location.toString();
  if (/\.gguf$/i.test(loc.replace(/[?#].*$/, ''))) return openGGUF(isLocalPath(loc) ? fileSource(await toLocalPath(loc)) : httpSource(loc));
  return openHF(await openFolder(loc));
}

async function openGGUF(src: ByteSource): Promise<OpenedVisionTower> {
  const gguf = await readGGUF(src);
  const get = (k: string) => gguf.metadata.get(k);
  const config = towerConfigFromGGUF(get);
  if (!config)
    throw new ModelError('unsupported_arch', `${src.name}: not an Idefics3 (SmolVLM) mmproj file: clip.projector_type is ${JSON.stringify(get('clip.projector_type') ?? null)}`, 'clip.projector_type');
  const tensors = new Map<string, OpenedTensor>();
  for (const info of gguf.tensors) tensors.set(info.name, { info, source: src });
  return finish(config, settingsFromGGUF(gguf.metadata), 'gguf', tensors);
}

async function openHF(folder: Folder): Promise<OpenedVisionTower> {
  const [configJson, indexJson] = await Promise.all([readJson(folder, 'config.json', true), readJson(folder, 'model.safetensors.index.json', false)]);
  const shards = indexJson ? [...new Set(Object.values((indexJson.weight_map ?? {}) as Record<string, string>))] : ['model.safetensors'];
  const stored = await Promise.all(
    shards.map(async (file) => {
      const source = folder.source(file);
      return (await readSafetensors(source)).tensors.map((info) => ({ info, source }));
    }),
  );
  return openVisionInFolder(folder, configJson!, stored.flat());
}

/**
 * The tower of an HF folder whose config.json and tensor headers are read already (openModel reads
 * them for the text model): its tensors picked from those by HF name, preprocessor_config.json read.
 */
export async function openVisionInFolder(folder: Folder, configJson: Record<string, unknown>, stored: readonly OpenedTensor[]): Promise<OpenedVisionTower> {
  const config = towerConfigFromHF(configJson);
  if (!config) throw new ModelError('unsupported_arch', `config.json: model_type ${JSON.stringify(configJson.model_type)} has no Idefics3 vision tower`, 'model_type');
  const pre = await readJson(folder, 'preprocessor_config.json', false);
  const byHf = new Map(towerTensors(config).map((t) => [t.hf, t.name]));
  const tensors = new Map<string, OpenedTensor>();
  for (const t of stored) {
    const name = byHf.get(t.info.name);
    if (name) tensors.set(name, t);
  }
  return finish(config, settingsFromHF(pre ?? {}, configJson), 'safetensors', tensors);
}

function finish(config: VisionTowerConfig, processor: ImageProcessorSettings, format: 'gguf' | 'safetensors', tensors: Map<string, OpenedTensor>): OpenedVisionTower {
  for (const t of towerTensors(config)) {
    const got = tensors.get(t.name);
    if (!got) throw new ModelError('missing_tensor', `vision tower: tensor ${t.name} (${t.hf}) is missing`, t.name);
    if (elementCount(got.info.shape) !== elementCount(t.shape))
      throw new ModelError('tensor_shape', `vision tower: tensor ${t.name} has shape [${got.info.shape.join(', ')}], expected [${t.shape.join(', ')}]`, t.name);
  }
  const readTensorF32 = async (name: string) => {
    const t = tensors.get(name);
    if (!t) throw new ModelError('missing_tensor', `vision tower: tensor ${name} is not in this model`, name);
    return dequantize(t.info.dtype, await t.source.read(t.info.offset, t.info.byteLength), elementCount(t.info.shape));
  };
  return { config, processor, format, tensors, readTensorF32 };
}
