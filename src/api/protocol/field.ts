/**
 * A protocol field is declared once, as a row of a field table (`SAMPLING_FIELDS` in common.ts,
 * `CHAT_FIELDS`, `COMPLETION_FIELDS`): its shape (type and range), a one-line doc, its default and
 * where its value goes. Everything else comes from the table, as vLLM's pydantic
 * `Field(ge=…, le=…)` makes the declaration the validation:
 *   - the request's TypeScript type: `FieldsOf<typeof TABLE>`;
 *   - reading a JSON body: `readFields(TABLE, body)`, a 400 naming the field at the first bad value;
 *   - the hand-off to the backend: `resolve(TABLE, group, request)` gathers the rows whose `into`
 *     names that group, each value resolved request → model default → the row's default.
 */
import { invalid } from '../errors';

export type Json = Record<string, unknown>;

/** A value as an error message quotes it, cut to 60 characters. */
export const show = (v: unknown): string => {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 60 ? s.slice(0, 57) + '...' : s;
};

/** The request body as an object, or a 400 naming what it is instead. */
export function asBody(v: unknown): Json {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid(null, `the request body must be a JSON object; got ${show(v)}`);
  return v as Json;
}

export interface Range {
  min?: number;
  max?: number;
  /** `min` itself is refused (top_p > 0). */
  minExclusive?: boolean;
}

/**
 * How one field's value is checked and read. `read` gets a value that is present and not null
 * (absent and null both mean "not given", as in OpenAI's API) and throws a 400 naming `param`.
 * `kind`, `range` and `values` say what it takes, for docs and the table's own test.
 */
export interface Shape<T> {
  readonly kind: 'number' | 'integer' | 'boolean' | 'string' | 'enum' | 'strings' | 'integers' | 'object' | 'custom';
  readonly range?: Range;
  readonly values?: readonly string[];
  read(v: unknown, param: string): T;
}

function bounds(r: Range): string {
  const { min, max, minExclusive: ex } = r;
  if (min !== undefined && max !== undefined) return ` ${ex ? 'greater than' : 'from'} ${min} ${ex ? 'and at most' : 'to'} ${max}`;
  if (min !== undefined) return ` ${ex ? 'greater than' : 'at least'} ${min}`;
  return max !== undefined ? ` at most ${max}` : '';
}

function numeric<T extends number>(kind: 'number' | 'integer', range: Range): Shape<T> {
  const what = kind === 'integer' ? 'an integer' : 'a number';
  const { min, max, minExclusive } = range;
  return {
    kind,
    range,
    read(v, param) {
      const ok =
        typeof v === 'number' &&
        Number.isFinite(v) &&
        (kind === 'number' || Number.isInteger(v)) &&
        (min === undefined || (minExclusive ? v > min : v >= min)) &&
        (max === undefined || v <= max);
      if (!ok) throw invalid(param, `${param} must be ${what}${bounds(range)}; got ${show(v)}`);
      return v as T;
    },
  };
}

/** A finite number in `range`. */
export const num = (range: Range = {}): Shape<number> => numeric('number', range);

/** An integer in `range`; `T` narrows the type where the range is a short list (`int<0 | 1 | 2>`). */
export const int = <T extends number = number>(range: Range = {}): Shape<T> => numeric<T>('integer', range);

export const bool: Shape<boolean> = {
  kind: 'boolean',
  read(v, param) {
    if (typeof v !== 'boolean') throw invalid(param, `${param} must be true or false; got ${show(v)}`);
    return v;
  },
};

export const str: Shape<string> = {
  kind: 'string',
  read(v, param) {
    if (typeof v !== 'string') throw invalid(param, `${param} must be a string; got ${show(v)}`);
    return v;
  },
};

/** One of a few strings. */
export function oneOf<const T extends string>(values: readonly T[]): Shape<T> {
  return {
    kind: 'enum',
    values,
    read(v, param) {
      if (typeof v !== 'string' || !values.includes(v as T)) throw invalid(param, `${param} must be one of ${values.map((a) => `"${a}"`).join(', ')}; got ${show(v)}`);
      return v as T;
    },
  };
}

/** Any JSON object (not a list). */
export const obj: Shape<Json> = {
  kind: 'object',
  read(v, param) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid(param, `${param} must be an object; got ${show(v)}`);
    return v as Json;
  },
};

/** A string or a list of strings, read as a list. */
export function strings(opts: { nonEmpty?: boolean } = {}): Shape<string[]> {
  return {
    kind: 'strings',
    read(v, param) {
      const list = typeof v === 'string' ? [v] : v;
      if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) throw invalid(param, `${param} must be a string or a list of strings; got ${show(v)}`);
      if (opts.nonEmpty && list.some((s) => s.length === 0)) throw invalid(param, `${param} must not contain empty strings`);
      return list as string[];
    },
  };
}

/** A list of integers ≥ `min`. */
export function intList(min = 0): Shape<number[]> {
  return {
    kind: 'integers',
    range: { min },
    read(v, param) {
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= min))
        throw invalid(param, `${param} must be a list of integers ≥ ${min}; got ${show(v)}`);
      return v as number[];
    },
  };
}

