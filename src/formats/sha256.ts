/**
 * SHA-256 through Web Crypto (browsers, Workers and Node alike), raw or as a hex key: the model
 * cache's URL keys, the prefix cache's image keys and the KV page files share it.
 */
export async function sha256(data: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', data));
}

/** Lower-case hex of `bytes`' first `n` bytes (all by default). */
export function hex(bytes: Uint8Array, n = bytes.length): string {
  return Array.from(bytes.subarray(0, n), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Hex SHA-256 of `data`, cut to its first `n` bytes (all 32 by default). */
export async function sha256Hex(data: Uint8Array<ArrayBuffer>, n?: number): Promise<string> {
  return hex(await sha256(data), n);
}
