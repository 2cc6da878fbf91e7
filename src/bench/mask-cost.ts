/**
 * The grammar mask's CPU cost at a real model's vocabulary size, without a GPU or a model: a
 * JSON-schema matcher (compiled by src/structured/grammar.ts, as requests are) over a synthetic
 * 128k byte-level vocabulary accepts a valid document token by token, and each step's bitmask
 * fill (xgrammar's getNextTokenBitmask plus the copy into the engine's words, `Constraint.mask`) is
 * timed. The fixtures' vocabularies have a few hundred ids, where the mask costs next to nothing.
 *
 * Every step is checked, so a timing is never of a matcher gone wrong: the document's tokens
 * must decode back to it, each must be allowed by the mask before it and accepted after, and at
 * the end the mask must allow an end-of-sequence id, which terminates the matcher.
 */
import { compileConstraint, type Constraint } from '../structured/grammar';
import { loadXGrammar } from '../structured/xgrammar';
import { LLAMA3_VOCAB, SyntheticTokenizer, syntheticVocab } from './synthetic-vocab';

/** A grammar step that went wrong: the document does not follow the schema, or the mask and the matcher disagree. */
export class MaskCheckError extends Error {
  override name = 'MaskCheckError';
  constructor(
    readonly step: number,
    message: string,
  ) {
    super(message);
  }
}

/** A schema of the kind structured-output requests send: nested objects, arrays of objects, enums, numbers, nullable fields. */
export const MASK_COST_SCHEMA = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    email: { type: 'string' },
    active: { type: 'boolean' },
    score: { type: 'number' },
    tags: { type: 'array', items: { type: 'string' } },
    address: {
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' }, country: { enum: ['US', 'GB', 'FR', 'DE', 'JP'] }, zip: { type: 'string' } },
      required: ['street', 'city', 'country', 'zip'],
    },
    orders: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          item: { type: 'string' },
          quantity: { type: 'integer', minimum: 1 },
          price: { type: 'number' },
          status: { enum: ['pending', 'shipped', 'delivered'] },
        },
        required: ['item', 'quantity', 'price', 'status'],
      },
    },
    notes: { type: ['string', 'null'] },
  },
  required: ['id', 'name', 'email', 'active', 'score', 'tags', 'address', 'orders', 'notes'],
} as const;

/** A document valid against MASK_COST_SCHEMA, compact as the grammar writes JSON (properties in schema order). */
export const MASK_COST_DOCUMENT = JSON.stringify({
  id: 48213,
  name: 'Margaret Holloway',
  email: 'margaret.holloway@example.com',
  active: true,
  score: 87.25,
  tags: ['customer', 'priority support', 'newsletter', 'early access'],
  address: { street: '221 North Harbour Road, Apartment 4B', city: 'Portsmouth', country: 'GB', zip: 'PO1 3AX' },
  orders: [
    { item: 'Wireless keyboard with backlit keys', quantity: 1, price: 59.99, status: 'delivered' },
    { item: 'USB-C charging cable (2 metres)', quantity: 3, price: 8.5, status: 'shipped' },
    { item: 'Noise cancelling headphones', quantity: 1, price: 199, status: 'pending' },
  ],
  notes: 'Prefers delivery after 5 pm on weekdays. The lighthouse keeper wrote in her logbook every evening at seven; the supply boat was three days late.',
});

export interface MaskCostResult {
  /** Token ids in the synthetic vocabulary (the bitmask has ceil(vocab / 32) words). */
  vocab: number;
  /** What was matched. */
  constraint: string;
  /** Tokens of the document (greedy longest match); each pass times one mask per token. */
  tokens: number;
  /** xgrammar's TokenizerInfo for the vocabulary plus the schema's compilation (once per tokenizer / per schema in the engine). */
  compileMs: number;
  /** Bitmask fill per token, over every timed pass (ms). */
  meanMs: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

/** The `p`-quantile (0..1) of `xs` by the nearest-rank method; NaN for none. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

/**
 * Times the bitmask per token while the schema's matcher accepts `document` (see the file comment
 * for the checks): one untimed pass, then `passes` timed ones, each with a fresh matcher.
 */
export async function measureMaskCost(opts: { vocabSize?: number; schema?: object; document?: string; passes?: number } = {}): Promise<MaskCostResult> {
  const vocabSize = opts.vocabSize ?? LLAMA3_VOCAB;
  const document = opts.document ?? MASK_COST_DOCUMENT;
  const tokenizer = new SyntheticTokenizer(syntheticVocab(vocabSize));
  const ids = tokenizer.encode(document);
  const decoded = tokenizer.decode(ids);
  if (decoded !== document) throw new MaskCheckError(-1, `the synthetic tokenizer does not round-trip the document: got ${JSON.stringify(decoded.slice(0, 80))}…`);

  await loadXGrammar(); // its wasm's first load is not the grammar's cost
  const t0 = performance.now();
  const compiled = await compileConstraint(tokenizer, { kind: 'json_schema', schema: opts.schema ?? MASK_COST_SCHEMA }, vocabSize);
  const compileMs = performance.now() - t0;
  const times: number[] = [];
  await matchDocument(await compiled.start(), tokenizer, ids, null);
  for (let pass = 0; pass < (opts.passes ?? 3); pass++) await matchDocument(await compiled.start(), tokenizer, ids, times);
  return {
    vocab: vocabSize,
    constraint: 'json_schema (object with nested objects, arrays, enums, numbers, nullable)',
    tokens: ids.length,
    compileMs,
    meanMs: times.reduce((a, b) => a + b, 0) / times.length,
    p50Ms: percentile(times, 0.5),
    p95Ms: percentile(times, 0.95),
    maxMs: Math.max(...times),
  };
}

/** Feeds `ids` to a fresh matcher, checking every step; pushes each mask's time to `times` (when given). Disposes the matcher. */
async function matchDocument(constraint: Constraint, tokenizer: SyntheticTokenizer, ids: readonly number[], times: number[] | null): Promise<void> {
  const bits = new Uint32Array(constraint.words);
  const allowed = (id: number) => ((bits[id >>> 5]! >>> (id & 31)) & 1) === 1;
  try {
    for (const [step, id] of ids.entries()) {
      const t = performance.now();
      await constraint.mask(bits);
      times?.push(performance.now() - t);
      const what = () => `token ${id} ${JSON.stringify(tokenizer.decode([id]))} at step ${step} (after ${JSON.stringify(tokenizer.decode(ids.slice(Math.max(0, step - 8), step)))})`;
      if (!allowed(id)) throw new MaskCheckError(step, `the mask forbids ${what()}`);
      if (!constraint.accept(id)) throw new MaskCheckError(step, `the matcher refused ${what()}, which its mask allowed`);
    }
    await constraint.mask(bits);
    const end = tokenizer.eosIds.find(allowed);
    if (end === undefined || !constraint.accept(end) || !constraint.isTerminated()) {
      throw new MaskCheckError(ids.length, 'the document is complete but the grammar does not let it end');
    }
  } finally {
    constraint.dispose();
  }
}
