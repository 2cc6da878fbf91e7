/**
 * compileConstraint on the tiny qwen3 fixture's byte-level BPE tokenizer: masks that allow only
 * what the grammar allows, termination, and 400-style errors naming the field.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import { loadTextModel } from '../text/from-model';
import type { TextTokenizer } from '../text/tokenizer';
import { compileConstraint, StructuredOutputError, type Constraint } from './grammar';

let tok: TextTokenizer;

beforeAll(async () => {
  const q = await ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] });
  tok = loadTextModel(await openModel(q.hf.F32!)).tokenizer;
});

const allowed = (mask: Uint32Array, id: number) => ((mask[id >>> 5]! >>> (id & 31)) & 1) === 1;

/** Feeds `text` token by token, checking each token was allowed. */
async function feed(c: Constraint, text: string): Promise<void> {
  const mask = new Uint32Array(c.words);
  for (const id of tok.encode(text, { addSpecialTokens: false })) {
    await c.mask(mask);
    expect(allowed(mask, id), `token ${JSON.stringify(tok.decode([id]))} allowed`).toBe(true);
    expect(c.accept(id)).toBe(true);
  }
}

describe('compileConstraint', () => {
  it('allows a schema-valid JSON text token by token and then only EOS, ending the matcher', async () => {
    const schema = { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] };
    const c = await (await compileConstraint(tok, { kind: 'json_schema', schema })).start();
    await feed(c, '{"a":12}');
    const mask = new Uint32Array(c.words);
    await c.mask(mask);
    const ok = [...Array(tok.vocabSize).keys()].filter((id) => allowed(mask, id));
    expect(ok.every((id) => tok.eosIds.includes(id))).toBe(true);
    expect(c.isTerminated()).toBe(false);
    expect(c.accept(ok[0]!)).toBe(true);
    expect(c.isTerminated()).toBe(true);
    c.dispose();
  });

  it('keeps raw control characters out of length-bounded JSON strings (JSON.parse rejects them)', async () => {
    const schema = { type: 'object', properties: { s: { type: 'string', maxLength: 5 } }, required: ['s'] };
    const c = await (await compileConstraint(tok, { kind: 'json_schema', schema })).start();
    await feed(c, '{"s":"');
    const mask = new Uint32Array(c.words);
    await c.mask(mask);
    for (const ch of ['\t', '\u0001']) {
      const [id] = tok.encode(ch, { addSpecialTokens: false });
      expect(allowed(mask, id!), JSON.stringify(ch)).toBe(false);
    }
    expect(allowed(mask, tok.encode('x', { addSpecialTokens: false })[0]!)).toBe(true);
    c.dispose();
  });

  it('forbids tokens the grammar does not allow', async () => {
    const c = await (await compileConstraint(tok, { kind: 'regex', pattern: '[0-9]+' })).start();
    const mask = new Uint32Array(c.words);
    await c.mask(mask);
    expect(allowed(mask, tok.encode('7', { addSpecialTokens: false })[0]!)).toBe(true);
    expect(allowed(mask, tok.encode('a', { addSpecialTokens: false })[0]!)).toBe(false);
    c.dispose();
  });

  it('leaves the rows past the tokenizer vocabulary disallowed when the model has more', async () => {
    const extra = tok.vocabSize + 40;
    const c = await (await compileConstraint(tok, { kind: 'json_object' }, extra)).start();
    expect(c.words).toBe(Math.ceil(extra / 32));
    const mask = new Uint32Array(c.words).fill(0xffffffff);
    await c.mask(mask);
    for (let id = tok.vocabSize; id < extra; id++) expect(allowed(mask, id)).toBe(false);
    c.dispose();
  });

  it.each([
    [{ kind: 'json_schema', schema: { type: 5 } }, 'response_format', /type/i],
    [{ kind: 'json_schema', schema: 'nope' }, 'response_format', /must be an object/],
    [{ kind: 'regex', pattern: '[a-' }, 'regex', /regular expression/],
    [{ kind: 'ebnf', grammar: 'root ::= "a" |' }, 'ebnf', /grammar/],
    [{ kind: 'ebnf', grammar: 'start ::= "a"' }, 'grammar', /root/i],
  ] as const)('refuses %j with a StructuredOutputError naming the field', async (spec, param, message) => {
    const p = param === 'grammar' ? { ...spec, param } : spec;
    const e = await compileConstraint(tok, p as never).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(StructuredOutputError);
    expect((e as StructuredOutputError).param).toBe(param);
    expect((e as Error).message).toMatch(message);
  });

  it('still compiles after refusing an invalid grammar', async () => {
    await compileConstraint(tok, { kind: 'ebnf', grammar: 'root ::= (' }).catch(() => undefined);
    const c = await (await compileConstraint(tok, { kind: 'ebnf', grammar: 'root ::= "yes" | "no"' })).start();
    await feed(c, 'yes');
    c.dispose();
  });
});
