/**
 * A `fetch` over a `handle(Request) => Promise<Response>`, with fetch's abort behaviour: an
 * aborted signal rejects before the reply and errors the body after it (an AbortError, which the
 * OpenAI client reads as a quiet end), and the abort also cancels the body, so generation stops.
 */
import { abortError, engineUnloaded } from './errors';

export type Handle = (request: Request) => Promise<Response>;

/** The Request `fetch(input, init)` would send. Relative URLs resolve against the page, if any. */
export function toRequest(input: RequestInfo | URL, init?: RequestInit): Request {
  if (typeof input === 'string' || input instanceof URL) {
    const base = typeof location !== 'undefined' ? location.href : 'http://localhost/';
    return new Request(new URL(input, base), init);
  }
  return init ? new Request(input, init) : input;
}

/**
 * `fetch` over `handle`. `closing` fires on unload: in-flight requests end as if aborted (so
 * the engine can be disposed) and later calls answer 503 `engine_unloaded`.
 */
export function fetchOver(handle: Handle, closing: AbortSignal): (input: RequestInfo | URL, init?: RequestInit) => Promise<Response> {
  return async (input, init) => {
    const request = toRequest(input, init);
    if (request.signal.aborted) throw abortError(request.signal);
    if (closing.aborted) return engineUnloaded();
    const signal = AbortSignal.any([request.signal, closing]);
    let response: Response;
    try {
      response = await untilAborted(handle(new Request(request, { signal })), signal, (r) => void r.body?.cancel().catch(() => {}));
    } catch (e) {
      if (closing.aborted && !request.signal.aborted) return engineUnloaded();
      throw e;
    }
    return withAbortableBody(response, signal);
  };
}

/** `promise`, or a rejection with AbortError when `signal` fires first (`late` gets the value that came too late). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, late?: (value: T) => void): Promise<T> {
  if (signal.aborted) {
    void promise.then((v) => late?.(v), () => {});
    return Promise.reject(abortError(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      reject(abortError(signal));
      void promise.then((v) => late?.(v), () => {});
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) return; // already rejected; `late` has it
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** The same response whose body errors with AbortError (and cancels its source) when `signal` fires. */
export function withAbortableBody(response: Response, signal: AbortSignal, onEnd?: () => void): Response {
  const source = response.body;
  if (!source) {
    onEnd?.();
    return response;
  }
  const reader = source.getReader();
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    signal.removeEventListener('abort', onAbort);
    onEnd?.();
  };
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const onAbort = () => {
    if (finished) return;
    finish();
    void reader.cancel(signal.reason).catch(() => {});
    controller.error(abortError(signal));
  };
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      signal.addEventListener('abort', onAbort, { once: true });
    },
    async pull(c) {
      try {
        const { done, value } = await reader.read();
        if (finished) return;
        if (done) {
          finish();
          c.close();
        } else c.enqueue(value);
      } catch (e) {
        if (finished) return;
        finish();
        c.error(e);
      }
    },
    async cancel(reason) {
      finish();
      await reader.cancel(reason).catch(() => {});
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
