/**
 * Structured output: a request's JSON schema / regex / EBNF compiled by xgrammar against the
 * model's tokenizer, and a per-choice `Constraint` the backends consult every step (which tokens
 * may come next, which one was taken, whether the grammar is complete).
 *
 * The tokenizer's `TokenizerInfo` (xgrammar's decoded vocabulary) is built once per tokenizer and
 * compiled grammars are cached by their text, so repeated requests with one schema compile once.
 */
import type { TextTokenizer } from '../text/tokenizer';
import type { ToolCallFormat } from '../text/tool-calls';
import { autoToolCallsTag, forcedToolCallsTag } from './tool-tags';
import { StructuredOutputError } from './errors';
import { checkGrammar, checkRegex, checkSchema } from './limits';
import { Utf8Guard, utf8Tables } from './utf8-guard';
import { discardXGrammar, loadXGrammar, withFatalMessage, xgrammarGeneration } from './xgrammar';

type XGrammar = typeof import('@mlc-ai/web-xgrammar');
type CompiledGrammar = InstanceType<XGrammar['CompiledGrammar']>;
type GrammarCompiler = Awaited<ReturnType<XGrammar['GrammarCompiler']['createGrammarCompiler']>>;

/** What a request asked the output to follow. `param` is the request field it came from (for errors). */
export type ConstraintSpec =
  | { kind: 'json_object'; param?: string }
  | { kind: 'json_schema'; schema: unknown; param?: string }
  | { kind: 'regex'; pattern: string; param?: string }
  | { kind: 'ebnf'; grammar: string; param?: string }
  /** Forced tool calls (tool_choice required / named) in the chat template's call format; `multiple`: one or more calls. */
  | { kind: 'tool_calls'; format: ToolCallFormat; tools: ForcedTool[]; multiple: boolean; param?: string }
  /**
   * Strict tools under tool_choice `auto`: free text until the model opens a call in the format,
   * then the call (name and arguments) must follow one of `tools`; free text again after it.
   */
  | { kind: 'tool_calls_auto'; format: ToolCallFormat; tools: ForcedTool[]; param?: string };

export interface ForcedTool {
  name: string;
  /** The function's parameters schema (absent: any JSON object). */
  parameters?: unknown;
}

export { StructuredOutputError };

/** One choice's grammar state. Not shareable between choices: make one per choice. */
export interface Constraint {
  /** Words of the bitmask (`ceil(vocabSize / 32)`; bit set = allowed). */
  readonly words: number;
  /** Writes the allowed-token bitmask for the next token into `out` (words past the tokenizer's vocabulary are 0). */
  mask(out: Uint32Array): Promise<void>;
  /** Advances past the sampled token; false when the grammar did not allow it. */
  accept(id: number): boolean;
  /** The grammar is complete (its stop token was accepted): generation should end with 'stop'. */
  isTerminated(): boolean;
  dispose(): void;
}

/** A compiled grammar; `start()` gives a fresh matcher per choice. */
export interface CompiledConstraint {
  readonly spec: ConstraintSpec;
  start(): Promise<Constraint>;
}

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
      const vocab = [...tokenizer.vocab];
      const info = await xg.TokenizerInfo.createTokenizerInfo(vocab, tokenizer.vocabType, tokenizer.prependSpace, vocabSize, [...tokenizer.eosIds]);
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
 * invalid schema, regex or grammar.
 */
export async function compileConstraint(tokenizer: TextTokenizer, spec: ConstraintSpec, vocabSize = tokenizer.vocabSize): Promise<CompiledConstraint> {
  const param = defaultParam(spec);
  checkLimits(spec, param);
  const key = cacheKey(spec, param);
  let compiled: Compiled;
  try {
    compiled = await compileCached(tokenizer, spec, param, key, vocabSize);
  } catch (e) {
    // Any failure inside the wasm leaves the instance unsound: never reuse it. A trap the input
    // did not cause (its state was already bad) gets one retry on a fresh instance; an input that
    // fails there too is refused with xgrammar's reason.
    if (!fromWasm(e) || !discardXGrammar()) throw e;
    if (e instanceof StructuredOutputError) throw e;
    compiled = await compileCached(tokenizer, spec, param, key, vocabSize).catch((again: unknown) => {
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
        compiled = await compileCached(tokenizer, spec, param, key, vocabSize);
        matcher = await compiled.xg.GrammarMatcher.createGrammarMatcher(compiled.grammar);
      }
      // Whatever the grammar allows, the output stays valid UTF-8 (see utf8-guard.ts).
      const utf8 = new Utf8Guard(utf8Tables(tokenizer, vocabSize));
      return {
        words,
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
        isTerminated: () => matcher.isTerminated(),
        dispose: () => matcher.dispose(),
      };
    },
  };
}

