/**
 * The dead-end analysis (productive.ts) on xgrammar's own normalized print of each grammar, so
 * the reader meets exactly the forms xgrammar writes: every EBNF form it accepts must pass when
 * the grammar can end, and the grammars that cannot end must be found.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { StructuredOutputError } from './errors';
import { deadEnds, refuseDeadEnds } from './productive';
import { loadXGrammar } from './xgrammar';

let normalize: (ebnf: string) => Promise<string>;

beforeAll(async () => {
  const xg = await loadXGrammar();
  normalize = async (ebnf) => (await xg.Grammar.fromEBNF(ebnf, 'root')).toString();
});

describe('deadEnds', () => {
  it.each([
    ['strings and alternatives', 'root ::= "yes" | "no"'],
    ['classes, starred classes, groups, *, +, ?', 'root ::= [a-z]* x+ y? ("q" | "r") [^"\\\\\\r\\n] [\\]\\-]\nx ::= "x" # a comment\ny ::= "y"*'],
    ['repetition ranges, small and large (xgrammar writes rule{0, n} for these)', 'root ::= [a-z]{0,100} ("ab"){3,200} x{5,} z{2}\nx ::= "x"\nz ::= [a-c]+ | ""'],
    ['recursion with a way out', 'root ::= "(" root ")" | "x"\n'],
    ['mutual recursion with a way out', 'root ::= a\na ::= "a" b | ""\nb ::= "b" a'],
    ['lookahead assertions', 'root ::= b "x"\nb ::= "a" (="x")'],
    ['escapes and non-ASCII', 'root ::= "\\u00e9\\U0001F600\\x41" [\\u00e0-\\u00ff] [^a] "\\t"'],
    ['an unreachable rule that never ends', 'root ::= "a"\nunused ::= unused'],
    ['a negated class that leaves characters', 'root ::= [^\\x00-\\U0010FFFE]'],
  ])('finds none in a grammar that can always end: %s', async (_, ebnf) => {
    expect(deadEnds(await normalize(ebnf))).toBeNull();
  });

  it.each([
    ['root ::= root', true, ['root'], []],
    ['root ::= "a" x\nx ::= x "b"', true, ['root', 'x'], []],
    ['root ::= a\na ::= "a" b\nb ::= a', true, ['root', 'a', 'b'], []],
    ['root ::= ("a" root)+', true, ['root', 'root_1'], []],
    ['root ::= "a" | "b" x\nx ::= "c" x', false, ['x'], []],
    ['root ::= "a" [^\\x00-\\U0010FFFF]', true, ['root'], ['[^\\0-\\U0010ffff]']],
    ['root ::= "a" | "b" [^\\x00-\\x{7f}\\x80-\\U0010FFFF]'.replace('\\x{7f}', '\\x7f'), false, [], ['[^\\0-\\x7f\\x80-\\U0010ffff]']],
  ] as const)('finds the dead ends of %j', async (ebnf, root, rules, classes) => {
    const dead = deadEnds(await normalize(ebnf));
    expect(dead).not.toBeNull();
    expect(dead!.root).toBe(root);
    expect(dead!.rules.slice().sort()).toEqual([...rules].sort());
    expect(dead!.classes).toEqual(classes);
  });

  it('gives up (undefined) on a form it does not read, and refuses nothing then', () => {
    expect(deadEnds('root ::= TagDispatch(("<a>", x))\nx ::= x')).toBeUndefined();
    expect(deadEnds('x ::= "a"')).toBeUndefined();
    expect(() => refuseDeadEnds('root ::= %%', 'root ::= %%', 'ebnf')).not.toThrow();
  });

  it('refuses with a StructuredOutputError naming the field and the caller\'s own rules', async () => {
    const source = 'root ::= "a" x+\nx ::= "b" x';
    const e = (() => {
      try {
        return refuseDeadEnds('root ::= (("a" root_1))\nx ::= (("b" x))\nroot_1 ::= ((x root_1) | (x))', source, 'ebnf');
      } catch (x) {
        return x;
      }
    })();
    expect(e).toBeInstanceOf(StructuredOutputError);
    expect((e as StructuredOutputError).param).toBe('ebnf');
    expect((e as Error).message).toMatch(/^ebnf: the grammar derives no finite string: rules root, x never end/);
    expect((e as Error).message).not.toMatch(/root_1/);
  });
});
