/**
 * Messages between the service worker and the pages that host an engine (types only, so the
 * service worker script imports nothing at run time).
 *
 * SW → page (client.postMessage, one MessagePort `reply` transferred with each):
 *  - `ping`: "do you host an engine?" The page answers `{type: 'pong', model}` on the port.
 *  - `request`: a WireRequest (body transferred). The page answers once on the port with
 *    `{type: 'response', response}` (its body a transferred ReadableStream) or
 *    `{type: 'error', error}`; any later message the SW sends on the port (`'abort'`) aborts it.
 */
import type { StructuredError } from './errors';
import type { WireRequest, WireResponse } from './wire';

export const SW_TAG = 'webgpu-llm';

export type ToPage = { tag: typeof SW_TAG; type: 'ping' } | { tag: typeof SW_TAG; type: 'request'; request: WireRequest };

export type FromPage = { type: 'pong'; model: string } | { type: 'response'; response: WireResponse } | { type: 'error'; error: StructuredError };
