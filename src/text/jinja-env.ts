/**
 * Renders a parsed @huggingface/jinja template the way transformers renders chat templates with
 * Python's jinja2 (trim_blocks, lstrip_blocks, its own `tojson`, `raise_exception`,
 * `strftime_now`). The library lacks a few things real templates use (see
 * /work/shared/SETUP.md): they are filled in here, on one interpreter instance at a time, so
 * neither the templates nor the library are edited and nothing global changes.
 */
import { Environment, Interpreter, parse, tokenize } from '@huggingface/jinja';
import { TemplateError } from './errors';
import { strftime } from './strftime';
import { callStrMethod, format as pyStrFormat, PyStrError, pyCapitalize, pyLen, STR_METHODS, titleFilter, trim, wordcount } from './py-str';

/** The runtime value classes are not exported by the package; take them from conversions. */
type RV = { type: string; value: any; __bool__(): { value: boolean } };
// Constructed as `any` so `instanceof` checks do not narrow RV (every class has the same shape here).
type Ctor = new (value?: any) => any;
const probe = new Environment();
const sample = (name: string, v: unknown) => (probe.set(name, v) as unknown as RV).constructor as Ctor;
const StringValue = sample('s', '');
const IntegerValue = sample('i', 1);
const FloatValue = sample('f', 1.5);
const BooleanValue = sample('b', true);
const NullValue = sample('n', null);
const ArrayValue = sample('a', []);
const ObjectValue = sample('o', {});
const UndefinedValue = sample('u', undefined);

/** A parsed template, reusable across renders. */
export type ParsedTemplate = ReturnType<typeof parse>;

/** Parses with the block-whitespace rules transformers uses (trim_blocks, lstrip_blocks). */
export function parseTemplate(text: string): ParsedTemplate {
  try {
    return parse(trailingCommas(tokenize(joinContinuedStrings(text), { lstrip_blocks: true, trim_blocks: true })));
  } catch (e) {
    throw new TemplateError('syntax', `chat template does not parse: ${(e as Error).message}`, { cause: e });
  }
}

type Token = ReturnType<typeof tokenize>[number];
/** Identifiers that are operators or keywords: a `(` after them opens a group, not a call. */
const KEYWORDS = new Set(['in', 'and', 'or', 'not', 'if', 'else', 'elif', 'is', 'for', 'set', 'return']);
const OPENERS = new Set(['OpenParen', 'OpenSquareBracket', 'OpenCurlyBracket']);
const CLOSERS = new Set(['CloseParen', 'CloseSquareBracket', 'CloseCurlyBracket']);

/**
 * jinja2 takes a comma before `)`: `f(a,)` is `f(a)`, `(a, b,)` is `(a, b)` and `(a,)` is a
 * one-element tuple (`s.startswith(("<think>",))`); the library's parser rejects all three. The
 * comma is dropped, and a one-element tuple becomes a one-element list, which every read-only use
 * (iteration, `in`, indexing, `tojson`, startswith/endswith) treats alike.
 */
export function trailingCommas(tokens: Token[]): Token[] {
  const out = [...tokens];
  for (let i = 0; i < out.length; i++) {
    if (out[i].type !== 'Comma' || out[i + 1]?.type !== 'CloseParen') continue;
    let depth = 0;
    let commas = 0;
    let j = i - 1;
    for (; j >= 0; j--) {
      const t = out[j].type;
      if (CLOSERS.has(t)) depth++;
      else if (OPENERS.has(t)) {
        if (depth === 0) break;
        depth--;
      } else if (t === 'Comma' && depth === 0) commas++;
    }
    if (j < 0) continue; // unbalanced: let the parser report it
    const before = out[j - 1];
    const call = before !== undefined && ((before.type === 'Identifier' && !KEYWORDS.has(before.value)) || CLOSERS.has(before.type));
    if (call || commas > 0) out.splice(i--, 1);
    else {
      out[j] = { ...out[j], type: 'OpenSquareBracket', value: '[' } as Token;
      out.splice(i, 2, { ...out[i + 1], type: 'CloseSquareBracket', value: ']' } as Token);
    }
  }
  return out;
}

