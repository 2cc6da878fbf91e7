/**
 * The browser model cache in the Origin Private File System (navigator.storage.getDirectory()):
 * `<dir>/<key>.bin` and `<key>.json` as in the Node cache. A FileSystemWritableFileStream writes
 * to a swap file that replaces the target only on close(), so an aborted or crashed download
 * never leaves a half file under the real name; the `.json` record is written after it.
 * Reads slice the File that getFile() returns, so nothing is held in memory.
 *
 * Needs createWritable(), which Chromium has on the main thread and in workers.
 */
import { blobSource } from '../formats/source';
import { LoadError } from './errors';
import { checkedChunks, groupEntries, parseEntry, urlKey, type CacheEntry, type ModelCache } from './cache';

export function opfsCache(dirName = 'webgpu-llm'): ModelCache {
  let dirP: Promise<FileSystemDirectoryHandle> | undefined;
  const dir = () =>
    (dirP ??= (async () => {
      if (typeof navigator === 'undefined' || !navigator.storage?.getDirectory) {
        throw new LoadError('cache', 'OPFS', 'the Origin Private File System is not available here');
      }
      return (await navigator.storage.getDirectory()).getDirectoryHandle(dirName, { create: true });
    })());
  const cacheError = (url: string, e: unknown): LoadError =>
    e instanceof LoadError ? e : new LoadError('cache', url, `cannot write the OPFS cache: ${(e as Error).message}`, undefined, { cause: e });

  const fileOf = async (name: string): Promise<File | null> => {
    try {
      return await (await (await dir()).getFileHandle(name)).getFile();
    } catch (e) {
      if ((e as DOMException).name === 'NotFoundError' || (e as DOMException).name === 'TypeMismatchError') return null;
      throw e;
    }
  };
  const readMeta = async (name: string): Promise<CacheEntry | null> => {
    const f = await fileOf(name);
    if (!f) return null;
    try {
      return parseEntry(JSON.parse(await f.text()));
    } catch {
      return null;
    }
  };
  const writeText = async (name: string, text: string): Promise<void> => {
    const w = await (await (await dir()).getFileHandle(name, { create: true })).createWritable();
    await w.write(text);
    await w.close();
  };
  const remove = async (name: string): Promise<void> => {
    await (await dir()).removeEntry(name).catch(() => {});
  };

  /** The entry with its bytes' File, when both are whole. */
  const lookupFile = async (url: string): Promise<{ entry: CacheEntry; file: File | null } | null> => {
    const key = await urlKey(url);
    const entry = await readMeta(`${key}.json`);
    if (!entry || entry.url !== url) return null;
    if (entry.missing) return { entry, file: null };
    const file = await fileOf(`${key}.bin`);
    return file && file.size === entry.bytes ? { entry, file } : null;
  };

  const entries = async (): Promise<Array<{ entry: CacheEntry; key: string }>> => {
    const d = await dir();
    const out: Array<{ entry: CacheEntry; key: string }> = [];
    // lib.dom lacks the async iterator of directory handles that browsers have.
    for await (const name of (d as unknown as { keys(): AsyncIterable<string> }).keys()) {
      if (!name.endsWith('.json')) continue;
      const entry = await readMeta(name);
      if (entry) out.push({ entry, key: name.slice(0, -'.json'.length) });
    }
    return out;
  };

  return {
    name: 'OPFS',
    lookup: async (url) => (await lookupFile(url))?.entry ?? null,
    has: async (url) => (await lookupFile(url)) !== null,
    open: async (url) => {
      const hit = await lookupFile(url);
      return hit?.file ? blobSource(hit.file, url) : null;
    },

    async put(url, body, size, opts = {}) {
      const key = await urlKey(url);
      let w: FileSystemWritableFileStream | undefined;
      let existed = true;
      let bytes = 0;
      try {
        const d = await dir();
        existed = (await fileOf(`${key}.bin`)) !== null;
        w = await (await d.getFileHandle(`${key}.bin`, { create: true })).createWritable();
        for await (const chunk of checkedChunks(url, body, size, opts.signal)) {
          await w.write(chunk as Uint8Array<ArrayBuffer>);
          bytes += chunk.length;
        }
        await remove(`${key}.json`); // the old record goes before the new bytes land
        await w.close();
        w = undefined;
        const entry: CacheEntry = { url, modelKey: opts.modelKey ?? url, bytes, storedAt: Date.now() };
        await writeText(`${key}.json`, JSON.stringify(entry));
      } catch (e) {
        await w?.abort().catch(() => {});
        if (!existed) await remove(`${key}.bin`); // getFileHandle({create}) left an empty file
        throw cacheError(url, e);
      }
    },

    async putMissing(url, opts = {}) {
      const key = await urlKey(url);
      const entry: CacheEntry = { url, modelKey: opts.modelKey ?? url, bytes: 0, storedAt: Date.now(), missing: true };
      try {
        await writeText(`${key}.json`, JSON.stringify(entry));
        await remove(`${key}.bin`);
      } catch (e) {
        throw cacheError(url, e);
      }
    },

    async list() {
      const whole: CacheEntry[] = [];
      for (const { entry, key } of await entries()) {
        if (entry.missing) continue;
        const f = await fileOf(`${key}.bin`);
        if (f?.size === entry.bytes) whole.push(entry);
      }
      return groupEntries(whole);
    },

    async delete(modelKey) {
      let found = false;
      for (const { entry, key } of await entries()) {
        if (entry.modelKey !== modelKey) continue;
        await remove(`${key}.json`);
        await remove(`${key}.bin`);
        found ||= !entry.missing;
      }
      return found;
    },
  };
}
