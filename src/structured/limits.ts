/**
 * What a grammar may ask of xgrammar, checked before it compiles anything. xgrammar's parsers
 * and schema converter recurse once per nesting level inside its wasm, where running out of stack
 * traps the instance (then every later call fails: see discardXGrammar), and an unknown schema
 * `type` aborts it. So the input's size and nesting are bounded here, each refusal a 400 naming
 * the field and the limit. docs/api.md lists the limits.
 */
import { StructuredOutputError } from './errors';

export const GRAMMAR_LIMITS = {
  /** Longest regex, in characters. */
  maxPatternChars: 16 * 1024,
  /** Longest EBNF grammar, in characters. */
  maxGrammarChars: 64 * 1024,
  /** Deepest nesting of groups in a regex or an EBNF grammar. */
  maxNesting: 64,
  /** Deepest nesting of subschemas in a JSON schema. */
  maxSchemaDepth: 32,
  /**
   * How long a grammar new to the process may take to compile, in ms (probe.ts); the default of
   * `compileConstraint`'s `timeLimitMs`. Real schemas compile in well under a second even against
   * a 150k-token vocabulary; this also bounds how long such a compile holds the event loop.
   */
  compileTimeMs: 3000,
} as const;

/**
 * The deepest nesting of ( [ { in a regex or EBNF text. Quoted strings (EBNF) and escaped
 * characters are skipped; a character class counts as one level.
 */
export function nestingDepth(text: string, quotes: boolean): number {
  let depth = 0;
  let deepest = 0;
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\\') {
      i++;
      continue;
    }
    if (quote) {
      if (c === quote) quote = '';
      continue;
    }
    if (quotes && (c === '"' || c === "'")) quote = c;
    else if (c === '(' || c === '[' || c === '{') deepest = Math.max(deepest, ++depth);
    else if (c === ')' || c === ']' || c === '}') depth = Math.max(0, depth - 1);
  }
  return deepest;
}

export function checkRegex(pattern: string, param: string): void {
  if (pattern.length > GRAMMAR_LIMITS.maxPatternChars)
    throw new StructuredOutputError(param, `${param}: the pattern is ${pattern.length} characters long; the limit is ${GRAMMAR_LIMITS.maxPatternChars}`);
  const depth = nestingDepth(pattern, false);
  if (depth > GRAMMAR_LIMITS.maxNesting)
    throw new StructuredOutputError(param, `${param}: the pattern nests groups ${depth} deep; the limit is ${GRAMMAR_LIMITS.maxNesting}`);
}

export function checkGrammar(grammar: string, param: string): void {
  if (grammar.length > GRAMMAR_LIMITS.maxGrammarChars)
    throw new StructuredOutputError(param, `${param}: the grammar is ${grammar.length} characters long; the limit is ${GRAMMAR_LIMITS.maxGrammarChars}`);
  const depth = nestingDepth(grammar, true);
  if (depth > GRAMMAR_LIMITS.maxNesting)
    throw new StructuredOutputError(param, `${param}: the grammar nests ${depth} deep; the limit is ${GRAMMAR_LIMITS.maxNesting}`);
}

const JSON_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
/** Keywords whose value is one subschema, a list of them, or a map of them. */
const ONE = ['items', 'additionalProperties', 'not', 'contains', 'propertyNames', 'additionalItems', 'unevaluatedItems', 'unevaluatedProperties', 'if', 'then', 'else'];
const LIST = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const MAP = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];

/**
 * Checks a JSON schema's shape where xgrammar would abort on it: `type` names JSON types,
 * subschemas are schemas (objects or booleans), `required` lists strings, `enum` is a list, and
 * nesting stays within the limit. Its own walk is iterative, so no schema can overflow it.
 */
export function checkSchema(schema: unknown, param: string): void {
  const stack: { s: unknown; at: string; depth: number }[] = [{ s: schema, at: param, depth: 0 }];
  const fail = (at: string, what: string) => new StructuredOutputError(param, `${at}: ${what}`);
  while (stack.length) {
    const { s, at, depth } = stack.pop()!;
    if (typeof s === 'boolean') continue;
    if (s === null || typeof s !== 'object' || Array.isArray(s)) throw fail(at, `a schema must be an object or a boolean; got ${JSON.stringify(s)?.slice(0, 80)}`);
    if (depth > GRAMMAR_LIMITS.maxSchemaDepth) throw fail(at, `the schema nests deeper than the limit of ${GRAMMAR_LIMITS.maxSchemaDepth} levels`);
    const o = s as Record<string, unknown>;
    if (o.type !== undefined) {
      const types = Array.isArray(o.type) ? o.type : [o.type];
      for (const t of types)
        if (typeof t !== 'string' || !JSON_TYPES.has(t)) throw fail(`${at}.type`, `${JSON.stringify(t)} is not a JSON type (${[...JSON_TYPES].join(', ')})`);
    }
    if (o.required !== undefined && (!Array.isArray(o.required) || !o.required.every((x) => typeof x === 'string')))
      throw fail(`${at}.required`, 'required must be a list of property names');
    if (o.enum !== undefined && !Array.isArray(o.enum)) throw fail(`${at}.enum`, 'enum must be a list');
    for (const k of ONE) if (o[k] !== undefined) stack.push({ s: o[k], at: `${at}.${k}`, depth: depth + 1 });
    for (const k of LIST) {
      if (o[k] === undefined) continue;
      if (!Array.isArray(o[k])) throw fail(`${at}.${k}`, `${k} must be a list of schemas`);
      (o[k] as unknown[]).forEach((x, i) => stack.push({ s: x, at: `${at}.${k}[${i}]`, depth: depth + 1 }));
    }
    for (const k of MAP) {
      if (o[k] === undefined) continue;
      if (o[k] === null || typeof o[k] !== 'object' || Array.isArray(o[k])) throw fail(`${at}.${k}`, `${k} must map names to schemas`);
      for (const [name, x] of Object.entries(o[k] as Record<string, unknown>)) stack.push({ s: x, at: `${at}.${k}.${name}`, depth: depth + 1 });
    }
  }
}
