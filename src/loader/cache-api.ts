/**
 * The browser model cache in the Cache API (caches.open(name)): each file is stored as the
 * Response it came in, with its model key, size and time in `x-webgpu-llm-*` headers. put() of a
 * streamed Response is atomic (a body that errors stores nothing), and reads slice the Blob of the
 * cached body, which the browser keeps on disk.
 */
import { blobSource } from '../formats/source';
import { LoadError } from './errors';
import { checkedChunks, groupEntries, type CacheEntry, type ModelCache } from './cache';

const H_MODEL = 'x-webgpu-llm-model';
const H_BYTES = 'x-webgpu-llm-bytes';
const H_STORED = 'x-webgpu-llm-stored-at';
const H_MISSING = 'x-webgpu-llm-missing';

export function cacheApiCache(name = 'webgpu-llm'): ModelCache {
  const label = `Cache API '${name}'`;
  const open = async (): Promise<Cache> => {
    if (typeof caches === 'undefined') throw new LoadError('cache', label, 'the Cache API is not available here (it needs a secure context)');
    return caches.open(name);
  };
  const cacheError = (url: string, e: unknown): LoadError =>
    e instanceof LoadError ? e : new LoadError('cache', url, `cannot write the ${label} cache: ${(e as Error).message}`, undefined, { cause: e });

  /** The entry a stored Response describes; its body's size when no header says it. */
  const entryOf = async (url: string, res: Response): Promise<CacheEntry | null> => {
    const modelKey = res.headers.get(H_MODEL);
    const storedAt = Number(res.headers.get(H_STORED));
    if (modelKey === null || !Number.isFinite(storedAt)) return null; // not ours
    if (res.headers.get(H_MISSING) === '1') return { url, modelKey, bytes: 0, storedAt, missing: true };
    const header = res.headers.get(H_BYTES);
    const bytes = header !== null ? Number(header) : (await res.blob()).size;
    return { url, modelKey, bytes, storedAt };
  };

  const lookup = async (url: string): Promise<CacheEntry | null> => {
    const res = await (await open()).match(url);
    return res ? entryOf(url, res) : null;
  };

  const all = async (): Promise<CacheEntry[]> => {
    const c = await open();
    const out: CacheEntry[] = [];
    for (const req of await c.keys()) {
      const res = await c.match(req);
      const entry = res && (await entryOf(req.url, res));
      if (entry) out.push(entry);
    }
    return out;
  };

  return {
    name: label,
    lookup,
    has: async (url) => (await lookup(url)) !== null,
    open: async (url) => {
      const res = await (await open()).match(url);
      if (!res || res.headers.get(H_MISSING) === '1' || res.headers.get(H_MODEL) === null) return null;
      return blobSource(await res.blob(), url);
    },

    async put(url, body, size, opts = {}) {
      const chunks = checkedChunks(url, body, size, opts.signal);
      let failure: unknown;
      // The Response pulls chunks as the cache writes them; an error in `chunks` errors the
      // stream, which makes put() reject without storing anything.
      const stream = new ReadableStream<Uint8Array>({
        async pull(controller) {
          try {
            const { done, value } = await chunks.next();
            if (done) controller.close();
            else controller.enqueue(value);
          } catch (e) {
            failure = e;
            controller.error(e);
          }
        },
        async cancel() {
          await chunks.return(undefined);
        },
      });
      const headers: Record<string, string> = {
        'Content-Type': 'application/octet-stream',
        [H_MODEL]: opts.modelKey ?? url,
        [H_STORED]: String(Date.now()),
      };
      if (size !== undefined) {
        headers[H_BYTES] = String(size);
        headers['Content-Length'] = String(size);
      }
      try {
        await (await open()).put(url, new Response(stream, { headers }));
      } catch (e) {
        throw cacheError(url, failure ?? e);
      }
    },

    async putMissing(url, opts = {}) {
      const headers = { [H_MODEL]: opts.modelKey ?? url, [H_STORED]: String(Date.now()), [H_MISSING]: '1' };
      try {
        await (await open()).put(url, new Response(null, { headers }));
      } catch (e) {
        throw cacheError(url, e);
      }
    },

    list: async () => groupEntries(await all()),

    async delete(modelKey) {
      const c = await open();
      let found = false;
      for (const entry of await all()) {
        if (entry.modelKey !== modelKey) continue;
        await c.delete(entry.url);
        found ||= !entry.missing;
      }
      return found;
    },
  };
}
