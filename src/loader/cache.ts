/**
 * The model cache contract, shared by every store (a Node directory, OPFS, the Cache API), and the
 * helpers the stores share. Entries are whole files keyed by the URL they were downloaded from and
 * grouped by a model key (the model's URL), so a model can be listed and deleted as one.
 *
 * A store must never let a half-written file look complete: `lookup`/`open` only see entries
 * whose write finished (temp file + rename, or a commit-on-close writable, or an atomic put).
 */
import { sha256Hex } from '../formats/sha256';
import type { ByteSource } from '../formats/source';
import { FormatError } from '../formats/types';
import { abortedError, LoadError } from './errors';

/** One cached file (or a recorded 404 for an optional file of a folder). */
export interface CacheEntry {
  url: string;
  modelKey: string;
  /** File size in bytes (0 for a recorded absence). */
  bytes: number;
  /** When the entry was written, in milliseconds since the epoch. */
  storedAt: number;
  /** True when the server answered 404: a later load need not ask again. */
  missing?: boolean;
}

/** A model as `list()` reports it: all cached files sharing a model key. */
export interface CachedModel {
  /** The key `delete()` takes. */
  modelKey: string;
  /** Where the model lives (its GGUF file, or its folder): the same string as `modelKey`. */
  url: string;
  /** Total bytes of its cached files. */
  bytes: number;
  /** The latest `storedAt` of its files. */
  storedAt: number;
  files: Array<{ url: string; bytes: number; storedAt: number }>;
}

/** A file's bytes as they arrive: a fetch body, or chunks from memory. */
export type ChunkSource = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export interface PutOptions {
  /** The model this file belongs to (default: the URL itself). */
  modelKey?: string;
  /** Stops the write; the partial file is discarded. */
  signal?: AbortSignal;
}

export interface ModelCache {
  /** For messages ("OPFS", "Cache API 'webgpu-llm'", a directory). */
  readonly name: string;
  /** The complete entry for `url`, or null. */
  lookup(url: string): Promise<CacheEntry | null>;
  /** True when `url` has a complete entry (a file or a recorded absence). */
  has(url: string): Promise<boolean>;
  /** A byte source over the cached file, named by `url`; null when not cached (or recorded missing). */
  open(url: string): Promise<ByteSource | null>;
  /**
   * Stores the file streamed from `body`. When `size` is given the write fails (and leaves
   * nothing) unless exactly that many bytes arrive. Rejects, leaving nothing, on abort.
   */
  put(url: string, body: ChunkSource, size: number | undefined, opts?: PutOptions): Promise<void>;
  /** Records that the server has no such file (an optional file of a folder). */
  putMissing(url: string, opts?: Pick<PutOptions, 'modelKey'>): Promise<void>;
  list(): Promise<CachedModel[]>;
  /** Removes every entry of the model; false when there was none. */
  delete(modelKey: string): Promise<boolean>;
}

/** The chunks of any ChunkSource, read one at a time (a stream is released when done). */
export async function* chunksOf(body: ChunkSource): AsyncGenerator<Uint8Array> {
  if (typeof (body as ReadableStream).getReader === 'function') {
    const reader = (body as ReadableStream<Uint8Array>).getReader();
    let finished = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          finished = true;
          return;
        }
        yield value;
      }
    } finally {
      // Stopped early (an error downstream, an abort): tell the producer to stop sending.
      if (!finished) await reader.cancel().catch(() => {});
      reader.releaseLock();
    }
  } else {
    yield* body as AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
  }
}

/**
 * Wraps a store's write loop: yields the chunks, throws the abort error between chunks once
 * `signal` fires, and fails when the byte count differs from `size`.
 */
export async function* checkedChunks(url: string, body: ChunkSource, size: number | undefined, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
  let n = 0;
  for await (const chunk of chunksOf(body)) {
    if (signal?.aborted) throw abortedError(url);
    n += chunk.length;
    if (size !== undefined && n > size) throw new LoadError('truncated', url, `got more than the announced ${size} bytes`);
    yield chunk;
  }
  if (signal?.aborted) throw abortedError(url);
  if (size !== undefined && n !== size) throw new LoadError('truncated', url, `the download ended after ${n} of ${size} bytes`);
}

/** Groups entries into models for `list()`; recorded absences count for nothing. */
export function groupEntries(entries: Iterable<CacheEntry>): CachedModel[] {
  const models = new Map<string, CachedModel>();
  for (const e of entries) {
    if (e.missing) continue;
    let m = models.get(e.modelKey);
    if (!m) {
      m = { modelKey: e.modelKey, url: e.modelKey, bytes: 0, storedAt: 0, files: [] };
      models.set(e.modelKey, m);
    }
    m.bytes += e.bytes;
    m.storedAt = Math.max(m.storedAt, e.storedAt);
    m.files.push({ url: e.url, bytes: e.bytes, storedAt: e.storedAt });
  }
  const out = [...models.values()];
  for (const m of out) m.files.sort((a, b) => a.url.localeCompare(b.url));
  return out.sort((a, b) => a.modelKey.localeCompare(b.modelKey));
}

/** Validates a parsed entry record (a store's metadata file or headers). */
export function parseEntry(value: unknown): CacheEntry | null {
  if (typeof value !== 'object' || value === null) return null;
  const e = value as Record<string, unknown>;
  if (typeof e.url !== 'string' || typeof e.modelKey !== 'string' || typeof e.bytes !== 'number' || typeof e.storedAt !== 'number') return null;
  return { url: e.url, modelKey: e.modelKey, bytes: e.bytes, storedAt: e.storedAt, ...(e.missing === true ? { missing: true } : {}) };
}

/** A stable file-name-safe key for a URL: hex SHA-256 (Web Crypto, in browsers and Node). */
export async function urlKey(url: string): Promise<string> {
  return sha256Hex(new TextEncoder().encode(url), 16);
}

/**
 * The same bytes under another name: a cached file is reported by the URL it came from, not by
 * where the store keeps it, so errors name the file the user asked for.
 */
export function renamedSource(src: ByteSource, name: string): ByteSource {
  const rename = (e: unknown): never => {
    if (e instanceof FormatError && e.file !== name) {
      const prefix = `${e.file}: `;
      const detail = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
      throw new FormatError(e.code, name, `${detail} (cached copy)`, e.status);
    }
    throw e;
  };
  return {
    name,
    size: () => src.size().catch(rename),
    read: (offset, length) => src.read(offset, length).catch(rename),
  };
}
