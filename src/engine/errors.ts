/**
 * Typed errors of the backends (GPU engine and CPU reference). Each has a stable `code` and the
 * HTTP `status` it means to a client: 400 for a request the model cannot take (it will never
 * succeed as sent), 503 for a state that passes (the KV cache full under load, an engine being
 * unloaded), 500 for a fault of ours. The API layer (`toApiError`) maps them by these fields.
 */
export type BackendErrorCode =
  | 'invalid_prompt' // a prompt id outside the vocabulary, or an empty prompt
  | 'context_length_exceeded' // prompt (+ output) longer than the context
  | 'kv_cache_full' // no free KV pages for the step
  | 'backend_disposed' // generate() after dispose()
  | 'precision_unsupported' // f16 asked on a GPU without shader-f16
  | 'grammar_dead_end' // the grammar allows no token where the output cannot end yet
  | 'grammar_refused' // the grammar refused a token its own mask allowed
  | 'lora_not_found' // a request or an unload names an adapter that is not loaded
  | 'lora_exists' // a load names an adapter already loaded
  | 'lora_pool_full' // the adapter pool has no room (or no id) for another adapter
  | 'lora_unsupported' // an adapter for a model that takes none (an encoder)
  | 'routed_experts_unavailable' // return_routed_experts on a model without experts
  | 'invalid_field'; // a request field this model cannot take (speculative "mtp" without an MTP head)

export class BackendError extends Error {
  override name = 'BackendError';
  constructor(
    readonly code: BackendErrorCode,
    /** The HTTP status this error means to a client. */
    readonly status: 400 | 404 | 409 | 500 | 503,
    message: string,
    /** The request field at fault, when there is one. */
    readonly param: string | null = null,
  ) {
    super(message);
  }

  toJSON(): { name: string; code: BackendErrorCode; message: string } {
    return { name: this.name, code: this.code, message: this.message };
  }
}

export class InvalidPromptError extends BackendError {
  override name = 'InvalidPromptError';
  constructor(message: string) {
    super('invalid_prompt', 400, message);
  }
}

export class ContextLengthError extends BackendError {
  override name = 'ContextLengthError';
  constructor(message: string) {
    super('context_length_exceeded', 400, message);
  }
}

/** No free KV pages: passes as other sequences finish, so a 503 (retry), not the client's fault. */
export class KvCacheFullError extends BackendError {
  override name = 'KvCacheFullError';
  constructor(needed: number, free: number, pageSize: number) {
    super('kv_cache_full', 503, `The KV cache is full: ${needed} more pages of ${pageSize} tokens are needed but ${free} are free. Retry later, or shorten the prompt or max_tokens.`);
  }
}

export class BackendDisposedError extends BackendError {
  override name = 'BackendDisposedError';
  constructor(backend: string) {
    super('backend_disposed', 503, `${backend}: generate() after dispose(): the model was unloaded`);
  }
}

export class PrecisionUnsupportedError extends BackendError {
  override name = 'PrecisionUnsupportedError';
  constructor() {
    super('precision_unsupported', 500, 'precision f16 needs the shader-f16 feature, which this GPU does not offer');
  }
}

/**
 * The output reached a point where the request's grammar allows no token and cannot end: the
 * grammar has a dead end (compile-time checks refuse those they can see: productive.ts). The
 * choice ends with this error; the request as sent cannot succeed, so a 400 naming the grammar's field.
 */
export class GrammarDeadEndError extends BackendError {
  override name = 'GrammarDeadEndError';
  constructor(generated: number, param: string | null) {
    const field = param ?? 'the grammar';
    super('grammar_dead_end', 400, `${field}: after ${generated} tokens of output the grammar allows no next token and cannot end there; it has a dead end`, param);
  }
}

/**
 * The grammar refused a token its own mask allowed. It ends that choice alone (the server goes
 * on), as a 400 naming the grammar's field: the grammar engine cannot follow this grammar, so the
 * request as sent will not succeed, and the field is the one to change.
 */
export class GrammarRefusedError extends BackendError {
  override name = 'GrammarRefusedError';
  constructor(
    readonly token: number,
    param: string | null,
  ) {
    super('grammar_refused', 400, `${param ?? 'structured output'}: the grammar engine refused token ${token}, which the grammar's mask allowed; the grammar cannot be followed`, param);
  }
}

/** A request (`model: "base:name"`, `lora_path`) or an unload names an adapter that is not loaded. */
export class LoraNotFoundError extends BackendError {
  override name = 'LoraNotFoundError';
  constructor(adapter: string, loaded: readonly string[], param: string | null = 'model') {
    const list = loaded.length ? `loaded: ${loaded.map((n) => `"${n}"`).join(', ')}` : 'no adapter is loaded';
    super('lora_not_found', 404, `The LoRA adapter "${adapter}" is not loaded (${list})`, param);
  }
}

/** A load names an adapter that is loaded already: unload it first (a name means one set of weights). */
export class LoraExistsError extends BackendError {
  override name = 'LoraExistsError';
  constructor(adapter: string) {
    super('lora_exists', 409, `A LoRA adapter named "${adapter}" is loaded already: unload it first, or choose another name`, 'lora_name');
  }
}

/** An adapter for a model that takes none: the BERT encoder runs its own weights only. */
export class LoraUnsupportedError extends BackendError {
  override name = 'LoraUnsupportedError';
  constructor(model: string) {
    super('lora_unsupported', 400, `the model ${model} takes no LoRA adapters (only the decoder engine does)`, 'model');
  }
}

/** The adapter pool has no room: unload an adapter, or give the engine a larger pool. */
export class LoraPoolFullError extends BackendError {
  override name = 'LoraPoolFullError';
  constructor(message: string) {
    super('lora_pool_full', 409, message);
  }
}
