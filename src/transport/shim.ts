/**
 * The in-page fetch shim: `globalThis.fetch` answers requests under one base URL from the
 * engine and passes everything else to the fetch it replaced, untouched. Clients that captured
 * `fetch` before the shim (an OpenAI client constructed earlier) keep the old one.
 */
import type { EngineHandle } from './types';

export interface FetchShimOptions {
  /** Requests whose URL starts with this go to the engine (default `/v1` on this page's origin). */
  baseURL?: string;
}

function requestURL(input: RequestInfo | URL, base: string): URL | null {
  try {
    if (input instanceof URL) return input;
    if (typeof input === 'string') return new URL(input, base);
    return new URL(input.url);
  } catch {
    return null;
  }
}

/** Patches `globalThis.fetch`; returns the uninstall. */
export function installFetchShim(engine: EngineHandle, options: FetchShimOptions = {}): () => void {
  const here = typeof location !== 'undefined' ? location.href : 'http://localhost/';
  const base = new URL(options.baseURL ?? '/v1', here);
  const prefix = base.pathname.replace(/\/+$/, '');
  const matches = (u: URL) => u.origin === base.origin && (u.pathname === prefix || u.pathname.startsWith(prefix + '/'));

  const original = globalThis.fetch;
  let active = true;
  const shim: typeof fetch = function (input: RequestInfo | URL, init?: RequestInit) {
    const url = active ? requestURL(input, here) : null;
    if (url && matches(url)) return engine.fetch(input, init);
    return original.call(globalThis, input, init);
  };
  globalThis.fetch = shim;
  return () => {
    active = false;
    // Someone patched fetch after us: leave theirs in place; ours now only passes through.
    if (globalThis.fetch === shim) globalThis.fetch = original;
  };
}
