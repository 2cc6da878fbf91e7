/**
 * Typed errors of the text layer. The API layer maps `TemplateError` to HTTP 400
 * (`invalid_request_error`) with the template's own message.
 */

export type TemplateErrorCode =
  /** The template called `raise_exception(message)`: the request does not suit this model. */
  | 'raise_exception'
  /** The template text does not parse. */
  | 'syntax'
  /** Rendering failed (a type error inside the template, an unsupported construct). */
  | 'render'
  /** `continue_final_message` was asked but the last message is not an assistant turn, or its text was not found. */
  | 'continue_final_message'
  /** The request fields are malformed (e.g. a message without a role). */
  | 'invalid_messages';

export class TemplateError extends Error {
  override name = 'TemplateError';
  constructor(
    readonly code: TemplateErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export type TokenizerErrorCode = 'invalid_tokenizer' | 'unsupported_model' | 'missing_field' | 'invalid_id';

export class TokenizerError extends Error {
  override name = 'TokenizerError';
  constructor(
    readonly code: TokenizerErrorCode,
    message: string,
    /** The JSON key or GGUF metadata key at fault, when there is one. */
    readonly field?: string,
  ) {
    super(message);
  }
}
