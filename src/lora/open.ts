/**
 * openLora(): an adapter from wherever a model can be (a `.gguf` URL, path or byte source, or a
 * PEFT folder by URL, path or Folder), read whole: adapters are a few MB.
 */
import { fileSource, httpSource, type ByteSource } from '../formats/source';
import { isLocalPath, openFolder, toLocalPath, type Folder } from '../model/folder';
import type { ModelConfig } from '../model/config';
import { fitLora } from './fit';
import { readGGUFAdapter } from './gguf';
import { readPeftAdapter } from './peft';
import type { LoraAdapter } from './types';

export type LoraLocation = string | URL | ByteSource | Folder;

/** Reads an adapter as its file says (q/k rows in the file's order), unchecked against a base. */
export async function openLora(location: LoraLocation): Promise<LoraAdapter> {
  if (typeof location === 'object' && !(location instanceof URL)) {
    return 'text' in location && typeof location.text === 'function' ? readPeftAdapter(location) : readGGUFAdapter(location as ByteSource);
  }
  const loc = location.toString();
  if (/\.gguf$/i.test(loc.replace(/[?#].*$/, ''))) return readGGUFAdapter(isLocalPath(loc) ? fileSource(await toLocalPath(loc)) : httpSource(loc));
  return readPeftAdapter(await openFolder(loc));
}

/** Reads an adapter and fits it to a base: validated, q/k rows in the base's order. */
export async function loadLora(location: LoraLocation, base: ModelConfig): Promise<LoraAdapter> {
  return fitLora(await openLora(location), base);
}
