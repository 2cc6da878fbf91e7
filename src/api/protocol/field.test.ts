/**
 * The field tables drive the protocol: every declared field is accepted with a valid value and
 * refused with a value of the wrong type (a 400 naming it), a read request holds exactly the
 * table's fields, every shared field reaches the place its row's `into` names, and a field added
 * as one row is read, typed and checked with nothing else changed.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Backend } from '../../engine/types';
import { choiceOptions } from '../choices';
import { ApiError } from '../errors';
import { toSamplingParams } from '../sampling';
import { CHAT_FIELDS, parseChatRequest } from './chat';
import { SAMPLING_FIELDS } from './common';
import { COMPLETION_FIELDS, parseCompletionRequest } from './completions';
import { bool, field, readFields, type Field, type Shape } from './field';

/** Values for the shapes of their own kind; the other kinds get a value from their shape's range. */
const CUSTOM_EXAMPLES: Record<string, unknown> = {
  messages: [{ role: 'user', content: 'hi' }],
  prompt: ['hi'],
  tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  tool_choice: 'auto',
  stream_options: { include_usage: true },
  logit_bias: { '5': 1 },
  response_format: { type: 'json_object' },
  json_schema: { type: 'object' },
  regex: 'a+',
  ebnf: 'root ::= "a"',
  grammar: 'root ::= "a"',
  prediction: { type: 'content', content: 'hi' },
  speculative: { type: 'ngram', n: 3, k: 4 },
};

/** What a field needs beside it to be valid at all. */
const COMPANIONS: Record<string, object> = { top_logprobs: { logprobs: true }, stream_options: { stream: true } };

/** A valid value of the row, other than its default where the shape allows one. */
function validValue(name: string, row: Field<unknown>): unknown {
  const s: Shape<unknown> = row.shape;
  switch (s.kind) {
    case 'number':
    case 'integer': {
      const { min, max, minExclusive } = s.range ?? {};
      const fits = (v: number) =>
        (min === undefined || (minExclusive ? v > min : v >= min)) && (max === undefined || v <= max) && (s.kind === 'number' || Number.isInteger(v));
      const candidates = [max, min === undefined ? undefined : min + 1, 1, 2, 3, 0.5, min].filter((v): v is number => v !== undefined && fits(v));
      return candidates.find((v) => v !== row.default) ?? candidates[0];
    }
    case 'boolean':
      return row.default !== true;
    case 'string':
      return 'x';
    case 'enum':
      return s.values![0];
    case 'strings':
      return ['a'];
    case 'integers':
      return [1, 2];
    case 'object':
      return { a: 1 };
    case 'custom':
      if (!(name in CUSTOM_EXAMPLES)) throw new Error(`field ${name} has a shape of its own: give it a valid value in CUSTOM_EXAMPLES`);
      return CUSTOM_EXAMPLES[name];
  }
}

/** A value of another JSON type than the field takes. */
const wrongType = (row: Field<unknown>) => (row.shape.kind === 'number' || row.shape.kind === 'integer' ? 'x' : 5);

function refusal(read: () => unknown): ApiError {
  try {
    read();
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error('accepted');
}

const ENDPOINTS = [
  { name: 'chat', table: CHAT_FIELDS as Record<string, Field<unknown>>, parse: parseChatRequest, base: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } },
  { name: 'completions', table: COMPLETION_FIELDS as Record<string, Field<unknown>>, parse: parseCompletionRequest, base: { model: 'm', prompt: 'hi' } },
] as const;

