/**
 * One persisted KV page (./kv-persist.ts) as bytes: what makes it valid, and its name in a store.
 *
 * A page's K/V depend on the weights, the activation precision, the LoRA adapter and every token
 * before it, not only its own: a page is valid only with its whole prefix. Its name is a hash of
 * all of these (the model key holds the weights' fingerprint, the precision and the page layout),
 * and the file holds them again in full, so a read checks them exactly instead of trusting the
 * hash. A SHA-256 of the whole file ends it: a flipped or missing byte, a file of another model or
 * another version is refused (`decodePageFile` returns why), never uploaded.
 *
 * Layout: "WGKV", u32 version, u32 header length, the header (JSON: model key, namespace, page
 * size, token count, payload bytes), the prefix's token ids (u32 each), the payload (every paged
 * layer's K page then V page, in layer order, as the GPU holds them), 32 bytes of SHA-256 over all
 * that precedes it. Little-endian throughout.
 */
import { hex, sha256, sha256Hex } from '../formats/sha256';

const MAGIC = 0x564b4757; // "WGKV" read as a little-endian u32
const VERSION = 1;
const DIGEST_BYTES = 32;

/** What a page file must match to be used. */
export interface PageKey {
  /** The model's fingerprint, precision and page layout (`modelKey`). */
  model: string;
  /** The prefix cache's namespace ('' for the base model). */
  namespace: string;
  pageSize: number;
  /** Every token id from the start of the sequence to the end of this page. */
  ids: readonly number[];
}


/** A hex key for strings and numbers (e.g. the model fingerprint, precision and layout). */
export async function hashKey(parts: ReadonlyArray<string | number>, chunks: readonly Uint8Array[] = []): Promise<string> {
  const text = new TextEncoder().encode(JSON.stringify(parts));
  const all = new Uint8Array(text.length + chunks.reduce((n, c) => n + c.length, 0));
  all.set(text);
  let at = text.length;
  for (const c of chunks) all.set(c, at), (at += c.length);
  return sha256Hex(all, 16);
}

/** The page's name in a store: `<model key>/<hash of namespace and ids>`. */
export async function pageName(key: PageKey): Promise<string> {
  const ids = new Uint8Array(new Uint32Array(key.ids).buffer);
  return `${key.model}/${await hashKey([key.namespace, key.pageSize], [ids])}`;
}

/** The file of one page: header, ids, payload, digest. */
export async function encodePageFile(key: PageKey, payload: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  const header = new TextEncoder().encode(JSON.stringify({ model: key.model, namespace: key.namespace, pageSize: key.pageSize, tokens: key.ids.length, bytes: payload.length }));
  const headerPad = Math.ceil(header.length / 4) * 4;
  const body = 12 + headerPad + 4 * key.ids.length + payload.length;
  const out = new Uint8Array(body + DIGEST_BYTES);
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, VERSION, true);
  view.setUint32(8, header.length, true);
  out.set(header, 12);
  let at = 12 + headerPad;
  for (const id of key.ids) view.setUint32(at, id, true), (at += 4);
  out.set(payload, at);
  out.set(await sha256(out.subarray(0, body)), body);
  return out;
}

/** The payload of a page file if it is intact and is the page `key` names; else why not. */
export async function decodePageFile(file: Uint8Array<ArrayBuffer>, key: PageKey, payloadBytes: number): Promise<{ payload: Uint8Array<ArrayBuffer> } | { refused: string }> {
  if (file.length < 12 + DIGEST_BYTES) return { refused: 'truncated' };
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  if (view.getUint32(0, true) !== MAGIC) return { refused: 'not a KV page file' };
  if (view.getUint32(4, true) !== VERSION) return { refused: `version ${view.getUint32(4, true)}, not ${VERSION}` };
  const body = file.length - DIGEST_BYTES;
  const digest = await sha256(file.slice(0, body));
  if (hex(digest) !== hex(file.subarray(body))) return { refused: 'checksum mismatch (corrupt or truncated)' };
  const headerLen = view.getUint32(8, true);
  const headerPad = Math.ceil(headerLen / 4) * 4;
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder().decode(file.subarray(12, 12 + headerLen))) as Record<string, unknown>;
  } catch {
    return { refused: 'unreadable header' };
  }
  if (header.model !== key.model || header.namespace !== key.namespace || header.pageSize !== key.pageSize) return { refused: 'another model, precision, adapter or page size' };
  if (header.tokens !== key.ids.length || header.bytes !== payloadBytes) return { refused: 'another prefix length or page size in bytes' };
  let at = 12 + headerPad;
  if (at + 4 * key.ids.length + payloadBytes !== body) return { refused: 'wrong length' };
  for (const id of key.ids) {
    if (view.getUint32(at, true) !== id) return { refused: 'another token prefix' };
    at += 4;
  }
  return { payload: file.subarray(at, body) };
}