/**
 * Python string literals inside tags may continue on the next line after a backslash
 * (Mistral Small 3.1 does this); jinja2 drops the backslash-newline, the library rejects it.
 * Only literals inside `{{ }}` / `{% %}` are touched: template text keeps its backslashes.
 */
export function joinContinuedStrings(text: string): string {
  if (!/\\\r?\n/.test(text)) return text;
  let out = '';
  let inTag = false;
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (!inTag) {
      if (c === '{' && (text[i + 1] === '{' || text[i + 1] === '%')) {
        inTag = true;
        out += c + text[++i];
        continue;
      }
    } else if (quote) {
      if (c === '\\') {
        if (text[i + 1] === '\n') { i += 1; continue; }
        if (text[i + 1] === '\r' && text[i + 2] === '\n') { i += 2; continue; }
        out += c + text[++i];
        continue;
      }
      if (c === quote) quote = '';
    } else if (c === '"' || c === "'") quote = c;
    else if ((c === '}' || c === '%') && text[i + 1] === '}') {
      inTag = false;
      out += c + text[++i];
      continue;
    }
    out += c;
  }
  return out;
}

/** The string the library wraps a string in; its own methods (strip, split...) are not Python's. */
const isStr = (v: RV): boolean => v instanceof StringValue;

/** Thrown by the template's `raise_exception`; kept apart so its message reaches the user verbatim. */
class RaisedByTemplate extends Error {}

export interface RenderOptions {
  /** The clock behind `strftime_now` (tests pass a fixed date). */
  now?: () => Date;
}

export function renderParsed(parsed: ParsedTemplate, vars: Record<string, unknown>, opts: RenderOptions = {}): string {
  const env = new Environment();
  setGlobals(env, opts);
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) continue;
    env.variables.delete(k);
    env.set(k, v);
  }
  const interp = new Interpreter(env);
  patchInterpreter(interp);
  try {
    return (interp.run(parsed) as unknown as RV).value as string;
  } catch (e) {
    if (e instanceof RaisedByTemplate) throw new TemplateError('raise_exception', e.message, { cause: e });
    throw new TemplateError('render', `chat template failed: ${(e as Error).message}`, { cause: e });
  }
}

function setGlobals(env: Environment, opts: RenderOptions): void {
  const globals: Record<string, unknown> = {
    false: false, true: true, none: null, False: false, True: true, None: null,
    raise_exception: (message: unknown) => {
      throw new RaisedByTemplate(String(message));
    },
    strftime_now: (format: string) => strftime(opts.now?.() ?? new Date(), format),
    range: (start: number, stop?: number, step = 1) => {
      if (stop === undefined) [start, stop] = [0, start];
      const out: number[] = [];
      for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
      return out;
    },
  };
  for (const [k, v] of Object.entries(globals)) {
    env.variables.delete(k);
    env.set(k, v);
  }
}

// ---------------------------------------------------------------------------------------------
// Python semantics the library lacks

/** Python's str() of a value, for `~` and `|string`. */
function pyStr(v: RV): string {
  if (v instanceof NullValue) return 'None';
  if (v instanceof UndefinedValue) return '';
  if (v instanceof BooleanValue) return v.value ? 'True' : 'False';
  if (v instanceof StringValue) return v.value;
  if (v instanceof ArrayValue || v instanceof ObjectValue) return pyRepr(v);
  if (v instanceof FloatValue) return Number.isInteger(v.value) ? (v.value as number).toFixed(1) : String(v.value);
  return String((v as { toString(): string }).toString());
}

