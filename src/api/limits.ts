/**
 * What one request may ask of the server before any work is done for it: body size, JSON nesting,
 * pattern size and a prompt's length bound. Each check is linear in the input and cannot overflow
 * the stack, so a hostile body is refused with a 4xx naming the limit before it costs anything.
 * docs/api.md lists these limits.
 */
import { GRAMMAR_LIMITS } from '../structured/limits';
import { ApiError, invalid } from './errors';

export interface RequestLimits {
  /** Largest request body in bytes (413 past it). */
  maxBodyBytes: number;
  /** Deepest nesting of JSON arrays and objects in a body. */
  maxJsonDepth: number;
  /** Longest regular expression (`stop_regex`) in characters. */
  maxPatternLength: number;
  /** How long a structured-output grammar new to the server may take to compile, in ms (400 past it; src/structured/probe.ts). */
  grammarCompileMs: number;
  /** Largest image file in bytes (a 400 past it). */
  maxImageBytes: number;
  /** Most pixels in one decoded image (a 400 past it, before its pixels are made). */
  maxImagePixels: number;
  /** Whether `http(s)` image URLs are fetched: true in pages, off in the Node server unless allowed (`serve --allow-image-urls`). */
  remoteImages: boolean;
  /** How long fetching one image URL may take, in ms (a 400 past it). */
  imageFetchMs: number;
}

export const DEFAULT_LIMITS: RequestLimits = {
  // A 128k-token prompt is well under 4 MiB of text; base64 images take 4/3 of their bytes.
  maxBodyBytes: 32 * 1024 * 1024,
  // Real JSON schemas and tool parameters nest a few levels; templates and grammars recurse over them.
  maxJsonDepth: 128,
  maxPatternLength: 16 * 1024,
  grammarCompileMs: GRAMMAR_LIMITS.compileTimeMs,
  // OpenAI's own limit per image is 20 MB; 8192 x 8192 is past any tile grid a model takes.
  maxImageBytes: 20 * 1024 * 1024,
  maxImagePixels: 8192 * 8192,
  remoteImages: true,
  imageFetchMs: 10_000,
};

export const tooLarge = (limit: number) =>
  new ApiError(413, `the request body is larger than the server's limit of ${limit} bytes`, 'invalid_request_error', null, 'request_too_large');

/**
 * A message's body (a request's, or a fetched image's), read chunk by chunk and refused with
 * `tooBig(bytes)` as soon as it passes `maxBytes`; a declared Content-Length past it is refused
 * before reading anything, so a huge body never sits in memory. A read that fails rejects as the
 * stream did.
 */
export async function readCapped(m: { headers: Headers; body: ReadableStream<Uint8Array> | null }, maxBytes: number, tooBig: (bytes: number) => Error): Promise<Uint8Array> {
  const declared = Number(m.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    void m.body?.cancel().catch(() => {});
    throw tooBig(declared);
  }
  if (!m.body) return new Uint8Array(0);
  const reader = m.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      void reader.cancel().catch(() => {});
      throw tooBig(total);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) bytes.set(c, at), (at += c.byteLength);
  return bytes;
}

/** The request's body as UTF-8 text within `maxBytes` (413 past it, 400 for a failed read or bad UTF-8). */
export async function readBodyText(request: Request, maxBytes: number): Promise<string> {
  let bytes: Uint8Array;
  try {
    bytes = await readCapped(request, maxBytes, () => tooLarge(maxBytes));
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw invalid(null, `could not read the request body: ${(e as Error).message}`);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw invalid(null, 'the request body is not valid UTF-8', 'invalid_json');
  }
}

/**
 * Throws a 400 when arrays/objects in `text` nest deeper than `maxDepth`. A plain scan (strings
 * and their escapes skipped), so it runs before JSON.parse and whatever recurses over the result.
 */
export function checkJsonDepth(text: string, maxDepth: number): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth)
        throw invalid(null, `the request body nests JSON deeper than the limit of ${maxDepth} levels`, 'json_too_deep');
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
}

/** Throws a 400 naming `param` when a pattern is longer than the limit. */
export function checkPatternLength(pattern: string, param: string, max = DEFAULT_LIMITS.maxPatternLength): void {
  if (pattern.length > max) throw invalid(param, `${param} is ${pattern.length} characters long; the limit is ${max}`, 'pattern_too_long');
}

const longestToken = new WeakMap<readonly string[], number>();

/**
 * Refuses, without tokenizing, a prompt that cannot fit: no token covers more source text than
 * the longest vocabulary entry spells out (a byte-level token's string has one character per
 * byte, a byte-fallback `<0xNN>` six for one, `▁` one for a space), so a prompt needs at least
 * length / longest tokens. The factor 4 leaves room for normalisers that merge characters (NFC).
 * Keeps a multi-megabyte prompt from holding the event loop in the tokenizer only to be refused.
 */
export function checkPromptBound(text: string, vocab: readonly string[], contextLength: number, param: string): void {
  let longest = longestToken.get(vocab);
  if (longest === undefined) {
    longest = 1;
    for (const t of vocab) if (t.length > longest) longest = t.length;
    longestToken.set(vocab, longest);
  }
  const bound = contextLength * longest * 4;
  if (text.length > bound)
    throw invalid(
      param,
      `This model's maximum context length is ${contextLength} tokens; a prompt of ${text.length} characters cannot fit ` +
        `(at most ${longest} characters per token). Shorten the prompt.`,
      'context_length_exceeded',
    );
}
