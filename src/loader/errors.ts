/**
 * LoadError: the one error a model load rejects with. It wraps the formats layer's FormatError and
 * the model layer's ModelError so that every failure says which file and what is wrong, with a
 * stable `code` for the UI and the HTTP status when a server refused.
 */
import { FormatError, type FormatErrorCode } from '../formats/types';
import { ModelError, type ModelErrorCode } from '../model/errors';

export type LoadErrorCode =
  | FormatErrorCode // from the file readers: bad_magic, truncated, out_of_range, http, io, ...
  | ModelErrorCode // from the model layer: unsupported_arch, tensor_shape, missing_file, ...
  | 'network' // the request never got an answer (offline, DNS, CORS)
  | 'not_a_model_file' // the server answered with a web page where a model file should be
  | 'aborted' // the caller's AbortSignal fired
  | 'cache' // the model cache could not be read or written
  | 'bad_input'; // the input names no model we can locate

export class LoadError extends Error {
  override readonly name = 'LoadError';
  constructor(
    readonly code: LoadErrorCode,
    /** The URL, path or file name at fault (the model's location when no single file is). */
    readonly file: string,
    /** What is wrong (`message` is `file: detail`, or `detail` when it already names the file). */
    readonly detail: string,
    /** The HTTP status when a server refused. */
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    // A detail that already starts with the file (some model-layer messages do) is kept whole.
    super(file && !detail.startsWith(file) ? `${file}: ${detail}` : detail, options);
  }

  toJSON(): { name: string; code: LoadErrorCode; file: string; message: string; status?: number } {
    return { name: this.name, code: this.code, file: this.file, message: this.message, status: this.status };
  }
}

/** True for the error fetch and streams reject with when an AbortSignal fires. */
export function isAbortError(e: unknown): boolean {
  return (
    (e instanceof LoadError && e.code === 'aborted') ||
    (typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'AbortError')
  );
}

export function abortedError(file: string): LoadError {
  return new LoadError('aborted', file, 'loading was aborted');
}

/** Throws the abort LoadError when `signal` has fired. */
export function throwIfAborted(signal: AbortSignal | undefined, file: string): void {
  if (signal?.aborted) throw abortedError(file);
}

/** Config-level ModelError codes: they are about config.json (or a GGUF's metadata). */
const CONFIG_CODES: ReadonlySet<ModelErrorCode> = new Set(['unsupported_arch', 'missing_field', 'invalid_field']);

/**
 * Any failure as a LoadError. `where` describes the model for errors that carry no file: the GGUF
 * file, or the folder (config errors then name its config.json).
 */
export function toLoadError(e: unknown, where: { file: string; folder?: boolean }, signal?: AbortSignal): LoadError {
  if (e instanceof LoadError) return e;
  if (signal?.aborted || isAbortError(e)) return abortedError(where.file);
  if (e instanceof FormatError) {
    // FormatError's message is already "file: detail"; keep the detail only.
    const prefix = `${e.file}: `;
    const detail = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
    return new LoadError(e.code, e.file, detail, e.status, { cause: e });
  }
  if (e instanceof ModelError) {
    let file = where.file;
    if (where.folder) {
      if (e.code === 'missing_file' && e.field) file = joinFile(where.file, e.field);
      else if (CONFIG_CODES.has(e.code)) file = joinFile(where.file, 'config.json');
    }
    return new LoadError(e.code, file, e.message, undefined, { cause: e });
  }
  const message = e instanceof Error ? e.message : String(e);
  return new LoadError('io', where.file, message, undefined, { cause: e });
}

function joinFile(folder: string, file: string): string {
  return `${folder.replace(/[\\/]+$/, '')}/${file}`;
}