for (const { name, table, parse, base } of ENDPOINTS) {
  describe(`the ${name} table`, () => {
    for (const [key, row] of Object.entries(table)) {
      it(`accepts ${key} with a valid value and refuses it with a wrong type, naming it`, () => {
        const good = validValue(key, row);
        const read = parse({ ...base, ...COMPANIONS[key], [key]: good }) as Record<string, unknown>;
        expect(read[key], `${key} = ${JSON.stringify(good)}`).toBeDefined();
        if (row.shape.kind !== 'custom' && typeof good !== 'object') expect(read[key]).toBe(good);
        const err = refusal(() => parse({ ...base, ...COMPANIONS[key], [key]: wrongType(row) }));
        expect(err.status).toBe(400);
        expect(err.param).toBe(key);
        expect(err.message).toContain(key);
      });
    }

    it('reads exactly its fields: defaults filled in, unknown fields ignored', () => {
      const read = parse({ ...base, some_future_field: { x: 1 } }) as Record<string, unknown>;
      expect(Object.keys(read).sort()).toEqual([...Object.keys(table), 'structured'].sort());
      for (const [key, row] of Object.entries(table)) if (!(key in base)) expect(read[key], key).toEqual(row.modelDefault ? undefined : row.default);
    });

    it('sends values on only through the shared rows, the ones resolve reads', () => {
      const shared: Record<string, unknown> = SAMPLING_FIELDS;
      for (const [key, row] of Object.entries(table)) if (row.into) expect(row, key).toBe(shared[key]);
    });

    it('refuses its required fields when absent or null', () => {
      for (const [key, row] of Object.entries(table).filter(([, r]) => r.required)) {
        expect(refusal(() => parse({ ...base, [key]: undefined })).code, key).toBe('missing_required_parameter');
        expect(refusal(() => parse({ ...base, [key]: null })).param, key).toBe(key);
        expect(row.default).toBeUndefined();
      }
    });

    it('reads lora_path and return_routed_experts (a boolean; the backend refuses it on a model without experts)', () => {
      // lora_path is read (the app resolves it to an adapter): a string, nothing else.
      expect(parse({ ...base, lora_path: 'a' })).toMatchObject({ lora_path: 'a' });
      expect(refusal(() => parse({ ...base, lora_path: 5 })).param).toBe('lora_path');
      expect(parse({ ...base, return_routed_experts: true })).toMatchObject({ return_routed_experts: true });
      expect(refusal(() => parse({ ...base, return_routed_experts: 'yes' })).param).toBe('return_routed_experts');
    });
  });
}

describe('the shared table', () => {
  const backend = {} as Backend;
  const where = (req: Parameters<typeof toSamplingParams>[0] & Parameters<typeof choiceOptions>[0]) => {
    const sampling = toSamplingParams(req);
    const { generate, text } = choiceOptions(req, backend, undefined);
    return { sampling, dry: sampling.dry, mirostat: sampling.mirostat, generate, text } as unknown as Record<string, Record<string, unknown>>;
  };

  for (const [key, row] of Object.entries(SAMPLING_FIELDS as Record<string, Field<unknown>>).filter(([, r]) => r.into)) {
    const [group, to] = row.into!;
    it(`sends ${key} to ${group}.${to}, and its default when absent`, () => {
      const value = validValue(key, row);
      const req = parseCompletionRequest({ model: 'm', prompt: 'hi', [key]: value });
      const map = row.map ?? ((v: unknown) => v);
      expect(where(req)[group]![to]).toEqual(map(req[key as keyof typeof req]));
      expect(where(parseCompletionRequest({ model: 'm', prompt: 'hi' }))[group]![to]).toEqual(row.default === undefined ? undefined : map(row.default));
    });
  }

  it("takes a modelDefault row's value from generation_config.json when the request leaves it out", () => {
    const model = { temperature: 0.3, top_p: 0.9, top_k: 7, min_p: 0.05, repetition_penalty: 1.1 };
    const modelled = Object.entries(SAMPLING_FIELDS as Record<string, Field<unknown>>).filter(([, r]) => r.modelDefault);
    expect(modelled.map(([k]) => k).sort()).toEqual(Object.keys(model).sort());
    const fromModel = toSamplingParams(parseCompletionRequest({ model: 'm', prompt: 'hi' }), model);
    expect(fromModel).toMatchObject({ temperature: 0.3, topP: 0.9, topK: 7, minP: 0.05, repetitionPenalty: 1.1 });
    const fromRequest = toSamplingParams(parseCompletionRequest({ model: 'm', prompt: 'hi', temperature: 0, top_k: -1 }), model);
    expect(fromRequest).toMatchObject({ temperature: 0, topK: 0, topP: 0.9 });
  });
});

describe('a field added as one row', () => {
  const TABLE = { ...SAMPLING_FIELDS, echo_seed: field(bool, { default: false, doc: 'A field that is not in any table.' }) };

  it('is typed, read, filled in and checked with nothing else written', () => {
    expectTypeOf(readFields(TABLE, {}).echo_seed).toEqualTypeOf<boolean>();
    expectTypeOf(readFields(TABLE, {}).seed).toEqualTypeOf<number | undefined>();
    expect(readFields(TABLE, { echo_seed: true }).echo_seed).toBe(true);
    expect(readFields(TABLE, {}).echo_seed).toBe(false);
    const err = refusal(() => readFields(TABLE, { echo_seed: 'yes' }));
    expect([err.param, err.message]).toEqual(['echo_seed', 'echo_seed must be true or false; got "yes"']);
  });
});
