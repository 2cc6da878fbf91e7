/**
 * Byte sources: random access to a model file wherever it lives (HTTP, Blob/File, Node file,
 * memory). Readers fetch headers and tensors through these, never the whole file.
 *
 * Contract: `read(offset, length)` resolves with exactly `length` bytes or rejects with a
 * FormatError (`truncated` when the range runs past the end).
 */
import { FormatError } from './types';

export interface ByteSource {
  /** A path, URL or file name, used in error messages. */
  name: string;
  size(): Promise<number>;
  read(offset: number, length: number): Promise<Uint8Array>;
}

function checkRange(name: string, offset: number, length: number, size?: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
    throw new RangeError(`${name}: bad read range offset=${offset} length=${length}`);
  }
  if (size !== undefined && offset + length > size) {
    throw new FormatError(
      'truncated',
      name,
      `read of bytes ${offset}..${offset + length} runs past the end of the file (${size} bytes)`,
    );
  }
}

/** A source over bytes already in memory (tests, small files, fetched blobs). */
export function memorySource(bytes: Uint8Array, name = 'memory'): ByteSource {
  return {
    name,
    size: async () => bytes.length,
    read: async (offset, length) => {
      checkRange(name, offset, length, bytes.length);
      return bytes.subarray(offset, offset + length);
    },
  };
}

/** A source over a Blob or File (browser file picker, OPFS, Cache API responses). */
export function blobSource(blob: Blob, name?: string): ByteSource {
  const label = name ?? (blob as Partial<File>).name ?? 'blob';
  return {
    name: label,
    size: async () => blob.size,
    read: async (offset, length) => {
      checkRange(label, offset, length, blob.size);
      return new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer());
    },
  };
}

/**
 * A source over a local file, for Node. `node:fs` is imported on first use so this module stays
 * loadable in browsers. Each read opens the file briefly: sources have no close(), and a handle
 * left for the garbage collector makes Node warn.
 */
export function fileSource(path: string): ByteSource {
  const fs = () => import('node:fs/promises');
  let size: Promise<number> | undefined;
  const ioError = (e: unknown): FormatError => {
    const err = e as NodeJS.ErrnoException;
    return new FormatError('io', path, `cannot read (${err.code ?? err.message})`);
  };
  const src: ByteSource = {
    name: path,
    size: () =>
      (size ??= (async () => {
        try {
          return (await (await fs()).stat(path)).size;
        } catch (e) {
          size = undefined; // let a later call retry
          throw ioError(e);
        }
      })()),
    read: async (offset, length) => {
      checkRange(path, offset, length);
      const { open } = await fs();
      let fh;
      try {
        fh = await open(path, 'r');
      } catch (e) {
        throw ioError(e);
      }
      try {
        const out = new Uint8Array(length);
        let done = 0;
        while (done < length) {
          const { bytesRead } = await fh.read(out, done, length - done, offset + done);
          if (bytesRead === 0) {
            throw new FormatError(
              'truncated',
              path,
              `read of bytes ${offset}..${offset + length} runs past the end of the file (${offset + done} bytes)`,
            );
          }
          done += bytesRead;
        }
        return out;
      } catch (e) {
        throw e instanceof FormatError ? e : ioError(e);
      } finally {
        await fh.close();
      }
    },
  };
  return src;
}

/**
 * When a server ignores `Range` we must stream the file from its start. Bytes up to this limit are
 * kept so that header parsing (many small sequential reads) costs one download, not one each.
 */
const DEFAULT_PREFIX_CACHE = 64 << 20;

/**
 * A source over an HTTP(S) URL using range requests. Servers that answer `200` to a range request
 * are remembered and then read by streaming from the start, keeping up to `prefixCacheBytes`
 * (default 64 MiB) of the file's start in memory: all of a small file, or a big file's header.
 */
