/**
 * Grammar limits and a trapped grammar engine (issue #19): over-deep regexes, grammars and
 * schemas are refused with a 400 naming the limit before xgrammar sees them; a schema xgrammar
 * would abort on is refused by shape; and an instance that trapped is never reused: the next
 * request compiles on a fresh one and works.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import { expectSchemaWorks } from '../testing/grammar';
import { loadTextModel } from '../text/from-model';
import type { TextTokenizer } from '../text/tokenizer';
import { compileConstraint, StructuredOutputError, type ConstraintSpec } from './grammar';
import { GRAMMAR_LIMITS, checkSchema, nestingDepth } from './limits';
import { loadXGrammar, xgrammarGeneration } from './xgrammar';

let tok: TextTokenizer;

beforeAll(async () => {
  const q = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] });
  tok = loadTextModel(await openModel(q.hf.F32!)).tokenizer;
});

const deepRegex = (n: number) => '('.repeat(n) + 'a' + ')'.repeat(n);
const deepEbnf = (n: number) => `root ::= ${'('.repeat(n)}"a"${')'.repeat(n)}`;
const schema: ConstraintSpec = { kind: 'json_schema', schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } };

/** The schema compiles and its first mask allows `{`. */
const schemaWorks = () => expectSchemaWorks(tok, schema);

async function refusal(spec: ConstraintSpec): Promise<StructuredOutputError> {
  const e = await compileConstraint(tok, spec).then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(StructuredOutputError);
  return e as StructuredOutputError;
}

describe('grammar limits', () => {
  it('counts nesting outside quotes and escapes', () => {
    expect(nestingDepth('((a)(b))', false)).toBe(2);
    expect(nestingDepth(String.raw`\(\(\(a`, false)).toBe(0);
    expect(nestingDepth(`root ::= "((((" ("a")`, true)).toBe(1);
  });

  it('refuses a regex and a grammar nested 5000 deep with a 400 naming the limit, and the next schema compiles', async () => {
    const r = await refusal({ kind: 'regex', pattern: deepRegex(5000), param: 'regex' });
    expect(r.param).toBe('regex');
    expect(r.message).toMatch(`the limit is ${GRAMMAR_LIMITS.maxNesting}`);
    const g = await refusal({ kind: 'ebnf', grammar: deepEbnf(5000), param: 'ebnf' });
    expect(g.message).toMatch(`the limit is ${GRAMMAR_LIMITS.maxNesting}`);
    await schemaWorks();
  });

  it('compiles a regex and a grammar at the nesting limit', async () => {
    await compileConstraint(tok, { kind: 'regex', pattern: deepRegex(GRAMMAR_LIMITS.maxNesting) });
    await compileConstraint(tok, { kind: 'ebnf', grammar: deepEbnf(GRAMMAR_LIMITS.maxNesting) });
  });

  it('refuses a schema with an unknown type by its shape, naming where, and over-deep schemas', async () => {
    const e = await refusal({ kind: 'json_schema', schema: { type: 'object', properties: { a: { type: 'nonsense' } } }, param: 'response_format' });
    expect(e.message).toMatch('response_format.properties.a.type');
    let deep: unknown = { type: 'string' };
    for (let i = 0; i < 10_000; i++) deep = { type: 'array', items: deep };
    expect(() => checkSchema(deep, 'json_schema')).toThrow(/limit of 32 levels/);
  });
});

describe('a trapped grammar engine', () => {
  it('is never reused: after a trap inside the wasm, the next request compiles on a fresh instance', async () => {
    await schemaWorks();
    // Trap the current instance the way a hostile grammar did before the limits existed.
    const xg = await loadXGrammar();
    const info = await xg.TokenizerInfo.createTokenizerInfo([...tok.vocab], tok.vocabType, tok.prependSpace, tok.vocabSize, [...tok.eosIds]);
    const compiler = await xg.GrammarCompiler.createGrammarCompiler(info);
    await expect(compiler.compileStructuralTag({ type: 'structural_tag', format: { type: 'regex', pattern: deepRegex(5000) } })).rejects.toThrow();
    const before = xgrammarGeneration();
    await schemaWorks();
    await compileConstraint(tok, { kind: 'regex', pattern: '[a-z]+' });
    await compileConstraint(tok, { kind: 'ebnf', grammar: 'root ::= "yes" | "no"' });
    // A compile cached from before the trap is served as is; the first new one found the trap.
    expect(xgrammarGeneration()).toBeGreaterThanOrEqual(before);
  });
});
