/**
 * The bounded compile (issue #19): a grammar that compiles past the time limit is refused with an
 * error naming the limit while the event loop keeps running (a timer keeps ticking), an invalid
 * grammar is refused by the probe without touching this thread's xgrammar instance, and valid
 * grammars compile and work afterwards.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import { longestStall } from '../testing/event-loop';
import { expectSchemaWorks } from '../testing/grammar';
import { loadTextModel } from '../text/from-model';
import type { TextTokenizer } from '../text/tokenizer';
import { compileConstraint, StructuredOutputError, type ConstraintSpec } from './grammar';
import { xgrammarGeneration } from './xgrammar';

let tok: TextTokenizer;

/** 17 characters within every size and nesting limit, yet about 6 s of compiling (the tiny vocabulary, this machine). */
const SLOW: ConstraintSpec = { kind: 'regex', pattern: '(.{0,500}x){0,500}', param: 'regex' };
const schema: ConstraintSpec = { kind: 'json_schema', schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } };

beforeAll(async () => {
  const q = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] });
  tok = loadTextModel(await openModel(q.hf.F32!)).tokenizer;
  // This thread's instance and the probe's worker are loaded once; what follows times the grammars.
  await compileConstraint(tok, { kind: 'regex', pattern: '[0-9]+' });
});


async function refusal(spec: ConstraintSpec, timeLimitMs?: number): Promise<unknown> {
  return compileConstraint(tok, spec, undefined, { timeLimitMs }).then(
    () => null,
    (e: unknown) => e,
  );
}

/** The schema compiles and its first mask allows `{`. */
const schemaWorks = () => expectSchemaWorks(tok, schema);

describe('the bounded grammar compile', () => {
  it('refuses a grammar that compiles past the time limit, naming the limit, while the event loop runs on', async () => {
    let e: unknown;
    const stall = await longestStall(async () => (e = await refusal(SLOW, 300)));
    expect(e).toBeInstanceOf(StructuredOutputError);
    expect((e as StructuredOutputError).param).toBe('regex');
    expect((e as Error).message).toMatch(/time limit of 300 ms/);
    // Compiled here, the grammar holds the loop for seconds; the probe's own set-up is all that runs here.
    expect(stall).toBeLessThan(1000);
    await schemaWorks();
  }, 30_000);

  it('refuses the same grammar again (a refusal is not remembered as proven)', async () => {
    const e = await refusal(SLOW, 300);
    expect((e as Error).message).toMatch(/time limit of 300 ms/);
  }, 30_000);

  it('refuses an invalid grammar in the probe, leaving this thread\'s instance in use', async () => {
    const generation = xgrammarGeneration();
    const e = await refusal({ kind: 'json_schema', schema: { $ref: '#/$defs/nope' } });
    expect(e).toBeInstanceOf(StructuredOutputError);
    expect((e as Error).message).toMatch(/response_format: invalid JSON schema: .*\$defs/);
    expect(xgrammarGeneration()).toBe(generation);
    await schemaWorks();
  });

  it('compiles grammars concurrently, each once, the same as alone', async () => {
    const specs: ConstraintSpec[] = [schema, { kind: 'regex', pattern: '[a-c]{2,4}' }, { kind: 'ebnf', grammar: 'root ::= "x" | "y"' }];
    const compiled = await Promise.all([...specs, ...specs].map((s) => compileConstraint(tok, s)));
    expect(compiled.map((c) => c.spec)).toEqual([...specs, ...specs]);
    await schemaWorks();
  });
});
