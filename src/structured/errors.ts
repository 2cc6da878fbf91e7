/** Errors of structured output, apart so the limits and the compiler share them without a cycle. */

/** A schema, regex or grammar xgrammar refused: a 400 naming the request field. */
export class StructuredOutputError extends Error {
  override name = 'StructuredOutputError';
  constructor(
    readonly param: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
