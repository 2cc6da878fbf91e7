/**
 * Writes chunked file output (encodeGGUF, encodeSafetensors) to disk in Node. `node:fs` is
 * imported on call so that importing this module never breaks a browser bundle.
 */

/** Streams `chunks` into `path` (created or truncated); resolves with the bytes written. */
export async function writeChunks(path: string, chunks: Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<number> {
  const { open } = await import('node:fs/promises');
  const fh = await open(path, 'w');
  let total = 0;
  try {
    for await (const chunk of chunks) {
      let done = 0;
      while (done < chunk.length) {
        const { bytesWritten } = await fh.write(chunk, done, chunk.length - done);
        done += bytesWritten;
      }
      total += chunk.length;
    }
  } finally {
    await fh.close();
  }
  return total;
}
