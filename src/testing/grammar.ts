/** Structured-output test support. */
import { expect } from 'vitest';
import { compileConstraint, type ConstraintSpec } from '../structured/grammar';
import type { TextTokenizer } from '../text/tokenizer';

/** `spec` (a JSON object schema) compiles for `tok` and its first mask allows `{`. */
export async function expectSchemaWorks(tok: TextTokenizer, spec: ConstraintSpec): Promise<void> {
  const c = await (await compileConstraint(tok, spec)).start();
  const mask = new Uint32Array(c.words);
  await c.mask(mask);
  const open = tok.encode('{', { addSpecialTokens: false })[0]!;
  expect((mask[open >>> 5]! >>> (open & 31)) & 1).toBe(1);
  c.dispose();
}
