/**
 * Structured output: a request's JSON schema / regex / EBNF compiled by xgrammar against the
 * model's tokenizer, and a per-choice `Constraint` the backends consult every step (which tokens
 * may come next, which one was taken, whether the grammar is complete).
 *
 * The tokenizer's `TokenizerInfo` (xgrammar's decoded vocabulary) is built once per tokenizer and
 * compiled grammars are cached by their text, so repeated requests with one schema compile once.
 * A grammar new to the process is first compiled in a worker under a time limit (probe.ts), so
 * that its compile here, which holds the event loop, is known to end in time.
 */
import type { TextTokenizer } from '../text/tokenizer';
import { compileSpec, SCHEMA_EBNF_ARGS, type GrammarOps } from './compile';
import { StructuredOutputError } from './errors';
import { checkGrammar, checkRegex, checkSchema, GRAMMAR_LIMITS } from './limits';
import { probeCompile, tokenizerInfoArgs } from './probe';
import type { CompiledConstraint, CompileOptions, Constraint, ConstraintSpec } from './spec';
import { Utf8Guard, utf8Tables } from './utf8-guard';
import { discardXGrammar, loadXGrammar, withFatalMessage, xgrammarGeneration } from './xgrammar';

type XGrammar = typeof import('@mlc-ai/web-xgrammar');
type CompiledGrammar = InstanceType<XGrammar['CompiledGrammar']>;
type GrammarCompiler = Awaited<ReturnType<XGrammar['GrammarCompiler']['createGrammarCompiler']>>;

export { StructuredOutputError };
export type { CompiledConstraint, CompileOptions, Constraint, ConstraintSpec, ForcedTool } from './spec';

interface Compiled {
  xg: XGrammar;
  grammar: CompiledGrammar;
}

interface TokenizerState {
  /** The xgrammar instance the compiler and grammars belong to (xgrammarGeneration). */
  generation: number;
  xg: Promise<XGrammar>;
  compiler: Promise<GrammarCompiler>;
  grammars: Map<string, Promise<Compiled>>;
}

/** Failures of the probe: they happened in the worker, so this thread's instance is still sound. */
const probeRefusals = new WeakSet<object>();

const perTokenizer = new WeakMap<TextTokenizer, Map<number, TokenizerState>>();
/** Compiled grammars kept per tokenizer (the oldest is dropped past this). */
const MAX_CACHED = 64;

function stateFor(tokenizer: TextTokenizer, vocabSize: number): TokenizerState {
  let bySize = perTokenizer.get(tokenizer);
  if (!bySize) perTokenizer.set(tokenizer, (bySize = new Map()));
  let s = bySize.get(vocabSize);
  if (!s || s.generation !== xgrammarGeneration()) {
    const instance = loadXGrammar();
    const compiler = (async () => {
      const xg = await instance;
      const info = await xg.TokenizerInfo.createTokenizerInfo(...tokenizerInfoArgs(tokenizer, vocabSize));
      return xg.GrammarCompiler.createGrammarCompiler(info);
    })();
    bySize.set(vocabSize, (s = { generation: xgrammarGeneration(), xg: instance, compiler, grammars: new Map() }));
  }
  return s;
}

const defaultParam = (spec: ConstraintSpec): string =>
  spec.param ?? (spec.kind === 'json_object' || spec.kind === 'json_schema' ? 'response_format' : spec.kind);

/**
 * Compiles `spec` for `tokenizer` (cached). `vocabSize`: the model's logit rows, which may exceed
 * the tokenizer's ids; the extra rows are never allowed. Throws `StructuredOutputError` for an
 * invalid schema, regex or grammar, and for one that compiles longer than the time limit.
 */
export async function compileConstraint(
  tokenizer: TextTokenizer,
  spec: ConstraintSpec,
  vocabSize = tokenizer.vocabSize,
  options: CompileOptions = {},
): Promise<CompiledConstraint> {
  const param = defaultParam(spec);
  checkLimits(spec, param);
  const key = cacheKey(spec, param);
  const timeLimitMs = options.timeLimitMs ?? GRAMMAR_LIMITS.compileTimeMs;
  const compileCached = () => compileOnMain(tokenizer, spec, param, key, vocabSize, timeLimitMs);
  let compiled: Compiled;
  try {
    compiled = await compileCached();
  } catch (e) {
    // Any failure inside the wasm leaves the instance unsound: never reuse it. A trap the input
    // did not cause (its state was already bad) gets one retry on a fresh instance; an input that
    // fails there too is refused with xgrammar's reason.
    if (probeRefusals.has(e as object) || !fromWasm(e) || !discardXGrammar()) throw e;
    if (e instanceof StructuredOutputError) throw e;
    compiled = await compileCached().catch((again: unknown) => {
      if (fromWasm(again)) discardXGrammar();
      throw again instanceof StructuredOutputError ? again : new StructuredOutputError(param, `${param}: the grammar engine failed on it: ${(again as Error).message}`, { cause: again });
    });
  }
  const words = Math.ceil(vocabSize / 32);
  return {
    spec,
    async start() {
      let matcher;
      try {
        matcher = await compiled.xg.GrammarMatcher.createGrammarMatcher(compiled.grammar);
      } catch (e) {
        // The instance this grammar was compiled on has trapped since: compile it on a fresh one.
        if (!fromWasm(e) || !discardXGrammar()) throw e;
        compiled = await compileCached();
        matcher = await compiled.xg.GrammarMatcher.createGrammarMatcher(compiled.grammar);
      }
      // Whatever the grammar allows, the output stays valid UTF-8 (see utf8-guard.ts).
      const utf8 = new Utf8Guard(utf8Tables(tokenizer, vocabSize));
      return {
        words,
        param,
        async mask(out: Uint32Array) {
          const bits = await matcher.getNextTokenBitmask();
          const n = Math.min(bits.length, out.length);
          out.set(new Uint32Array(bits.buffer, bits.byteOffset, n));
          out.fill(0, n);
          utf8.apply(out);
        },
        accept: (id: number) => {
          const ok = matcher.acceptToken(id);
          if (ok) utf8.accept(id);
          return ok;
        },
        rollBack: (tokens: number) => {
          matcher.rollBack(tokens);
          utf8.rollBack(tokens);
        },
        forcesText: () => matcher.findJumpForwardString() !== '',
        isTerminated: () => matcher.isTerminated(),
        dispose: () => matcher.dispose(),
      };
    },
  };
}