export function httpSource(url: string, init?: RequestInit, options: { prefixCacheBytes?: number } = {}): ByteSource {
  const PREFIX_CACHE_LIMIT = options.prefixCacheBytes ?? DEFAULT_PREFIX_CACHE;
  let knownSize: number | undefined;
  let sizePromise: Promise<number> | undefined;
  let rangeUnsupported = false;
  let prefix: Uint8Array | undefined; // bytes 0..prefix.length, when the server ignores ranges

  const request = (method: string, range?: string): Promise<Response> => {
    const headers = new Headers(init?.headers);
    if (range) headers.set('Range', range);
    return fetch(url, { ...init, method, headers }).catch((e: unknown) => {
      throw new FormatError('http', url, `request failed: ${(e as Error).message}`);
    });
  };
  const httpError = (res: Response, what: string): FormatError =>
    new FormatError('http', url, `${what} failed with HTTP ${res.status} ${res.statusText}`.trimEnd(), res.status);

  /** Total size from `Content-Range: bytes a-b/total`, or undefined when it says `*`. */
  const totalFromContentRange = (res: Response): number | undefined => {
    const m = /\/(\d+)\s*$/.exec(res.headers.get('Content-Range') ?? '');
    return m ? Number(m[1]) : undefined;
  };

  const fetchSize = async (): Promise<number> => {
    const head = await request('HEAD');
    const len = head.headers.get('Content-Length');
    // A compressed response's length is not the file's size.
    if (head.ok && len !== null && !head.headers.get('Content-Encoding')) return Number(len);
    // No usable HEAD (405, missing length): ask for one byte and read the total it reports.
    const res = await request('GET', 'bytes=0-0');
    if (res.status === 206) {
      const total = totalFromContentRange(res);
      await res.body?.cancel();
      if (total !== undefined) return total;
      throw new FormatError('http', url, 'server did not report the file size (Content-Range has no total)');
    }
    if (res.status === 200) {
      rangeUnsupported = true;
      const len = res.headers.get('Content-Length');
      if (len !== null && !res.headers.get('Content-Encoding')) {
        knownSize = Number(len);
        await readFromFullBody(res, 0, 0); // keeps the file as the prefix cache when it is small
        return knownSize;
      }
      // No length at all: counting the body is the only way.
      const body = new Uint8Array(await res.arrayBuffer());
      if (body.length <= PREFIX_CACHE_LIMIT) prefix = body;
      return body.length;
    }
    throw httpError(res, 'size request');
  };

  const size = (): Promise<number> => {
    if (knownSize !== undefined) return Promise.resolve(knownSize);
    sizePromise ??= fetchSize().then(
      (n) => (knownSize = n),
      (e) => {
        sizePromise = undefined; // let a later call retry
        throw e;
      },
    );
    return sizePromise;
  };

  /**
   * Streams a full (200) response, copying out [offset, offset + length). When the whole file (or
   * everything up to the range's end) fits the prefix cache, that much is kept for later reads.
   */
  const readFromFullBody = async (res: Response, offset: number, length: number): Promise<Uint8Array> => {
    const end = offset + length;
    const want = knownSize !== undefined && knownSize <= PREFIX_CACHE_LIMIT ? knownSize : end;
    const keepPrefix = want <= PREFIX_CACHE_LIMIT;
    const out = new Uint8Array(keepPrefix ? want : length);
    const outStart = keepPrefix ? 0 : offset;
    const outEnd = keepPrefix ? want : end;
    let pos = 0;
    const reader = res.body!.getReader();
    try {
      while (pos < outEnd) {
        const { done, value } = await reader.read();
        if (done) break;
        const from = Math.max(pos, outStart);
        const to = Math.min(pos + value.length, outEnd);
        if (to > from) out.set(value.subarray(from - pos, to - pos), from - outStart);
        pos += value.length;
      }
    } finally {
      await reader.cancel().catch(() => {});
    }
    if (pos < end) {
      throw new FormatError('truncated', url, `read of bytes ${offset}..${end} runs past the end of the file (${pos} bytes)`);
    }
    if (keepPrefix && (!prefix || prefix.length < pos)) prefix = pos < out.length ? out.subarray(0, pos) : out;
    return keepPrefix ? out.subarray(offset, end) : out;
  };

  const read = async (offset: number, length: number): Promise<Uint8Array> => {
    checkRange(url, offset, length, knownSize);
    if (length === 0) return new Uint8Array(0);
    const end = offset + length;
    if (prefix && end <= prefix.length) return prefix.subarray(offset, end);
    if (rangeUnsupported) {
      const res = await request('GET');
      if (!res.ok) throw httpError(res, 'read');
      return readFromFullBody(res, offset, length);
    }
    const res = await request('GET', `bytes=${offset}-${end - 1}`);
    if (res.status === 206) {
      const body = new Uint8Array(await res.arrayBuffer());
      const total = totalFromContentRange(res);
      if (total !== undefined) knownSize ??= total;
      if (body.length !== length) {
        throw new FormatError(
          'truncated',
          url,
          `asked for bytes ${offset}..${end} but got ${body.length} bytes` + (total !== undefined ? ` (file is ${total} bytes)` : ''),
        );
      }
      return body;
    }
    if (res.status === 200) {
      rangeUnsupported = true; // the server ignores Range: every later read streams from 0
      const len = res.headers.get('Content-Length');
      if (len !== null && !res.headers.get('Content-Encoding')) knownSize ??= Number(len);
      return readFromFullBody(res, offset, length);
    }
    if (res.status === 416) {
      const total = totalFromContentRange(res);
      await res.body?.cancel();
      throw new FormatError(
        'truncated',
        url,
        `read of bytes ${offset}..${end} runs past the end of the file` + (total !== undefined ? ` (${total} bytes)` : ''),
        416,
      );
    }
    await res.body?.cancel();
    throw httpError(res, `read of bytes ${offset}..${end}`);
  };

  return { name: url, size, read };
}
