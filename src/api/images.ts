/**
 * The images of a chat request: found in the messages in order (each user message's parts in
 * order), fetched (a `data:` URL read in place; `http(s):` and `blob:` through the platform's
 * fetch, within a size and time limit, when the server allows it) and decoded (src/platform/decode-image.ts).
 * Every failure is a 400 naming the part.
 */
import { decodeImage, ImageDecodeError, type RgbImage } from '../platform/decode-image';
import type { ChatMessage } from '../text/index';
import { invalid } from './errors';
import { readCapped } from './limits';

/** What a request may send as images (RequestLimits' image fields). */
export interface ImageLimits {
  /** Largest image file in bytes. */
  maxImageBytes: number;
  /** Most pixels in one decoded image. */
  maxImagePixels: number;
  /** Whether `http(s):` URLs are fetched (blob: and data: URLs always are). */
  remoteImages: boolean;
  /** How long fetching one image may take, in ms. */
  imageFetchMs: number;
}

/** One `image_url` part: where it is in the request and what it points at. */
export interface ImagePart {
  /** `messages[i].content[j]` */
  param: string;
  url: string;
}

/** The image parts of the conversation, in the order the template places them. */
export function findImageParts(messages: readonly ChatMessage[]): ImagePart[] {
  const out: ImagePart[] = [];
  messages.forEach((m, i) => {
    if (!Array.isArray(m.content)) return;
    m.content.forEach((p, j) => {
      if (p.type === 'image_url') out.push({ param: `messages[${i}].content[${j}]`, url: (p.image_url as { url: string }).url });
    });
  });
  return out;
}

/** The part's bytes, then its pixels; a 400 naming the part for anything that fails. */
export async function loadImage(part: ImagePart, limits: ImageLimits, signal?: AbortSignal): Promise<RgbImage> {
  const bytes = await imageBytes(part, limits, signal);
  try {
    return await decodeImage(bytes, limits.maxImagePixels);
  } catch (e) {
    if (e instanceof ImageDecodeError) {
      if (e.code === 'no_decoder') throw e;
      throw invalid(`${part.param}.image_url.url`, `${part.param}: ${e.message} (PNG, JPEG, WebP and GIF images are decoded; a GIF's first frame)`, 'invalid_image');
    }
    throw e;
  }
}

async function imageBytes(part: ImagePart, limits: ImageLimits, signal?: AbortSignal): Promise<Uint8Array> {
  const param = `${part.param}.image_url.url`;
  const url = part.url;
  const tooBig = (n: number) => invalid(param, `${part.param}: the image is ${n} bytes, more than the limit of ${limits.maxImageBytes}`, 'image_too_large');
  if (url.startsWith('data:')) {
    const bytes = parseDataUrl(url, param);
    if (bytes.length > limits.maxImageBytes) throw tooBig(bytes.length);
    return bytes;
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== 'http' && scheme !== 'https' && scheme !== 'blob')
    throw invalid(param, `${part.param}: image_url.url must be a data: URL (data:image/png;base64,...) or an http(s) URL`, 'invalid_image_url');
  if (scheme !== 'blob' && !limits.remoteImages)
    throw invalid(param, `${part.param}: this server does not fetch image URLs; send the image as a data: URL (base64)`, 'image_url_not_allowed');
  const timeout = AbortSignal.timeout(limits.imageFetchMs);
  const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
  try {
    const res = await fetch(url, { signal: both, redirect: 'follow' });
    if (!res.ok) throw invalid(param, `${part.param}: fetching the image answered HTTP ${res.status}`, 'image_fetch_failed');
    return await readCapped(res, limits.maxImageBytes, tooBig);
  } catch (e) {
    if (e instanceof Error && e.name === 'ApiError') throw e;
    const why = timeout.aborted ? `took longer than ${limits.imageFetchMs} ms` : (e as Error).message;
    throw invalid(param, `${part.param}: the image could not be fetched: ${why}`, 'image_fetch_failed');
  }
}

/** RFC 2397: `data:[<mediatype>][;base64],<data>`; the media type is not trusted (the bytes say the format). */
function parseDataUrl(url: string, param: string): Uint8Array {
  const comma = url.indexOf(',');
  if (comma < 0) throw invalid(param, `${param}: a data: URL needs a comma before its data`, 'invalid_image_url');
  const meta = url.slice(5, comma);
  const body = url.slice(comma + 1);
  if (/;base64$/i.test(meta)) {
    const clean = body.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) throw invalid(param, `${param}: the data: URL's base64 is not valid`, 'invalid_image_url');
    let bin: string;
    try {
      bin = atob(clean.replace(/-/g, '+').replace(/_/g, '/'));
    } catch {
      throw invalid(param, `${param}: the data: URL's base64 is not valid`, 'invalid_image_url');
    }
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  // Percent-encoded bytes: %XX is one byte, any other character its own code (Latin-1).
  const out: number[] = [];
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '%') {
      const hex = body.slice(i + 1, i + 3);
      if (!/^[0-9a-f]{2}$/i.test(hex)) throw invalid(param, `${param}: the data: URL's percent-encoding is not valid`, 'invalid_image_url');
      out.push(parseInt(hex, 16));
      i += 2;
    } else out.push(body.charCodeAt(i) & 0xff);
  }
  return Uint8Array.from(out);
}