/** The grammar compiled on the current instance, with that instance (its matchers must come from it). */
async function compileCached(tokenizer: TextTokenizer, spec: ConstraintSpec, param: string, key: string, vocabSize: number): Promise<Compiled> {
  const state = stateFor(tokenizer, Math.max(vocabSize, tokenizer.vocabSize));
  let pending = state.grammars.get(key);
  if (!pending) {
    pending = (async () => ({ xg: await state.xg, grammar: await compileNow(await state.xg, await state.compiler, spec, param) }))();
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

/**
 * xgrammar (0.1.27) writes a length-bounded JSON string as `[^"\\\r\n]{m,n}`, which lets raw
 * control characters (U+0000-U+001F, tab included) into the string: invalid JSON that
 * `JSON.parse` rejects. Its unbounded strings already exclude them; this gives bounded ones the
 * same class (escapes stay out of bounded strings, as xgrammar has them).
 */
const LOOSE_STRING_CHAR = String.raw`[^"\\\r\n]`;
const JSON_STRING_CHAR = String.raw`[^\0-\x1f"\\]`;

/** A schema as EBNF (root rule `root`): xgrammar's conversion, made JSON-correct. */
async function schemaEbnf(xg: XGrammar, schema: string): Promise<string> {
  // Compact output (indent -1, no free whitespace): fewer tokens, and no model can loop on spaces.
  const ebnf = await withFatalMessage(() => xg.Testings._jsonSchemaToEBNF(schema, false, -1, [',', ':']));
  return ebnf.split(LOOSE_STRING_CHAR).join(JSON_STRING_CHAR);
}

/** A schema's grammar: xgrammar's conversion to EBNF, made JSON-correct, then compiled. */
async function compileSchema(xg: XGrammar, compiler: GrammarCompiler, schema: string): Promise<CompiledGrammar> {
  const ebnf = await schemaEbnf(xg, schema);
  return withFatalMessage(() => compiler.compileGrammar(ebnf, 'root'));
}

async function compileNow(xg: XGrammar, compiler: GrammarCompiler, spec: ConstraintSpec, param: string): Promise<CompiledGrammar> {
  const fail = (what: string, e: unknown) => new StructuredOutputError(param, `${param}: invalid ${what}: ${(e as Error).message}`, { cause: e });
  switch (spec.kind) {
    case 'json_object':
      // OpenAI's json_object is an object; compact like json_schema's output.
      return compileSchema(xg, compiler, '{"type":"object"}');
    case 'json_schema': {
      const schema = spec.schema;
      if (typeof schema === 'boolean') {
        // `true` accepts any JSON value; `false` accepts nothing.
        if (schema) return compileSchema(xg, compiler, '{}');
        throw new StructuredOutputError(param, `${param}: the schema false accepts no output`);
      }
      if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
        throw new StructuredOutputError(param, `${param}: a JSON schema must be an object; got ${JSON.stringify(schema)}`);
      }
      try {
        return await compileSchema(xg, compiler, JSON.stringify(schema));
      } catch (e) {
        throw fail('JSON schema', e);
      }
    }
    case 'regex': {
      try {
        new RegExp(spec.pattern, 'u');
      } catch (e) {
        throw fail('regular expression', e);
      }
      try {
        return await withFatalMessage(() => compiler.compileStructuralTag({ type: 'structural_tag', format: { type: 'regex', pattern: spec.pattern } }));
      } catch (e) {
        throw fail('regular expression', e);
      }
    }
    case 'tool_calls':
    case 'tool_calls_auto': {
      if (spec.tools.length === 0) throw new StructuredOutputError(param, `${param}: no tools to call`);
      const argsEbnf = (schema: string) => schemaEbnf(xg, schema);
      try {
        const tag =
          spec.kind === 'tool_calls'
            ? await forcedToolCallsTag(spec.format, spec.tools, spec.multiple, argsEbnf)
            : await autoToolCallsTag(spec.format, spec.tools, argsEbnf);
        return await withFatalMessage(() => compiler.compileStructuralTag(tag as Record<string, unknown>));
      } catch (e) {
        throw fail('tool parameters schema', e);
      }
    }
    case 'ebnf': {
      if (!spec.grammar.trim()) throw new StructuredOutputError(param, `${param}: the grammar is empty`);
      try {
        return await withFatalMessage(() => compiler.compileGrammar(spec.grammar, 'root'));
      } catch (e) {
        throw fail('grammar', e);
      }
    }
  }
}