/** A shape of its own (messages, tools, a grammar): `read` checks it and throws a 400 naming the field. */
export const custom = <T>(read: (v: unknown, param: string) => T): Shape<T> => ({ kind: 'custom', read });

/** Extra checks after a shape's own (a regex that must compile, keys that must be ids). */
export function refine<T>(shape: Shape<T>, check: (v: T, param: string) => void): Shape<T> {
  return {
    ...shape,
    read(v, param) {
      const out = shape.read(v, param);
      check(out, param);
      return out;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Rows and tables

/** One row of a field table. */
export interface Field<T = unknown> {
  readonly shape: Shape<T>;
  /** One line: what the field does, its units, what 0 or -1 means. */
  readonly doc: string;
  /** Absent or null is a 400 `missing_required_parameter`. */
  readonly required?: true;
  /**
   * The value when the request leaves the field out (OpenAI's, or the extension's own), filled in
   * when the body is read, so the request type has the key. Frozen: requests share it.
   */
  readonly default?: T | Readonly<T>;
  /**
   * The model's generation_config.json may set the default, under the same name: such a field
   * stays absent when read, and `resolve` takes request → model → `default`.
   */
  readonly modelDefault?: true;
  /** Where `resolve` puts the value: `[group, key]`, e.g. `['sampling', 'topP']`. Absent: the endpoint reads the field itself. */
  readonly into?: readonly [string, string];
  /** What `into` holds, made from the resolved value (logit_bias's keys as ids). */
  readonly map?: (v: T) => unknown;
}

// `any`: a row's T is both read (`shape`) and written (`map`), so no one T covers every row.
export type Table = Record<string, Field<any>>;

/**
 * A row, its value type taken from the shape. The rest of the row keeps its literal types (a
 * `required: true`, an `into` tuple), which `FieldsOf` and `resolve` read.
 */
export function field<T, const R extends Omit<Field<T>, 'shape'>>(shape: Shape<T>, row: R): R & { readonly shape: Shape<T> } {
  return { ...row, shape, ...('default' in row ? { default: Object.freeze(row.default) } : {}) };
}

type ValueOf<F> = F extends { shape: Shape<infer T> } ? T : never;
type Flat<X> = { [K in keyof X]: X[K] };

/** A row whose key a read request always has: required, or filled with its default. */
type Always<F> = F extends { required: true } ? true : F extends { modelDefault: true } ? false : F extends { default: unknown } ? true : false;

/** The request a table declares: keys always present where `readFields` guarantees them, the others optional. */
export type FieldsOf<T extends Table> = Flat<
  { -readonly [K in keyof T as Always<T[K]> extends true ? K : never]: ValueOf<T[K]> } & {
    -readonly [K in keyof T as Always<T[K]> extends true ? never : K]?: ValueOf<T[K]>;
  }
>;

type Out<F> = F extends { map: (v: never) => infer U } ? U : ValueOf<F>;
type Target<F, G extends string> = F extends { into: readonly [G, infer N extends string] } ? N : never;

/** What `resolve` gives for group `G`: keys named by the rows' `into`, present where the row has a default. */
export type Resolved<T extends Table, G extends string> = Flat<
  { -readonly [K in keyof T as T[K] extends { default: unknown } ? Target<T[K], G> : never]: Out<T[K]> } & {
    -readonly [K in keyof T as T[K] extends { default: unknown } ? never : Target<T[K], G>]?: Out<T[K]>;
  }
>;

/** Reads one field of `body` with `shape`; undefined when absent or null (a 400 when `required`). Errors call it `name`. */
export function readField<T>(body: Json, key: string, shape: Shape<T>, required = false, name = key): T | undefined {
  const v = body[key];
  if (v === undefined || v === null) {
    if (required) throw invalid(name, `${name} is required`, 'missing_required_parameter');
    return undefined;
  }
  return shape.read(v, name);
}

/**
 * Reads every field of a table from `body`, in the table's order, filling in defaults (but for
 * `modelDefault` rows); fields the table lacks are ignored. `prefix` names the object a nested
 * table reads (`stream_options.`).
 */
export function readFields<T extends Table>(table: T, body: Json, prefix = ''): FieldsOf<T> {
  const out: Json = {};
  for (const [key, row] of Object.entries(table)) out[key] = readField(body, key, row.shape, row.required, prefix + key) ?? (row.modelDefault ? undefined : row.default);
  return out as FieldsOf<T>;
}

/**
 * The values of the rows whose `into` names `group`, under the keys it names. Each is the
 * request's value, else the model's (`modelDefault` rows, from generation_config.json), else the
 * row's default, then `map`ped; a key with none of them is left out.
 */
export function resolve<T extends Table, G extends string>(table: T, group: G, request: Partial<FieldsOf<T>>, model: object = {}): Resolved<T, G> {
  const given = (v: unknown) => v !== undefined && v !== null;
  const out: Json = {};
  for (const [key, row] of Object.entries(table)) {
    if (row.into?.[0] !== group) continue;
    const v = [(request as Json)[key], row.modelDefault ? (model as Json)[key] : undefined, row.default].find(given);
    if (v !== undefined) out[row.into[1]] = row.map ? row.map(v) : v;
  }
  return out as Resolved<T, G>;
}
