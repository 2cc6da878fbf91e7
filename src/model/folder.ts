/**
 * A model "folder": a Hugging Face repo directory reached over HTTP(S) or on the local disk (Node).
 * Gives byte sources for the big files and text for the small JSON ones.
 */
import { fileSource, httpSource, type ByteSource } from '../formats/source';
import { ModelError } from './errors';

export interface Folder {
  /** Where the folder is, for messages. */
  name: string;
  source(file: string): ByteSource;
  /** The file's text, or null when it does not exist (404 / ENOENT). */
  text(file: string): Promise<string | null>;
}

const isNode = typeof process !== 'undefined' && !!process.versions?.node;

/** True for a string openModel should read from the local disk: a file:// URL, or a path in Node. */
export function isLocalPath(location: string): boolean {
  if (location.startsWith('file:')) return true;
  // Windows drive letters ("C:\") look like a scheme; anything else with a scheme is a URL.
  return isNode && !/^[a-z][a-z0-9+.-]*:\/\//i.test(location);
}

/** A file:// URL becomes a path; a path stays as it is. */
export async function toLocalPath(location: string): Promise<string> {
  if (!location.startsWith('file:')) return location;
  const { fileURLToPath } = await import('node:url');
  return fileURLToPath(location);
}

export async function openFolder(location: string): Promise<Folder> {
  if (isLocalPath(location)) {
    const dir = (await toLocalPath(location)).replace(/[\\/]+$/, '');
    const join = (file: string) => `${dir}/${file}`;
    return {
      name: dir,
      source: (file) => fileSource(join(file)),
      text: async (file) => {
        const { readFile } = await import('node:fs/promises');
        try {
          return await readFile(join(file), 'utf8');
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
          throw new ModelError('missing_file', `cannot read ${join(file)}: ${(e as Error).message}`, file);
        }
      },
    };
  }
  const base = location.replace(/\/+$/, '');
  const join = (file: string) => `${base}/${file}`;
  return {
    name: base,
    source: (file) => httpSource(join(file)),
    text: async (file) => {
      let res: Response;
      try {
        res = await fetch(join(file));
      } catch (e) {
        throw new ModelError('missing_file', `cannot fetch ${join(file)}: ${(e as Error).message}`, file);
      }
      if (res.status === 404) {
        await res.body?.cancel();
        return null;
      }
      if (!res.ok) throw new ModelError('missing_file', `fetching ${join(file)} failed with HTTP ${res.status}`, file);
      return res.text();
    },
  };
}

/** Parses a JSON file of the folder; null when absent and `required` is false. */
export async function readJson(folder: Folder, file: string, required: boolean): Promise<Record<string, unknown> | null> {
  const text = await folder.text(file);
  if (text === null) {
    if (required) throw new ModelError('missing_file', `${folder.name}/${file} is missing; a Hugging Face model folder needs it`, file);
    return null;
  }
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not a JSON object');
    return value as Record<string, unknown>;
  } catch (e) {
    throw new ModelError('invalid_field', `${folder.name}/${file} is not valid JSON: ${(e as Error).message}`, file);
  }
}
