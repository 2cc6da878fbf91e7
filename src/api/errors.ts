/**
 * API errors: one class with an HTTP status and OpenAI's `{error: {message, type, param, code}}`
 * body, and the mapping of every other error (template, tokenizer, GPU) onto it.
 */
import { WebGPUError } from '../gpu/errors';
import { BackendError } from '../engine/errors';
import { ModelError } from '../model/errors';
import { TemplateError, TokenizerError } from '../text/errors';

export type ErrorType = 'invalid_request_error' | 'authentication_error' | 'not_found_error' | 'server_error' | 'service_unavailable';

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: string | null };
}

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
    readonly type: ErrorType,
    /** The request field at fault (`temperature`, `messages[2].content`), when there is one. */
    readonly param: string | null = null,
    readonly code: string | null = null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  toJSON(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 400 for a bad field: the message names the field and what it allows. */
export const invalid = (param: string | null, message: string, code: string | null = null): ApiError =>
  new ApiError(400, message, 'invalid_request_error', param, code);

/** A field we know but cannot honour yet, refused by name rather than silently ignored. */
export const unsupported = (param: string, what: string): ApiError =>
  new ApiError(400, `${param}: ${what} is not supported yet`, 'invalid_request_error', param, 'unsupported_parameter');

/** Any thrown value as an ApiError: request-shaped faults are 400s, the rest 500s with the cause. */
export function toApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof TemplateError) {
    const param = e.code === 'continue_final_message' ? 'continue_final_message' : 'messages';
    return new ApiError(400, `chat template: ${e.message}`, 'invalid_request_error', param, e.code, { cause: e });
  }
  if (e instanceof TokenizerError) return new ApiError(400, e.message, 'invalid_request_error', e.field ?? null, e.code, { cause: e });
  if (e instanceof BackendError) {
    const type: ErrorType = e.status === 400 || e.status === 404 || e.status === 409 ? 'invalid_request_error' : e.status === 503 ? 'service_unavailable' : 'server_error';
    return new ApiError(e.status, e.message, type, e.param, e.code, { cause: e });
  }
  if (e instanceof ModelError) return new ApiError(500, `model: ${e.message}`, 'server_error', e.field ?? null, e.code, { cause: e });
  if (e instanceof WebGPUError) {
    const msg = `GPU fault (${e.code}): ${e.message}`;
    return new ApiError(500, msg, 'server_error', null, e.code, { cause: e });
  }
  const err = e instanceof Error ? e : new Error(String(e));
  return new ApiError(500, `internal error: ${err.name}: ${err.message}`, 'server_error', null, 'internal_error', { cause: err });
}
