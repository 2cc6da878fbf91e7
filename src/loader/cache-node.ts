/**
 * The Node model cache: files in a directory (default `~/.cache/webgpu-llm`, or
 * `$WEBGPU_LLM_CACHE`, or `$XDG_CACHE_HOME/webgpu-llm`). Each entry is `<key>.bin` (the bytes)
 * plus `<key>.json` (url, model key, size, time); the key is a hash of the URL. Bytes go to a
 * temp file that is renamed into place once complete, and the `.json` is written last the same
 * way, so a crash or an abort never leaves an entry that looks complete.
 *
 * `node:*` modules are imported on first use so this module stays loadable in a browser bundle.
 */
import { fileSource } from '../formats/source';
import { LoadError } from './errors';
import {
  checkedChunks,
  groupEntries,
  parseEntry,
  renamedSource,
  urlKey,
  type CacheEntry,
  type ChunkSource,
  type ModelCache,
  type PutOptions,
} from './cache';

/** Temp files older than this are leftovers of a crashed process; list() sweeps them. */
const STALE_TEMP_MS = 24 * 3600 * 1000;

export async function defaultCacheDir(): Promise<string> {
  const env = process.env;
  if (env.WEBGPU_LLM_CACHE) return env.WEBGPU_LLM_CACHE;
  const { homedir } = await import('node:os');
  const { join } = await import('node:path');
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'webgpu-llm');
}

export function nodeDirCache(dir?: string): ModelCache {
  const fs = () => import('node:fs/promises');
  let rootP: Promise<string> | undefined;
  const root = () => (rootP ??= dir !== undefined ? Promise.resolve(dir) : defaultCacheDir());
  const paths = async (url: string) => {
    const [d, key] = await Promise.all([root(), urlKey(url)]);
    return { bin: `${d}/${key}.bin`, meta: `${d}/${key}.json`, tmp: `${d}/${key}.${tempSuffix()}.tmp` };
  };
  const cacheError = (url: string, e: unknown): LoadError =>
    e instanceof LoadError ? e : new LoadError('cache', url, `cannot write the cache in ${dir ?? 'the cache directory'}: ${(e as Error).message}`, undefined, { cause: e });

  const readMeta = async (file: string): Promise<CacheEntry | null> => {
    try {
      return parseEntry(JSON.parse(await (await fs()).readFile(file, 'utf8')));
    } catch {
      return null; // absent, or garbage from an old version: treat as not cached
    }
  };

  /** Writes `text` to `file` through a temp file and a rename. */
  const writeAtomic = async (file: string, tmp: string, text: string): Promise<void> => {
    const { writeFile, rename, unlink } = await fs();
    try {
      await writeFile(tmp, text);
      await rename(tmp, file);
    } catch (e) {
      await unlink(tmp).catch(() => {});
      throw e;
    }
  };

  const lookup = async (url: string): Promise<CacheEntry | null> => {
    const p = await paths(url);
    const entry = await readMeta(p.meta);
    if (!entry || entry.url !== url) return null;
    if (entry.missing) return entry;
    // The bytes must still be there and whole (someone may have removed or cut them).
    const st = await (await fs()).stat(p.bin).catch(() => null);
    return st?.isFile() && st.size === entry.bytes ? entry : null;
  };

  const entries = async (): Promise<Array<{ entry: CacheEntry; meta: string; bin: string }>> => {
    const d = await root();
    const { readdir } = await fs();
    const names = await readdir(d).catch(() => [] as string[]);
    const out: Array<{ entry: CacheEntry; meta: string; bin: string }> = [];
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const meta = `${d}/${name}`;
      const entry = await readMeta(meta);
      if (entry) out.push({ entry, meta, bin: meta.replace(/\.json$/, '.bin') });
    }
    return out;
  };

  const sweepTemps = async (): Promise<void> => {
    const d = await root();
    const { readdir, stat, unlink } = await fs();
    for (const name of await readdir(d).catch(() => [] as string[])) {
      if (!name.endsWith('.tmp')) continue;
      const st = await stat(`${d}/${name}`).catch(() => null);
      if (st && Date.now() - st.mtimeMs > STALE_TEMP_MS) await unlink(`${d}/${name}`).catch(() => {});
    }
  };

  return {
    name: dir ?? 'the webgpu-llm cache directory',
    lookup,
    has: async (url) => (await lookup(url)) !== null,
    open: async (url) => {
      const entry = await lookup(url);
      if (!entry || entry.missing) return null;
      return renamedSource(fileSource((await paths(url)).bin), url);
    },

    async put(url: string, body: ChunkSource, size: number | undefined, opts: PutOptions = {}): Promise<void> {
      const { mkdir, open, rename, unlink } = await fs();
      const p = await paths(url);
      let fh: Awaited<ReturnType<typeof open>> | undefined;
      let bytes = 0;
      try {
        await mkdir(await root(), { recursive: true });
        fh = await open(p.tmp, 'w');
        for await (const chunk of checkedChunks(url, body, size, opts.signal)) {
          // write() may write less than asked; loop until the chunk is down.
          let off = 0;
          while (off < chunk.length) off += (await fh.write(chunk, off, chunk.length - off)).bytesWritten;
          bytes += chunk.length;
        }
        await fh.close();
        fh = undefined;
        // Drop the old record first: until the new .json lands, the entry reads as absent.
        await unlink(p.meta).catch(() => {});
        await rename(p.tmp, p.bin);
      } catch (e) {
        await fh?.close().catch(() => {});
        await unlink(p.tmp).catch(() => {});
        throw cacheError(url, e);
      }
      const entry: CacheEntry = { url, modelKey: opts.modelKey ?? url, bytes, storedAt: Date.now() };
      await writeAtomic(p.meta, `${p.tmp}.json`, JSON.stringify(entry)).catch((e: unknown) => {
        throw cacheError(url, e);
      });
    },

    async putMissing(url, opts = {}) {
      const { mkdir, unlink } = await fs();
      const p = await paths(url);
      const entry: CacheEntry = { url, modelKey: opts.modelKey ?? url, bytes: 0, storedAt: Date.now(), missing: true };
      try {
        await mkdir(await root(), { recursive: true });
        await writeAtomic(p.meta, p.tmp, JSON.stringify(entry));
        await unlink(p.bin).catch(() => {});
      } catch (e) {
        throw cacheError(url, e);
      }
    },

    async list() {
      await sweepTemps();
      const all = await entries();
      // Only entries whose bytes are whole count; lookup() applies the same test.
      const { stat } = await fs();
      const whole = [];
      for (const { entry, bin } of all) {
        if (entry.missing) continue;
        const st = await stat(bin).catch(() => null);
        if (st?.size === entry.bytes) whole.push(entry);
      }
      return groupEntries(whole);
    },

    async delete(modelKey) {
      const { unlink } = await fs();
      let found = false;
      for (const { entry, meta, bin } of await entries()) {
        if (entry.modelKey !== modelKey) continue;
        // Record first, bytes second: an interrupted delete leaves bytes nobody trusts, not a
        // record pointing at nothing.
        await unlink(meta).catch(() => {});
        await unlink(bin).catch(() => {});
        found ||= !entry.missing;
      }
      return found;
    },
  };
}

function tempSuffix(): string {
  return `${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}
