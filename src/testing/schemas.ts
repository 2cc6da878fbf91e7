/**
 * JSON schemas the structured-output tests generate against: nested objects, arrays with item
 * bounds, enums, bounded numbers, string patterns and lengths, optional fields, $ref/$defs,
 * anyOf. Strings are length-bounded so a random-weight model cannot wander in one forever.
 */
export const SCHEMAS: Array<{ name: string; schema: Record<string, unknown> }> = [
  { name: 'flat_object', schema: { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 99 }, b: { type: 'boolean' } }, required: ['a', 'b'] } },
  { name: 'enum_field', schema: { type: 'object', properties: { color: { enum: ['red', 'green', 'blue'] } }, required: ['color'] } },
  { name: 'const_field', schema: { type: 'object', properties: { v: { const: 'x1' }, n: { type: 'null' } }, required: ['v', 'n'] } },
  { name: 'bounded_string', schema: { type: 'object', properties: { s: { type: 'string', minLength: 2, maxLength: 5 } }, required: ['s'] } },
  { name: 'string_pattern', schema: { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' } }, required: ['code'] } },
  { name: 'integer_range', schema: { type: 'object', properties: { n: { type: 'integer', minimum: -5, maximum: 5 } }, required: ['n'] } },
  { name: 'array_bounds', schema: { type: 'object', properties: { xs: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 }, minItems: 2, maxItems: 4 } }, required: ['xs'] } },
  { name: 'array_of_enums', schema: { type: 'array', items: { enum: ['a', 'b', 'c'] }, minItems: 1, maxItems: 3 } },
  { name: 'top_level_array_of_objects', schema: { type: 'array', items: { type: 'object', properties: { id: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['id'] }, minItems: 1, maxItems: 2 } },
  {
    name: 'nested_objects',
    schema: {
      type: 'object',
      properties: { user: { type: 'object', properties: { name: { type: 'string', maxLength: 4 }, age: { type: 'integer', minimum: 0, maximum: 120 } }, required: ['name', 'age'] } },
      required: ['user'],
    },
  },
  {
    name: 'deeply_nested',
    schema: {
      type: 'object',
      properties: { a: { type: 'object', properties: { b: { type: 'object', properties: { c: { type: 'boolean' } }, required: ['c'] } }, required: ['b'] } },
      required: ['a'],
    },
  },
  {
    name: 'optional_fields',
    schema: { type: 'object', properties: { req: { type: 'boolean' }, opt: { type: 'integer', minimum: 0, maximum: 9 }, opt2: { enum: ['x', 'y'] } }, required: ['req'] },
  },
  {
    name: 'refs_and_defs',
    schema: {
      $defs: { point: { type: 'object', properties: { x: { type: 'integer', minimum: 0, maximum: 9 }, y: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['x', 'y'] } },
      type: 'object',
      properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
      required: ['from', 'to'],
    },
  },
  {
    name: 'any_of',
    schema: {
      type: 'object',
      properties: { v: { anyOf: [{ type: 'integer', minimum: 0, maximum: 9 }, { type: 'boolean' }, { enum: ['none'] }] } },
      required: ['v'],
    },
  },
  {
    name: 'any_of_objects',
    schema: {
      anyOf: [
        { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['kind', 'r'] },
        { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['kind', 'side'] },
      ],
    },
  },
  { name: 'nullable', schema: { type: 'object', properties: { v: { type: ['integer', 'null'], minimum: 0, maximum: 9 } }, required: ['v'] } },
  { name: 'tuple_prefix_items', schema: { type: 'array', prefixItems: [{ type: 'boolean' }, { enum: [1, 2, 3] }], items: false } },
  { name: 'no_additional_properties', schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false } },
  {
    name: 'array_of_nested',
    schema: {
      type: 'object',
      properties: { rows: { type: 'array', maxItems: 2, items: { type: 'object', properties: { k: { enum: ['p', 'q'] }, v: { type: 'array', maxItems: 2, items: { type: 'boolean' } } }, required: ['k', 'v'] } } },
      required: ['rows'],
    },
  },
  {
    name: 'openai_strict_style',
    schema: {
      type: 'object',
      properties: { step: { type: 'string', maxLength: 6 }, done: { type: 'boolean' }, score: { type: 'integer', minimum: 0, maximum: 10 } },
      required: ['step', 'done', 'score'],
      additionalProperties: false,
    },
  },
  { name: 'enum_mixed_types', schema: { enum: [1, 'two', true, null] } },
  { name: 'date_pattern', schema: { type: 'object', properties: { d: { type: 'string', pattern: '^20[0-9]{2}-[01][0-9]-[0-3][0-9]$' } }, required: ['d'] } },
];
