/**
 * Errors as they cross a transport (worker, service worker, Node): plain `{name, code, message}`
 * objects that survive structured clone and JSON, turned back into an Error with the same fields
 * on the other side, never flattened to a string.
 */

export interface StructuredError {
  /** The original class name: `WebGPUError`, `LoadError`, `WorkerError`, ... */
  name: string;
  /** A stable code: `device_lost`, `out_of_memory`, `http`, `aborted`, `engine_unloaded`, ... */
  code: string;
  message: string;
}

/** An error that crossed a transport, keeping its original name and code. */
export class EngineError extends Error {
  readonly code: string;
  constructor(e: StructuredError, options?: { cause?: unknown }) {
    super(e.message, options);
    this.name = e.name;
    this.code = e.code;
  }

  toJSON(): StructuredError {
    return { name: this.name, code: this.code, message: this.message };
  }
}

/** Any thrown value as `{name, code, message}`; errors without a code get `internal`. */
export function toStructured(e: unknown): StructuredError {
  if (typeof e === 'object' && e !== null) {
    const o = e as { name?: unknown; code?: unknown; message?: unknown };
    const name = typeof o.name === 'string' ? o.name : 'Error';
    const code = typeof o.code === 'string' ? o.code : name === 'AbortError' ? 'aborted' : 'internal';
    const message = typeof o.message === 'string' ? o.message : String(e);
    return { name, code, message };
  }
  return { name: 'Error', code: 'internal', message: String(e) };
}

/** The inverse of toStructured (an Error passes through unchanged). */
export function fromStructured(v: unknown): Error {
  if (v instanceof Error) return v;
  return new EngineError(toStructured(v));
}

/** A fetch-style abort: the DOMException `fetch` rejects with (and errors a body with). */
export function abortError(signal?: AbortSignal): unknown {
  const reason = signal?.reason as unknown;
  if (reason instanceof Error && reason.name === 'AbortError') return reason;
  return new DOMException('This operation was aborted', 'AbortError');
}

/** An OpenAI-shaped error reply, for failures outside the API app (no engine, engine gone). */
export function errorResponse(status: number, message: string, type: string, code: string): Response {
  return new Response(JSON.stringify({ error: { message, type, param: null, code } }), {
    status,
    headers: { 'Content-Type': 'application/json', 'Access-Control-Allow-Origin': '*' },
  });
}

/** What a call on an unloaded engine rejects with (`stats()`; `fetch` answers `engineUnloaded()` instead). */
export const unloadedError = (message = 'the engine was unloaded'): EngineError => new EngineError({ name: 'EngineError', code: 'engine_unloaded', message });

/** What `injectFault` rejects with: fault injection is off, or the fault is not one it knows. */
export function faultError(fault: unknown, enabled: boolean): EngineError | null {
  if (!enabled) return new EngineError({ name: 'EngineError', code: 'fault_injection_disabled', message: 'fault injection is off: create the engine with faultInjection: true (serve --fault-injection)' });
  const kind = (fault as { kind?: unknown } | null)?.kind;
  if (kind !== 'device_lost') return new EngineError({ name: 'EngineError', code: 'unknown_fault', message: `unknown fault kind ${JSON.stringify(kind)}: the one kind is "device_lost"` });
  return null;
}

export const engineUnloaded = (): Response =>
  errorResponse(503, 'the engine was unloaded (or its worker stopped): create a new engine with createEngine()', 'service_unavailable', 'engine_unloaded');