/**
 * The grammar compiled on the current instance, with that instance (its matchers must come from
 * it); probed first in the worker when this process has not compiled it in time before.
 */
async function compileOnMain(tokenizer: TextTokenizer, spec: ConstraintSpec, param: string, key: string, vocabSize: number, timeLimitMs: number): Promise<Compiled> {
  const size = Math.max(vocabSize, tokenizer.vocabSize);
  const state = stateFor(tokenizer, size);
  let pending = state.grammars.get(key);
  if (!pending) {
    pending = (async () => {
      await probeCompile(tokenizer, size, key, param, timeLimitMs, (ops) => compileSpec(ops, spec, param)).catch((e: unknown) => {
        if (typeof e === 'object' && e !== null) probeRefusals.add(e);
        throw e;
      });
      const xg = await state.xg;
      return { xg, grammar: await compileSpec(localOps(xg, await state.compiler), spec, param) };
    })();
    state.grammars.set(key, pending);
    if (state.grammars.size > MAX_CACHED) state.grammars.delete(state.grammars.keys().next().value!);
    // A failed compile is not cached: the next request gets the same error afresh.
    pending.catch(() => state.grammars.delete(key));
  }
  return pending;
}

/** An error raised inside xgrammar's wasm (an abort, a trap, a stack overflow), not by our checks. */
function fromWasm(e: unknown): boolean {
  for (let x = e, i = 0; x && i < 4; x = (x as { cause?: unknown }).cause, i++) {
    if (x instanceof WebAssembly.RuntimeError) return true;
    if (x instanceof RangeError && /call stack/i.test(x.message)) return true;
    if (x instanceof Error && /Aborted\(|memory access out of bounds|unreachable/.test(x.message)) return true;
  }
  return false;
}

/** The request's grammar within GRAMMAR_LIMITS, before xgrammar sees it. */
function checkLimits(spec: ConstraintSpec, param: string): void {
  switch (spec.kind) {
    case 'regex':
      return checkRegex(spec.pattern, param);
    case 'ebnf':
      return checkGrammar(spec.grammar, param);
    case 'json_schema':
      return checkSchema(spec.schema, param);
    case 'tool_calls':
    case 'tool_calls_auto':
      for (const t of spec.tools) if (t.parameters !== undefined) checkSchema(t.parameters, param);
      return;
    case 'json_object':
      return;
  }
}

function cacheKey(spec: ConstraintSpec, param: string): string {
  switch (spec.kind) {
    case 'json_object':
      return 'json_object';
    case 'json_schema':
      return `json_schema\0${param}\0${JSON.stringify(spec.schema)}`;
    case 'regex':
      return `regex\0${param}\0${spec.pattern}`;
    case 'ebnf':
      return `ebnf\0${param}\0${spec.grammar}`;
    case 'tool_calls':
    case 'tool_calls_auto':
      return `${spec.kind}\0${param}\0${JSON.stringify(spec)}`;
  }
}

/** The xgrammar calls of compile.ts on this thread's instance, each failure carrying xgrammar's reason. */
function localOps(xg: XGrammar, compiler: GrammarCompiler): GrammarOps<CompiledGrammar> {
  return {
    schemaEbnf: (schema) => withFatalMessage(() => xg.Testings._jsonSchemaToEBNF(schema, ...SCHEMA_EBNF_ARGS)),
    normalizeEbnf: (ebnf) =>
      withFatalMessage(async () => {
        const g = await xg.Grammar.fromEBNF(ebnf, 'root');
        try {
          return g.toString();
        } finally {
          g.dispose();
        }
      }),
    grammar: (ebnf) => withFatalMessage(() => compiler.compileGrammar(ebnf, 'root')),
    structuralTag: (tag) => withFatalMessage(() => compiler.compileStructuralTag(tag)),
  };
}
