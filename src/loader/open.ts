/**
 * openModelWithCache(): resolves what the user gave (URL, repo id, File(s), path), routes every
 * remote file through the model cache, and opens the model with the model layer's openModel().
 * Headers are read (and validated: magic, version, sizes against the file length, tensor types,
 * shapes against the config, architecture) before anything is trusted; every failure rejects
 * with a LoadError naming the file.
 */
import { blobSource, fileSource, httpSource, type ByteSource } from '../formats/source';
import { FormatError } from '../formats/types';
import type { Folder } from '../model/folder';
import { openAnyModel, type OpenedEncoder } from '../model/encoder-open';
import { openModel, type ModelLocation, type OpenedModel } from '../model/open';
import type { ModelCache } from './cache';
import { cachedSource, cachedText, lazySource, type CachedSourceOptions } from './download';
import { abortedError, throwIfAborted, toLoadError } from './errors';
import { ProgressEmitter, type ProgressCallback } from './progress';
import { resolveModel, type ModelInput, type ResolvedModel, type ResolveOptions } from './resolve';

export interface LoadOptions extends ResolveOptions {
  /**
   * Where downloads are kept. Default: defaultModelCache() (a directory in Node; OPFS or the
   * Cache API in a browser). `false` reads remote files with range requests, caching nothing.
   */
  cache?: ModelCache | false;
  onProgress?: ProgressCallback;
  /** Shared with the weights' upload (GpuEngine.load) so one emitter reports the whole load. */
  progress?: ProgressEmitter;
  signal?: AbortSignal;
}

/** An opened model (a decoder's OpenedModel, or an encoder's) with where it was found. */
export type LoadedModel<M = OpenedModel> = M & {
  /** Where the model was found. */
  resolved: ResolvedModel;
};

/** The cache a load uses when none is given: the best store this environment has, or none. */
export async function defaultModelCache(): Promise<ModelCache | null> {
  if (typeof process !== 'undefined' && process.versions?.node) {
    return (await import('./cache-node')).nodeDirCache();
  }
  if (typeof navigator !== 'undefined' && typeof navigator.storage?.getDirectory === 'function') {
    return (await import('./cache-opfs')).opfsCache();
  }
  if (typeof caches !== 'undefined') return (await import('./cache-api')).cacheApiCache();
  return null;
}

export const openModelWithCache = (input: ModelInput, opts: LoadOptions = {}): Promise<LoadedModel> => openWithCache(input, opts, openModel);

/** As openModelWithCache, and a BERT encoder's files open as the encoder (what createEngine serves). */
export const openAnyModelWithCache = (input: ModelInput, opts: LoadOptions = {}): Promise<LoadedModel<OpenedModel | OpenedEncoder>> =>
  openWithCache(input, opts, openAnyModel);

async function openWithCache<M extends object>(input: ModelInput, opts: LoadOptions, open: (location: ModelLocation) => Promise<M>): Promise<LoadedModel<M>> {
  const { signal } = opts;
  const label = describeInput(input);
  let resolved: ResolvedModel;
  try {
    throwIfAborted(signal, label);
    resolved = await resolveModel(input, opts);
  } catch (e) {
    throw toLoadError(e, { file: label }, signal);
  }
  const cache = opts.cache === false ? null : (opts.cache ?? (await defaultModelCache()));
  const progress = opts.progress ?? new ProgressEmitter(opts.onProgress);
  const where = { file: locationName(resolved), folder: resolved.kind.startsWith('folder') };

  try {
    const model = await open(location(resolved, cache, { signal, progress, init: opts.init }));
    throwIfAborted(signal, where.file);
    return Object.assign(model, { resolved });
  } catch (e) {
    const err = toLoadError(e, where, signal);
    // A cached copy that does not parse (cut short, an error page stored by an older version)
    // would fail the same way forever: drop it so the next load fetches afresh.
    if (cache && 'modelKey' in resolved && e instanceof FormatError && err.code !== 'http' && err.code !== 'io') {
      await cache.delete(resolved.modelKey).catch(() => {});
    }
    throw err;
  }
}

/** What openModel() (or openLora()) gets for each kind of location. */
export function location(r: ResolvedModel, cache: ModelCache | null, opts: CachedSourceOptions): string | ByteSource | Folder {
  switch (r.kind) {
    case 'gguf-url':
      return cache ? lazySource(r.url, () => cachedSource(r.url, cache, { ...opts, modelKey: r.modelKey })) : abortable(httpSource(r.url, { ...opts.init, signal: opts.signal }), opts.signal);
    case 'folder-url':
      return cache ? cachedFolder(r.url, cache, { ...opts, modelKey: r.modelKey }) : r.url;
    case 'gguf-path':
      return fileSource(r.path);
    case 'folder-path':
      return r.path;
    case 'gguf-blob':
      return blobSource(r.blob, r.name);
    case 'folder-files':
      return pickedFolder(r.name, r.files);
  }
}

/** A remote folder whose every file (weights and small JSON alike) goes through the cache. */
function cachedFolder(base: string, cache: ModelCache, opts: CachedSourceOptions): Folder {
  const url = (file: string) => `${base}/${file.split('/').map(encodeURIComponent).join('/')}`;
  return {
    name: base,
    source: (file) => lazySource(url(file), () => cachedSource(url(file), cache, opts)),
    text: (file) => cachedText(url(file), cache, opts),
  };
}

/** Files the user picked, by their path inside the picked folder. */
function pickedFolder(name: string, files: Map<string, Blob>): Folder {
  return {
    name,
    source: (file) => {
      const blob = files.get(file);
      if (blob) return blobSource(blob, `${name}/${file}`);
      const fail = (): never => {
        throw new FormatError('io', `${name}/${file}`, 'is not among the picked files');
      };
      return { name: `${name}/${file}`, size: async () => fail(), read: async () => fail() };
    },
    text: async (file) => (files.has(file) ? files.get(file)!.text() : null),
  };
}

/** Range reads that stop once `signal` fires (httpSource already passes it to fetch). */
function abortable(src: ByteSource, signal: AbortSignal | undefined): ByteSource {
  if (!signal) return src;
  return {
    name: src.name,
    size: () => (signal.aborted ? Promise.reject(abortedError(src.name)) : src.size()),
    read: (o, n) => (signal.aborted ? Promise.reject(abortedError(src.name)) : src.read(o, n)),
  };
}

/** The file or folder a resolved input names, for messages. */
export function locationName(r: ResolvedModel): string {
  switch (r.kind) {
    case 'gguf-url':
    case 'folder-url':
      return r.url;
    case 'gguf-path':
    case 'folder-path':
      return r.path;
    case 'gguf-blob':
    case 'folder-files':
      return r.name;
  }
}

function describeInput(input: ModelInput): string {
  if (typeof input === 'string' || input instanceof URL) return input.toString();
  if (input instanceof Blob) return (input as Partial<File>).name || 'blob';
  return 'picked files';
}

