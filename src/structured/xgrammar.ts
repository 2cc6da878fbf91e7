/**
 * Loads `@mlc-ai/web-xgrammar` once, lazily: only requests that ask for structured output pay
 * for it (1.1 MB of JS with the wasm embedded as base64, about 390 KB gzipped; nothing else is
 * fetched, so it needs no asset URL in a page, a module Worker or a bundle).
 *
 * In Node the package cannot be `import`ed: it is a UMD/CommonJS bundle inside a
 * `"type": "module"` package. There we evaluate its file as CommonJS ourselves, which also lets us
 * hand it our own `console`. In browsers a bundler (Vite's dev optimizer, a production build)
 * converts it, or, imported unbundled as a native module, it defines `globalThis.xgrammar`.
 *
 * xgrammar reports why a schema, grammar or regex is invalid only on stderr
 * (`[FATAL] file:line: message`) and then throws a bare `Aborted()`, so the captured line is the
 * only way to tell the user what is wrong: both paths route its stderr through `stderrFilter`.
 *
 * Service workers forbid `import()`; the service worker here only relays to a page that hosts
 * the engine (src/transport/sw-relay.ts), so xgrammar runs in that page or its Worker.
 */
type XGrammar = typeof import('@mlc-ai/web-xgrammar');

let loading: Promise<XGrammar> | null = null;
/** The last `[FATAL]` message xgrammar printed. */
let lastFatal: string | null = null;
/** Bumped each time the instance is discarded: what was built on an older one must be rebuilt. */
let generation = 0;

export function loadXGrammar(): Promise<XGrammar> {
  loading ??= (isNode() ? loadInNode() : loadInBrowser()).catch((e) => {
    loading = null;
    throw e;
  });
  return loading;
}

/** Which xgrammar instance `loadXGrammar` gives now; compilers and tokenizer infos belong to one. */
export function xgrammarGeneration(): number {
  return generation;
}

/**
 * Drops the current instance after it failed inside its wasm: an emscripten module that aborted
 * or trapped (out-of-bounds access, stack overflow) has undefined state: it may answer the next
 * call with another trap, or spin forever on a lock the aborted call held. The next
 * `loadXGrammar` builds a fresh one (Node evaluates the package again). Returns false where a
 * fresh instance cannot be had: in browsers the bundled module is evaluated once per realm, so
 * there the limits checked before compiling (src/structured/limits.ts) are what keeps it sound.
 */
export function discardXGrammar(): boolean {
  if (!isNode()) return false;
  loading = null;
  generation++;
  return true;
}

/** Runs `fn`, turning xgrammar's abort into an Error carrying the message it printed. */
export async function withFatalMessage<T>(fn: () => Promise<T> | T): Promise<T> {
  lastFatal = null;
  try {
    return await fn();
  } catch (e) {
    const detail = lastFatal ?? (e instanceof Error ? e.message : String(e));
    throw new Error(detail, { cause: e });
  } finally {
    lastFatal = null;
  }
}

/** The message of xgrammar's `[FATAL] file:line: message` stderr line, or null for any other line. */
export function fatalMessage(text: string): string | null {
  const m = /\[FATAL\][^:]*:\d+:\s*(.*)$/s.exec(text);
  return m ? m[1]!.replace(/^Check failed: \(.*?\) is false:\s*/s, '').trim() : null;
}

/**
 * xgrammar's stderr: keeps the `[FATAL]` message for `withFatalMessage`, drops the `Aborted()`
 * that follows it and passes anything else to `forward`.
 */
function stderrFilter(forward: (...args: unknown[]) => void): (...args: unknown[]) => void {
  return (...args) => {
    const text = args.map(String).join(' ');
    const fatal = fatalMessage(text);
    if (fatal !== null) lastFatal = fatal;
    else if (!/^Aborted\(/.test(text)) forward(...args);
  };
}

/** The package's exports, however the context turned its UMD file into a module. */
function exportsOf(m: unknown): XGrammar {
  const candidates = [m, (m as { default?: unknown } | null)?.default, (globalThis as { xgrammar?: unknown }).xgrammar];
  const found = candidates.find((c) => typeof (c as Partial<XGrammar> | null)?.GrammarCompiler?.createGrammarCompiler === 'function');
  if (!found) throw new Error('@mlc-ai/web-xgrammar loaded but exposes no GrammarCompiler: was its UMD/CommonJS file bundled as a plain ES module?');
  return found as XGrammar;
}

async function loadInBrowser(): Promise<XGrammar> {
  const xg = exportsOf(await import('@mlc-ai/web-xgrammar'));
  // Emscripten binds its stderr to `console.error` once, when the wasm instance is created (on
  // first use): create it now, with the filter in place of console.error for that moment only.
  const error = console.error;
  console.error = stderrFilter(error.bind(console));
  try {
    await xg.Testings.debugGetMaskedTokensFromBitmask(new Int32Array(1), 32);
  } finally {
    console.error = error;
  }
  return xg;
}

function isNode(): boolean {
  return typeof process === 'object' && typeof process.versions?.node === 'string' && typeof document === 'undefined';
}

/**
 * Evaluates the package's file as CommonJS with our `console` (see the file comment). JS source,
 * so that the grammar probe's worker thread (probe-worker.ts) runs this same code.
 */
export const EVALUATE_IN_NODE = String.raw`function evaluateXGrammar(file, console, require) {
  // Bare builtin names: this text is in the browser files too (see src/platform/off-thread.ts).
  const nodeModule = require('module');
  const source = require('fs').readFileSync(file, 'utf8');
  const module = { exports: {} };
  // Its Node branch does await import('module'), which code made by new Function cannot do
  // under every loader (vitest's vm): hand it the module instead.
  const importShim = async (name) => {
    if (name === 'module' || name === 'node:module') return nodeModule;
    throw new Error('xgrammar: unexpected import(' + JSON.stringify(name) + ')');
  };
  const run = new Function('exports', 'module', 'require', '__filename', '__dirname', 'console', '__import', source.replace(/\bimport\(/g, '__import('));
  run(module.exports, module, require, file, require('path').dirname(file), console, importShim);
  return module.exports;
}`;

/** The package's file, as Node resolves it from here (also what the probe's worker evaluates). */
export async function xgrammarFileInNode(): Promise<string> {
  const { createRequire } = await import('node:module');
  return createRequire(import.meta.url).resolve('@mlc-ai/web-xgrammar');
}

async function loadInNode(): Promise<XGrammar> {
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  const quiet = { ...console, log: () => {}, error: stderrFilter((...args) => console.error(...args)), warn: () => {} };
  const evaluate = new Function(`return ${EVALUATE_IN_NODE}`)() as (file: string, console: unknown, require: NodeJS.Require) => unknown;
  return evaluate(await xgrammarFileInNode(), quiet, require) as XGrammar;
}
