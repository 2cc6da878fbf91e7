/**
 * A request's spec as the xgrammar calls that compile it. The calls go through `GrammarOps`, so
 * one sequence of steps serves both places a grammar is compiled: the main thread's xgrammar
 * instance (whose compiled grammar the matchers use) and the probe's worker thread, which
 * compiles the same grammar first under a time limit (probe.ts).
 */
import type { ConstraintSpec } from './spec';
import { StructuredOutputError } from './errors';
import { refuseDeadEnds } from './productive';
import { autoToolCallsTag, forcedToolCallsTag } from './tool-tags';

/** The xgrammar calls a compile makes; `T` is what a compile gives (a CompiledGrammar, or nothing in the probe). */
export interface GrammarOps<T> {
  /** xgrammar's conversion of a JSON schema (its text) to EBNF, with SCHEMA_EBNF_ARGS. */
  schemaEbnf(schema: string): Promise<string>;
  /** xgrammar's normalized print of EBNF text (root rule `root`): what productive.ts reads. */
  normalizeEbnf(ebnf: string): Promise<string>;
  /** Compiles EBNF text whose root rule is `root`. */
  grammar(ebnf: string): Promise<T>;
  /** Compiles a structural tag (tool calls, regex). */
  structuralTag(tag: Record<string, unknown>): Promise<T>;
}

/**
 * `_jsonSchemaToEBNF`'s arguments after the schema: no free whitespace (anyWhitespace false),
 * compact output (indent -1) with `,` and `:` separators: fewer tokens, and no model can loop on
 * spaces.
 */
export const SCHEMA_EBNF_ARGS: [anyWhitespace: boolean, indent: number, separators: [string, string]] = [false, -1, [',', ':']];

/**
 * xgrammar (0.1.27) writes a length-bounded JSON string as `[^"\\\r\n]{m,n}`, which lets raw
 * control characters (U+0000-U+001F, tab included) into the string: invalid JSON that
 * `JSON.parse` rejects. Its unbounded strings already exclude them; this gives bounded ones the
 * same class (escapes stay out of bounded strings, as xgrammar has them).
 */
const LOOSE_STRING_CHAR = String.raw`[^"\\\r\n]`;
const JSON_STRING_CHAR = String.raw`[^\0-\x1f"\\]`;

/** A schema as EBNF (root rule `root`): xgrammar's conversion, made JSON-correct. */
async function schemaEbnf<T>(ops: GrammarOps<T>, schema: string): Promise<string> {
  const ebnf = await ops.schemaEbnf(schema);
  return ebnf.split(LOOSE_STRING_CHAR).join(JSON_STRING_CHAR);
}

const compileSchema = async <T>(ops: GrammarOps<T>, schema: string): Promise<T> => ops.grammar(await schemaEbnf(ops, schema));

/**
 * Compiles `spec` through `ops`. Throws StructuredOutputError (a 400 naming `param`) for an
 * invalid schema, regex or grammar; one the ops throw themselves (a time limit) passes unchanged.
 */
export async function compileSpec<T>(ops: GrammarOps<T>, spec: ConstraintSpec, param: string): Promise<T> {
  const fail = (what: string, e: unknown) =>
    e instanceof StructuredOutputError ? e : new StructuredOutputError(param, `${param}: invalid ${what}: ${(e as Error).message}`, { cause: e });
  switch (spec.kind) {
    case 'json_object':
      // OpenAI's json_object is an object; compact like json_schema's output.
      return compileSchema(ops, '{"type":"object"}');
    case 'json_schema': {
      const schema = spec.schema;
      if (typeof schema === 'boolean') {
        // `true` accepts any JSON value; `false` accepts nothing.
        if (schema) return compileSchema(ops, '{}');
        throw new StructuredOutputError(param, `${param}: the schema false accepts no output`);
      }
      if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
        throw new StructuredOutputError(param, `${param}: a JSON schema must be an object; got ${JSON.stringify(schema)}`);
      }
      try {
        return await compileSchema(ops, JSON.stringify(schema));
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
        return await ops.structuralTag({ type: 'structural_tag', format: { type: 'regex', pattern: spec.pattern } });
      } catch (e) {
        throw fail('regular expression', e);
      }
    }
    case 'tool_calls':
    case 'tool_calls_auto': {
      if (spec.tools.length === 0) throw new StructuredOutputError(param, `${param}: no tools to call`);
      const argsEbnf = (schema: string) => schemaEbnf(ops, schema);
      try {
        const tag =
          spec.kind === 'tool_calls'
            ? await forcedToolCallsTag(spec.format, spec.tools, spec.multiple, argsEbnf)
            : await autoToolCallsTag(spec.format, spec.tools, argsEbnf);
        return await ops.structuralTag(tag as Record<string, unknown>);
      } catch (e) {
        throw fail('tool parameters schema', e);
      }
    }
    case 'ebnf': {
      if (!spec.grammar.trim()) throw new StructuredOutputError(param, `${param}: the grammar is empty`);
      try {
        // A grammar that cannot end is the caller's error: refused before it is compiled.
        refuseDeadEnds(await ops.normalizeEbnf(spec.grammar), spec.grammar, param);
        return await ops.grammar(spec.grammar);
      } catch (e) {
        throw fail('grammar', e);
      }
    }
  }
}
