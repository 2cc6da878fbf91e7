/**
 * openLoraWithCache(): an adapter from anything a model load takes (URL, Hugging Face repo id,
 * File or picked folder, Node path), through the loader's resolution, cache and progress, fitted
 * to a base. Reader failures come back as the loader's LoadError (naming the file); adapter
 * problems as LoraError.
 */
import { FormatError } from '../formats/types';
import { ModelError } from '../model/errors';
import type { ModelConfig } from '../model/config';
import { throwIfAborted, toLoadError } from '../loader/errors';
import { defaultModelCache, location, locationName, type LoadOptions } from '../loader/open';
import { ProgressEmitter } from '../loader/progress';
import { resolveModel, type ModelInput } from '../loader/resolve';
import { fitLora } from './fit';
import { openLora } from './open';
import type { LoraAdapter } from './types';

export async function openLoraWithCache(input: ModelInput, base: ModelConfig, opts: LoadOptions = {}): Promise<LoraAdapter> {
  const { signal } = opts;
  const label = typeof input === 'string' || input instanceof URL ? input.toString() : 'picked files';
  let file = label;
  try {
    throwIfAborted(signal, label);
    const resolved = await resolveModel(input, opts);
    file = locationName(resolved);
    const cache = opts.cache === false ? null : (opts.cache ?? (await defaultModelCache()));
    const progress = opts.progress ?? new ProgressEmitter(opts.onProgress);
    const adapter = await openLora(location(resolved, cache, { signal, progress, init: opts.init }));
    throwIfAborted(signal, file);
    return fitLora(adapter, base);
  } catch (e) {
    if (e instanceof FormatError || e instanceof ModelError || signal?.aborted) throw toLoadError(e, { file }, signal);
    throw e;
  }
}
