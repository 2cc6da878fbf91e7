/**
 * The request fields that ask for structured output, in every dialect the API accepts, as rows of
 * the shared field table, each read into a `ConstraintSpec`:
 *   - OpenAI: `response_format: {type: 'text' | 'json_object' | 'json_schema', json_schema: {name, schema, strict}}`
 *     (llama.cpp / vLLM also put `schema` directly in `response_format`);
 *   - SGLang / vLLM: top-level `json_schema` (an object, or the schema as a JSON string), `regex`, `ebnf`;
 *   - llama.cpp: `grammar` as GBNF text; mistral.rs: `grammar: {type: 'regex' | 'json_schema' | 'gbnf' | 'ebnf', value}`.
 * At most one may ask (`oneConstraint`). Every failure is a 400 naming the field; compiling (which
 * can also fail) is `compileForRequest`.
 */
import { ApiError, invalid, unsupported } from '../errors';
import type { TextTokenizer } from '../../text/tokenizer';
import { compileConstraint, StructuredOutputError, type CompileOptions, type CompiledConstraint, type ConstraintSpec } from '../../structured/grammar';
import { custom, field, show, type FieldsOf, type Json } from './field';

const given = (v: unknown) => v !== undefined && v !== null;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export const STRUCTURED_FIELDS = {
  response_format: field(custom(readResponseFormat), { doc: "OpenAI's output format: text, any JSON object, or JSON following json_schema.schema." }),
  json_schema: field(custom((v, param): ConstraintSpec => ({ kind: 'json_schema', schema: schemaValue(v, param), param })), {
    doc: 'SGLang / vLLM: a JSON schema (or its JSON text) the output follows.',
  }),
  regex: field(custom((v, param): ConstraintSpec => ({ kind: 'regex', pattern: text(v, param), param })), { doc: 'SGLang / vLLM: a regular expression the output matches.' }),
  ebnf: field(custom((v, param): ConstraintSpec => ({ kind: 'ebnf', grammar: text(v, param), param })), { doc: 'SGLang / vLLM: an EBNF (GBNF) grammar the output follows.' }),
  grammar: field(custom(readGrammar), { doc: "llama.cpp's GBNF text, or mistral.rs's {type: regex | json_schema | gbnf | ebnf, value}." }),
};

/** The structured-output spec the request asks for, or undefined; at most one of its fields may ask for one. */
export function oneConstraint(r: FieldsOf<typeof STRUCTURED_FIELDS>): ConstraintSpec | undefined {
  const specs = (Object.keys(STRUCTURED_FIELDS) as (keyof typeof STRUCTURED_FIELDS)[]).flatMap((k) => r[k] ?? []);
  if (specs.length > 1) {
    const names = specs.map((s) => s.param!);
    throw invalid(names[1]!, `only one of response_format, json_schema, regex, ebnf and grammar may constrain the output; got ${names.join(' and ')}`);
  }
  return specs[0];
}

function readResponseFormat(rf: unknown): ConstraintSpec | undefined {
  const param = 'response_format';
  if (!isObject(rf)) throw invalid(param, `response_format must be an object like {"type": "json_object"}; got ${show(rf)}`);
  switch (rf.type) {
    case 'text':
      return undefined;
    case 'json_object':
      // llama.cpp accepts a schema here too.
      return given(rf.schema) ? { kind: 'json_schema', schema: schemaValue(rf.schema, 'response_format.schema'), param: 'response_format.schema' } : { kind: 'json_object', param };
    case 'json_schema': {
      const js = rf.json_schema;
      if (given(js)) {
        const p = 'response_format.json_schema';
        if (!isObject(js)) throw invalid(p, `${p} must be an object {name, schema, strict}; got ${show(js)}`);
        if (given(js.name) && (typeof js.name !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(js.name)))
          throw invalid(`${p}.name`, `${p}.name must be 1-64 letters, digits, _ or -; got ${show(js.name)}`);
        if (given(js.strict) && typeof js.strict !== 'boolean') throw invalid(`${p}.strict`, `${p}.strict must be true or false; got ${show(js.strict)}`);
        if (!given(js.schema)) return { kind: 'json_object', param: p };
        return { kind: 'json_schema', schema: schemaValue(js.schema, `${p}.schema`), param: `${p}.schema` };
      }
      // vLLM / llama.cpp: {type: 'json_schema', schema}
      if (given(rf.schema)) return { kind: 'json_schema', schema: schemaValue(rf.schema, 'response_format.schema'), param: 'response_format.schema' };
      throw invalid('response_format.json_schema', 'response_format of type "json_schema" needs json_schema: {name, schema}', 'missing_required_parameter');
    }
    default:
      throw invalid('response_format.type', `response_format.type must be one of "text", "json_object", "json_schema"; got ${show(rf.type)}`);
  }
}

/** llama.cpp's GBNF text, or mistral.rs's `{type, value}`. */
function readGrammar(g: unknown): ConstraintSpec {
  if (typeof g === 'string') return { kind: 'ebnf', grammar: nonEmpty(g, 'grammar'), param: 'grammar' };
  if (!isObject(g)) throw invalid('grammar', `grammar must be GBNF text or {type, value}; got ${show(g)}`);
  const p = 'grammar.value';
  switch (g.type) {
    case 'regex':
      return { kind: 'regex', pattern: text(g.value, p), param: p };
    case 'json_schema':
      return { kind: 'json_schema', schema: schemaValue(g.value, p), param: p };
    case 'gbnf':
    case 'ebnf':
      return { kind: 'ebnf', grammar: text(g.value, p), param: p };
    case 'lark':
    case 'llguidance':
      throw unsupported('grammar.type', `${g.type} grammars (use regex, json_schema or gbnf)`);
    default:
      throw invalid('grammar.type', `grammar.type must be one of "regex", "json_schema", "gbnf", "ebnf"; got ${show(g.type)}`);
  }
}

function text(v: unknown, param: string): string {
  if (typeof v !== 'string') throw invalid(param, `${param} must be a string; got ${show(v)}`);
  return nonEmpty(v, param);
}

function nonEmpty(s: string, param: string): string {
  if (s.trim() === '') throw invalid(param, `${param} must not be empty`);
  return s;
}

/** A schema given as an object (or boolean), or as its JSON text (SGLang). */
function schemaValue(v: unknown, param: string): unknown {
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch (e) {
      throw invalid(param, `${param} is a string but not JSON: ${(e as Error).message}`);
    }
  }
  if (typeof v !== 'boolean' && !isObject(v)) throw invalid(param, `${param} must be a JSON schema (an object); got ${show(v)}`);
  return v;
}

/** Compiles a request's spec for a model; an invalid schema, regex or grammar is a 400 naming its field. */
export async function compileForRequest(tokenizer: TextTokenizer, vocabSize: number, spec: ConstraintSpec, options?: CompileOptions): Promise<CompiledConstraint> {
  try {
    return await compileConstraint(tokenizer, spec, vocabSize, options);
  } catch (e) {
    if (e instanceof StructuredOutputError) throw new ApiError(400, e.message, 'invalid_request_error', e.param, 'invalid_structured_output', { cause: e });
    throw e;
  }
}
