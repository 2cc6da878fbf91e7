/**
 * The probe's worker thread (a CommonJS script for OffThread): its own xgrammar instance, one
 * grammar compiler per vocabulary the main thread registered (`init`), and the GrammarOps calls
 * (compile.ts) with their compiled grammars thrown away: the probe only learns whether, and how
 * fast, the grammar compiles (the texts it returns, a schema's EBNF and a grammar's normalized
 * print, are what compile.ts checks next).
 *
 * A failure carries xgrammar's stderr: its `[FATAL]` line says why a grammar is invalid (the main
 * thread reads it with fatalMessage). xgrammar reports an invalid grammar by aborting its wasm,
 * after which the instance is unsound, so the main thread terminates the worker after any failure.
 */
import { EVALUATE_IN_NODE } from './xgrammar';

export const PROBE_WORKER_SOURCE = `
const { workerData } = require('worker_threads');
${EVALUATE_IN_NODE}
let stderr = [];
const quiet = { ...console, log() {}, warn() {}, error: (...args) => stderr.push(args.map(String).join(' ')) };
let xg = null;
const load = () => (xg ??= evaluateXGrammar(workerData.xgrammarFile, quiet, require('module').createRequire(workerData.xgrammarFile)));
const compilers = new Map();

/** Runs one xgrammar call, attaching its stderr to an error. */
async function run(fn) {
  stderr = [];
  try {
    return await fn();
  } catch (e) {
    const err = new Error(e instanceof Error ? e.message : String(e));
    err.detail = { stderr };
    throw err;
  }
}

const ops = {
  async init(id, infoArgs) {
    const x = load();
    const info = await run(() => x.TokenizerInfo.createTokenizerInfo(...infoArgs));
    // No cache: each grammar is probed once.
    compilers.set(id, await run(() => x.GrammarCompiler.createGrammarCompiler(info, false)));
  },
  drop(id) {
    compilers.get(id)?.dispose();
    compilers.delete(id);
  },
  schemaEbnf(schema, ...args) {
    return run(() => load().Testings._jsonSchemaToEBNF(schema, ...args));
  },
  async normalizeEbnf(ebnf) {
    const g = await run(() => load().Grammar.fromEBNF(ebnf, 'root'));
    try {
      return g.toString();
    } finally {
      g.dispose();
    }
  },
  async grammar(id, ebnf) {
    (await run(() => compilers.get(id).compileGrammar(ebnf, 'root'))).dispose();
  },
  async structuralTag(id, tag) {
    (await run(() => compilers.get(id).compileStructuralTag(tag))).dispose();
  },
};
`;