function pyRepr(v: RV): string {
  if (v instanceof StringValue) {
    const s = v.value as string;
    const q = s.includes("'") && !s.includes('"') ? '"' : "'";
    return q + s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(new RegExp(q, 'g'), '\\' + q) + q;
  }
  if (v instanceof ArrayValue) return '[' + (v.value as RV[]).map(pyRepr).join(', ') + ']';
  if (v instanceof ObjectValue)
    return '{' + [...(v.value as Map<string, RV>)].map(([k, x]) => `'${k}': ${pyRepr(x)}`).join(', ') + '}';
  return pyStr(v);
}

function equal(a: RV, b: RV): boolean {
  if (a instanceof ArrayValue && b instanceof ArrayValue)
    return a.value.length === b.value.length && (a.value as RV[]).every((x, i) => equal(x, b.value[i]));
  if (a instanceof ObjectValue && b instanceof ObjectValue) {
    if (a.value.size !== b.value.size) return false;
    for (const [k, x] of a.value as Map<string, RV>) if (!b.value.has(k) || !equal(x, b.value.get(k))) return false;
    return true;
  }
  return a.value === b.value && (a.value !== null || a.type === b.type);
}

const num = (v: RV) => Number(v.value);

/** Tests jinja2 has and the library lacks (`selectattr('role', '==', 'user')` etc.). */
const EXTRA_TESTS: Record<string, (a: RV, b?: RV) => boolean> = {
  '==': (a, b) => equal(a, b!),
  eq: (a, b) => equal(a, b!),
  equalto: (a, b) => equal(a, b!),
  '!=': (a, b) => !equal(a, b!),
  ne: (a, b) => !equal(a, b!),
  '>': (a, b) => num(a) > num(b!),
  gt: (a, b) => num(a) > num(b!),
  '>=': (a, b) => num(a) >= num(b!),
  ge: (a, b) => num(a) >= num(b!),
  '<': (a, b) => num(a) < num(b!),
  lt: (a, b) => num(a) < num(b!),
  '<=': (a, b) => num(a) <= num(b!),
  le: (a, b) => num(a) <= num(b!),
  in: (a, b) => {
    if (!b) return false;
    if (b instanceof StringValue) return (b.value as string).includes(String(a.value));
    if (b.value instanceof Map) return b.value.has(a.value);
    return Array.isArray(b.value) && (b.value as RV[]).some((x) => equal(x, a));
  },
  divisibleby: (a, b) => num(a) % num(b!) === 0,
  sameas: (a, b) => a.value === b!.value,
  float: (a) => a instanceof FloatValue,
};

/** Tests whose library version differs from jinja2's. */
const OVERRIDDEN_TESTS: Record<string, (a: RV) => boolean> = {
  // In Python dicts and Undefined are iterable too.
  iterable: (a) => a instanceof ArrayValue || a instanceof StringValue || a instanceof ObjectValue || a instanceof UndefinedValue,
};

function lookupTest(name: string, env: Environment): ((a: RV, b?: RV) => boolean) | undefined {
  return OVERRIDDEN_TESTS[name] ?? EXTRA_TESTS[name] ?? (env.tests.get(name) as ((a: RV, b?: RV) => boolean) | undefined);
}

