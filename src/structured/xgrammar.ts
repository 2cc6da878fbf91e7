/**
 * Loads `@mlc-ai/web-xgrammar` once, lazily (376 KB gzip of embedded wasm: only requests that
 * ask for structured output pay for it).
 *
 * In Node the package cannot be `import`ed: it is a UMD/CommonJS bundle inside a
 * `"type": "module"` package. There we evaluate its file as CommonJS ourselves, which also lets us
 * hand it our own `console`: xgrammar reports why a schema, grammar or regex is invalid only on
 * stderr (`[FATAL] file:line: message`) and then throws a bare `Aborted()`, so the captured line
 * is the only way to tell the user what is wrong.
 */
type XGrammar = typeof import('@mlc-ai/web-xgrammar');

let loading: Promise<XGrammar> | null = null;
/** The last `[FATAL]` message xgrammar printed (Node path only). */
let lastFatal: string | null = null;

export function loadXGrammar(): Promise<XGrammar> {
  loading ??= (isNode() ? loadInNode() : import('@mlc-ai/web-xgrammar')).catch((e) => {
    loading = null;
    throw e;
  });
  return loading;
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

function isNode(): boolean {
  return typeof process === 'object' && typeof process.versions?.node === 'string' && typeof document === 'undefined';
}

async function loadInNode(): Promise<XGrammar> {
  const { createRequire } = await import('node:module');
  const { readFileSync } = await import('node:fs');
  const { dirname } = await import('node:path');
  const require = createRequire(import.meta.url);
  const file = require.resolve('@mlc-ai/web-xgrammar');
  const source = readFileSync(file, 'utf8');
  const module = { exports: {} as Record<string, unknown> };
  const quiet = {
    ...console,
    log: () => {},
    error: (...args: unknown[]) => {
      const text = args.map(String).join(' ');
      const m = /\[FATAL\][^:]*:\d+:\s*(.*)$/s.exec(text);
      if (m) lastFatal = m[1]!.replace(/^Check failed: \(.*?\) is false:\s*/s, '').trim();
      else if (!/^Aborted\(/.test(text)) console.error(...args);
    },
    warn: () => {},
  };
  // Its Node branch does `await import('module')`, which code made by `new Function` cannot do
  // under every loader (vitest's vm): hand it the module instead.
  const nodeModule = await import('node:module');
  const importShim = async (name: string) => {
    if (name === 'module' || name === 'node:module') return nodeModule;
    throw new Error(`xgrammar: unexpected import(${JSON.stringify(name)})`);
  };
  const run = new Function('exports', 'module', 'require', '__filename', '__dirname', 'console', '__import', source.replace(/\bimport\(/g, '__import('));
  run(module.exports, module, require, file, dirname(file), quiet, importShim);
  return module.exports as unknown as XGrammar;
}
