/**
 * cachedSource(): a file behind a URL, read from the model cache. The first time, the file is
 * downloaded once, start to end, streaming into the cache (never whole in memory), with
 * 'download' progress; afterwards every read comes from the cache ('cache' progress) and the
 * network is not touched. Plain GETs only, so servers without Range support cost one download,
 * not one per read.
 */
import type { ByteSource } from '../formats/source';
import { abortedError, isAbortError, LoadError, throwIfAborted } from './errors';
import type { ModelCache } from './cache';
import { ProgressEmitter, type ProgressCallback } from './progress';

export interface CachedSourceOptions {
  /** The model the file belongs to, for the cache's list()/delete() (default: the URL). */
  modelKey?: string;
  signal?: AbortSignal;
  onProgress?: ProgressCallback;
  /** A load's shared emitter, so totals run over all its files (wins over onProgress). */
  progress?: ProgressEmitter;
  /** Extra request options, e.g. an `Authorization` header for a gated Hugging Face repo. */
  init?: RequestInit;
}

/** A byte source over the cached copy of `url`, downloading it into `cache` first if needed. */
export async function cachedSource(url: string, cache: ModelCache, opts: CachedSourceOptions = {}): Promise<ByteSource> {
  const src = await ensureCached(url, cache, opts, false);
  if (!src) throw new LoadError('http', url, 'not found (HTTP 404)', 404);
  return src;
}

/** The text of a small file (config.json, tokenizer.json) through the cache; null on a 404. */
export async function cachedText(url: string, cache: ModelCache, opts: CachedSourceOptions = {}): Promise<string | null> {
  const src = await ensureCached(url, cache, opts, true);
  if (!src) return null;
  return new TextDecoder().decode(await src.read(0, await src.size()));
}

/**
 * A source whose bytes come from `open()`, called on the first read and shared by all later
 * ones: a folder hands out sources synchronously, but a cached one must download first.
 */
export function lazySource(name: string, open: () => Promise<ByteSource>): ByteSource {
  let p: Promise<ByteSource> | undefined;
  const get = () =>
    (p ??= open().catch((e: unknown) => {
      p = undefined; // a later read may retry
      throw e;
    }));
  return {
    name,
    size: async () => (await get()).size(),
    read: async (offset, length) => (await get()).read(offset, length),
  };
}

async function ensureCached(url: string, cache: ModelCache, opts: CachedSourceOptions, optional: boolean): Promise<ByteSource | null> {
  const { signal } = opts;
  const progress = opts.progress ?? new ProgressEmitter(opts.onProgress);
  const modelKey = opts.modelKey ?? url;
  throwIfAborted(signal, url);

  const hit = await cache.lookup(url).catch(() => null); // an unreadable cache is a miss
  if (hit?.missing && optional) return null;
  if (hit && !hit.missing) {
    const src = await cache.open(url).catch(() => null);
    if (src) {
      progress.phase('cache').file(url, hit.bytes).done();
      return src;
    }
  }

  let res: Response;
  try {
    res = await fetch(url, { ...opts.init, signal });
  } catch (e) {
    if (signal?.aborted || isAbortError(e)) throw abortedError(url);
    throw new LoadError('network', url, `request failed: ${(e as Error).message}`, undefined, { cause: e });
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    if (res.status === 404 && optional) {
      await cache.putMissing(url, { modelKey }).catch(() => {}); // only saves a request next time
      return null;
    }
    throw new LoadError('http', url, httpMessage(res), res.status);
  }
  if (/^text\/html\b/i.test(res.headers.get('Content-Type') ?? '') && !/\.html?$/i.test(new URL(url).pathname)) {
    await res.body?.cancel().catch(() => {});
    throw new LoadError(
      'not_a_model_file',
      url,
      'the server sent a web page (text/html) instead of the file; check the URL (Hugging Face file links need /resolve/, not /blob/)',
      res.status,
    );
  }

  // fetch() decompresses, so a compressed response's length is not the file's.
  const lengthHeader = res.headers.get('Content-Length');
  const size = lengthHeader !== null && !res.headers.get('Content-Encoding') ? Number(lengthHeader) : undefined;
  const file = progress.phase('download').file(url, size ?? 0);
  try {
    await cache.put(url, counted(url, res.body ?? new ReadableStream(), (n) => file.add(n)), size, { modelKey, signal });
  } catch (e) {
    if (signal?.aborted || isAbortError(e)) throw abortedError(url);
    throw e instanceof LoadError ? e : new LoadError('cache', url, `cannot store the download in ${cache.name}: ${(e as Error).message}`, undefined, { cause: e });
  }
  file.done();

  const src = await cache.open(url);
  if (!src) throw new LoadError('cache', url, `${cache.name} did not keep the downloaded file (out of storage quota?)`);
  return src;
}

/** The body's chunks, counting each; a broken connection becomes a LoadError naming the file. */
async function* counted(url: string, body: ReadableStream<Uint8Array>, onBytes: (n: number) => void): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  let received = 0;
  let finished = false;
  try {
    for (;;) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        if (isAbortError(e)) throw e;
        throw new LoadError('network', url, `the download broke off after ${received} bytes: ${(e as Error).message}`, undefined, { cause: e });
      }
      if (r.done) {
        finished = true;
        return;
      }
      received += r.value.length;
      onBytes(r.value.length);
      yield r.value;
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => {});
  }
}

function httpMessage(res: Response): string {
  const status = `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
  if (res.status === 404) return `not found (${status}): check the URL, the file name and the revision`;
  if (res.status === 401 || res.status === 403) return `access denied (${status}): the repository may be gated or private; pass an access token`;
  return `the server answered ${status}`;
}