/** printf-style `%` formatting, as `"%s and %d" | format(a, b)` does in jinja2. */
function pyFormat(fmt: string, args: RV[]): string {
  let i = 0;
  return fmt.replace(/%([-+ 0#]*)(\d*)(?:\.(\d+))?([sdifr%])/g, (_m, flags: string, width: string, prec: string, c: string) => {
    if (c === '%') return '%';
    const v = args[i++];
    let s: string;
    if (c === 's') s = pyStr(v);
    else if (c === 'r') s = pyRepr(v);
    else if (c === 'd' || c === 'i') s = String(Math.trunc(num(v)));
    else s = num(v).toFixed(prec ? Number(prec) : 6);
    if (width) s = flags.includes('-') ? s.padEnd(Number(width)) : s.padStart(Number(width), flags.includes('0') ? '0' : ' ');
    return s;
  });
}

function fromJs(v: unknown): RV {
  const e = new Environment();
  return e.set('v', v) as unknown as RV;
}

function toJs(v: RV): unknown {
  if (v instanceof ArrayValue) return (v.value as RV[]).map(toJs);
  if (v instanceof ObjectValue) return Object.fromEntries([...(v.value as Map<string, RV>)].map(([k, x]) => [k, toJs(x)]));
  if (v instanceof UndefinedValue) return null;
  return v.value;
}

type FilterFn = (operand: RV, args: RV[], kwargs: Map<string, RV>, env: Environment) => RV | undefined;

/** Filters jinja2 has and the library lacks. Returning undefined defers to the library. */
const EXTRA_FILTERS: Record<string, FilterFn> = {
  count: (x) => (x instanceof ArrayValue ? new IntegerValue(x.value.length) : isStr(x) ? new IntegerValue(pyLen(x.value)) : x instanceof ObjectValue ? new IntegerValue(x.value.size) : undefined),
  round: (x, args, kwargs) => {
    const precision = num(args[0] ?? kwargs.get('precision') ?? new IntegerValue(0));
    const method = String((args[1] ?? kwargs.get('method') ?? new StringValue('common')).value);
    const f = 10 ** precision;
    const r = method === 'ceil' ? Math.ceil(num(x) * f) / f : method === 'floor' ? Math.floor(num(x) * f) / f : Math.round(num(x) * f) / f;
    return new FloatValue(r);
  },
  format: (x, args) => (x instanceof StringValue ? new StringValue(pyFormat(x.value, args)) : undefined),
  fromjson: (x) => (x instanceof StringValue ? fromJs(JSON.parse(x.value)) : undefined),
  string: (x) => new StringValue(pyStr(x)),
  select: (x, args, _kw, env) => selectLike(x, args, env, true, false),
  reject: (x, args, _kw, env) => selectLike(x, args, env, false, false),
  selectattr: (x, args, _kw, env) => selectLike(x, args, env, true, true),
  rejectattr: (x, args, _kw, env) => selectLike(x, args, env, false, true),
  // jinja2's string filters, on Python's str (the library's use JavaScript's trim and case rules).
  // Like jinja2 they take str() of any other value: `none | trim` is 'None' (Gemma 2 does this).
  trim: (x, args, kwargs) => new StringValue(trim(pyStr(x), toJs(args[0] ?? kwargs.get('chars') ?? new NullValue()))),
  upper: (x) => new StringValue(pyStr(x).toUpperCase()),
  lower: (x) => new StringValue(pyStr(x).toLowerCase()),
  title: (x) => new StringValue(titleFilter(pyStr(x))),
  capitalize: (x) => new StringValue(pyCapitalize(pyStr(x))),
  wordcount: (x) => new IntegerValue(wordcount(pyStr(x))),
  replace: (x, args, kwargs) => {
    const [old, repl, count] = [args[0] ?? kwargs.get('old'), args[1] ?? kwargs.get('new'), args[2] ?? kwargs.get('count')];
    if (!old || !repl) return undefined;
    const n = count === undefined || count instanceof NullValue ? -1 : toJs(count);
    return new StringValue(callStrMethod('replace', pyStr(x), [pyStr(old), pyStr(repl), n], new Map()) as string);
  },
  length: (x) => (isStr(x) ? new IntegerValue(pyLen(x.value)) : undefined),
  tojson: undefined as unknown as FilterFn, // the library's tojson already matches transformers
  dictsort: (x) => (x instanceof ObjectValue ? fromJs(Object.entries(toJs(x) as object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : undefined),
};
delete EXTRA_FILTERS.tojson;

function selectLike(x: RV, args: RV[], env: Environment, keep: boolean, byAttr: boolean): RV | undefined {
  if (!(x instanceof ArrayValue)) return undefined;
  const [attr, testName, ...testArgs] = byAttr ? args : [undefined, ...args];
  const test = testName ? lookupTest(String(testName.value), env) : (a: RV) => a.__bool__().value;
  if (!test) throw new Error(`no test named ${String(testName?.value)}`);
  const out = (x.value as RV[]).filter((item) => {
    let v: RV = item;
    if (byAttr) {
      const got = item.value instanceof Map ? (item.value as Map<string, RV>).get(String(attr!.value)) : undefined;
      v = got ?? new UndefinedValue();
    }
    return test(v, testArgs[0]) === keep;
  });
  return new ArrayValue(out);
}

/** Node types that are statements; everything else in a block is an output expression. */
const STATEMENTS = new Set(['Program', 'If', 'For', 'Break', 'Continue', 'Set', 'Macro', 'Comment', 'FilterStatement', 'CallStatement']);

const UNDEFINED_AS_EMPTY = new Set(['trim', 'upper', 'lower', 'title', 'capitalize', 'string', 'replace', 'indent', 'length', 'count', 'list', 'join']);

interface Node {
  type: string;
  value?: string;
  callee?: Node;
  args?: Node[];
  operator?: { value: string };
  left?: Node;
  right?: Node;
  operand?: Node;
  test?: Node;
  negate?: boolean;
}

/** The value with every tuple (`("a", "b")`) inside it made a list. */
function untuple(v: RV): RV {
  if (v instanceof ArrayValue) return new ArrayValue((v.value as RV[]).map(untuple));
  if (v instanceof ObjectValue && v.type === 'ObjectValue') return new ObjectValue(new Map([...(v.value as Map<string, RV>)].map(([k, x]) => [k, untuple(x)])));
  return v;
}

/** Hands the library an already evaluated value as an identifier bound for the duration of `use`. */
let tmp = 0;
function withValue<T>(env: Environment, value: RV, use: (ident: Node) => T): T {
  const name = `__evaluated_${tmp++}`;
  env.setVariable(name, value as never);
  try {
    return use({ type: 'Identifier', value: name });
  } finally {
    env.variables.delete(name);
  }
}

/** Replaces a few interpreter methods on this instance only (they are private in the typings). */
function patchInterpreter(interp: Interpreter): void {
  const self = interp as unknown as Record<string, (...a: any[]) => any>;
  const origFilter = self.applyFilter.bind(interp);
  const origBinary = self.evaluateBinaryExpression.bind(interp);
  const origTest = self.evaluateTestExpression.bind(interp);
  const evaluate = (n: Node, env: Environment) => self.evaluate.call(interp, n, env) as RV;

  self.applyFilter = (operand: RV, node: Node, env: Environment) => {
    const name = node.type === 'Identifier' ? node.value! : node.callee?.value;
    // jinja2's Undefined behaves as '' in string filters and has length 0.
    if (operand instanceof UndefinedValue && name && UNDEFINED_AS_EMPTY.has(name)) operand = new StringValue('');
    // Python's json.dumps writes a tuple as a list; the library's tojson refuses tuples.
    if (name === 'tojson') operand = untuple(operand);
    const extra = name ? EXTRA_FILTERS[name] : undefined;
    if (extra) {
      const [args, kwargs] = node.type === 'CallExpression' ? self.evaluateArguments.call(interp, node.args, env) : [[], new Map()];
      const r = extra(operand, args, kwargs, env);
      if (r !== undefined) return r;
    }
    return origFilter(operand, node, env);
  };

  // `s.strip(...)`, `s.split(...)` and every other str method call on a string run Python's
  // definition (py-str.ts); calls on other values go to the library with the object evaluated once.
  const origCall = self.evaluateCallExpression.bind(interp);
  self.evaluateCallExpression = (node: Node & { callee: Node & { computed?: boolean; object?: Node; property?: Node } }, env: Environment) => {
    const callee = node.callee;
    const name = callee.type === 'MemberExpression' && !callee.computed && callee.property?.type === 'Identifier' ? callee.property.value! : '';
    if (!Object.hasOwn(STR_METHODS, name) && name !== 'format') return origCall(node, env);
    const target = evaluate(callee.object!, env);
    if (!isStr(target)) return withValue(env, target, (object) => origCall({ ...node, callee: { ...callee, object } }, env));
    const [args, kwargs] = self.evaluateArguments.call(interp, node.args, env) as [RV[], Map<string, RV>];
    try {
      if (name === 'format') return new StringValue(pyStrFormat(target.value, args.map(pyStr), new Map([...kwargs].map(([k, v]) => [k, pyStr(v)]))));
      return fromJs(callStrMethod(name, target.value, args.map(toJs), new Map([...kwargs].map(([k, v]) => [k, toJs(v)]))));
    } catch (e) {
      if (e instanceof PyStrError) throw new Error(`str.${name}(): ${e.message}`, { cause: e });
      throw e;
    }
  };

  // `~` converts both sides with Python's str(): `'a' ~ none` is 'aNone', not an error.
  self.evaluateBinaryExpression = (node: Node, env: Environment) => {
    if (node.operator?.value === '~') return new StringValue(pyStr(evaluate(node.left!, env)) + pyStr(evaluate(node.right!, env)));
    return origBinary(node, env);
  };

  // `{{ none }}` prints None and `{{ true }}` True, as Python's str() does.
  self.evaluateBlock = (statements: Node[], env: Environment) => {
    let out = '';
    for (const st of statements) {
      const v = self.evaluate.call(interp, st, env) as RV;
      if (STATEMENTS.has(st.type)) {
        if (!(v instanceof NullValue) && !(v instanceof UndefinedValue)) out += (v as { toString(): string }).toString();
      } else out += v instanceof StringValue ? v.value : pyStr(v);
    }
    return new StringValue(out);
  };

  // A computed key that is undefined (`map[spec.type]` when spec has no type) gives Undefined, as in Python.
  const origMember = self.evaluateMemberExpression.bind(interp);
  self.evaluateMemberExpression = (node: Node & { computed?: boolean; property?: Node; object?: Node }, env: Environment) => {
    if (node.computed && node.property?.type !== 'SliceExpression') {
      const key = evaluate(node.property!, env);
      if (key instanceof UndefinedValue) return key;
    }
    return origMember(node, env);
  };

  // Python iterates strings (by character) and Undefined (nothing); the library throws on both.
  const origFor = self.evaluateFor.bind(interp);
  self.evaluateFor = (node: Node & { iterable: Node & { lhs?: Node } }, env: Environment) => {
    const isSelect = node.iterable.type === 'SelectExpression';
    const source = isSelect ? node.iterable.lhs! : node.iterable;
    let value = evaluate(source, env);
    if (value instanceof UndefinedValue) value = new ArrayValue([]);
    else if (value instanceof StringValue) value = new ArrayValue(Array.from(value.value as string, (c) => new StringValue(c)));
    return withValue(env, value, (ident) => origFor({ ...node, iterable: isSelect ? { ...node.iterable, lhs: ident } : ident }, env));
  };

  self.evaluateTestExpression = (node: Node, env: Environment) => {
    const name = node.test?.value;
    const override = name ? OVERRIDDEN_TESTS[name] : undefined;
    if (override) {
      const r = override(evaluate(node.operand!, env));
      return new BooleanValue(node.negate ? !r : r);
    }
    const extra = name ? EXTRA_TESTS[name] : undefined;
    if (!extra || env.tests.has(node.test!.value!)) return origTest(node, env);
    const r = extra(evaluate(node.operand!, env));
    return new BooleanValue(node.negate ? !r : r);
  };
}
