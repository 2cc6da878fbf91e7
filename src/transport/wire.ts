/**
 * Requests and responses as structured-cloneable objects, for postMessage to a Worker or between
 * a page and a service worker. Bodies cross as a transferred ArrayBuffer (requests) and a
 * transferred ReadableStream (responses), so a token stream keeps its backpressure and a cancel
 * on one side reaches the other.
 */

export interface WireRequest {
  url: string;
  method: string;
  headers: Array<[string, string]>;
  body: ArrayBuffer | null;
}

export interface WireResponse {
  status: number;
  statusText: string;
  headers: Array<[string, string]>;
  body: ReadableStream<Uint8Array> | null;
}

export async function toWireRequest(request: Request): Promise<WireRequest> {
  const hasBody = request.method !== 'GET' && request.method !== 'HEAD';
  return {
    url: request.url,
    method: request.method,
    headers: [...request.headers],
    body: hasBody ? await request.arrayBuffer() : null,
  };
}

export function fromWireRequest(w: WireRequest, signal?: AbortSignal): Request {
  return new Request(w.url, { method: w.method, headers: w.headers, body: w.body, signal });
}

export function toWireResponse(r: Response): WireResponse {
  return { status: r.status, statusText: r.statusText, headers: [...r.headers], body: r.body };
}

/** Statuses whose Response must not have a body. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

export function fromWireResponse(w: WireResponse): Response {
  return new Response(NULL_BODY.has(w.status) ? null : w.body, { status: w.status, statusText: w.statusText, headers: w.headers });
}

/** What to put in postMessage's transfer list for a message carrying `w`. */
export function transferables(w: WireRequest | WireResponse): Transferable[] {
  return w.body ? [w.body as unknown as Transferable] : [];
}
