/**
 * A seeded generator of malformed API requests (issue #19's fuzz): valid chat and completion
 * bodies with one field broken (wrong types, out-of-range and non-finite numbers, huge and deep
 * values, bad grammars), bodies that are not JSON or not UTF-8, and wrong endpoints, methods and
 * content types. Every generated request is small enough to answer in milliseconds: generation is
 * capped with `max_tokens` on every body that could be valid.
 */
import { Rng } from './fixtures/rng';

export interface FuzzCase {
  /** What was broken, for the failure message. */
  what: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | Uint8Array | null;
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)]!;

/** Text that JSON.stringify cannot make: non-finite numbers, raw NaN, a 1e999. */
const RAW_NUMBERS = ['1e999', '-1e999', 'NaN', 'Infinity', '-0', '1e-999', '123456789012345678901234567890'];

function deep(n: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = i % 2 ? { a: v } : [v];
  return v;
}

/** A value of a random wrong kind (or a hostile one of the right kind). */
function badValue(rng: Rng): unknown {
  switch (rng.int(14)) {
    case 0:
      return null;
    case 1:
      return rng.int(2) === 0;
    case 2:
      return -1 - rng.int(1000);
    case 3:
      return 1e300;
    case 4:
      return 0.5;
    case 5:
      return 'x'.repeat(rng.int(3) === 0 ? 200_000 : 5);
    case 6:
      return [];
    case 7:
      return {};
    case 8:
      return [1, 'a', null, {}];
    case 9:
      return { type: 'nonsense' };
    case 10:
      return deep(20 + rng.int(200));
    case 11:
      return '\u0000\ud800\uffff';
    case 12:
      return 2 ** 53 + 1;
    default:
      return -0.000001;
  }
}

const CHAT_FIELDS = [
  'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'min_p', 'n', 'stop', 'seed',
  'presence_penalty', 'frequency_penalty', 'repetition_penalty', 'logit_bias', 'logprobs', 'top_logprobs', 'stream',
  'stream_options', 'response_format', 'tools', 'tool_choice', 'parallel_tool_calls', 'chat_template_kwargs', 'stop_regex',
  'regex', 'ebnf', 'json_schema', 'min_tokens', 'dry_multiplier', 'dry_sequence_breakers', 'mirostat', 'reasoning_effort',
  'user', 'metadata', 'best_of', 'ignore_eos', 'skip_special_tokens', 'truncate_sequence', 'continue_final_message',
];
const COMPLETION_FIELDS = ['model', 'prompt', 'max_tokens', 'temperature', 'echo', 'suffix', 'logprobs', 'n', 'best_of', 'stop', 'seed', 'stream', 'logit_bias', 'stop_regex'];

const BAD_MESSAGES: unknown[] = [
  [],
  [{ role: 'wizard', content: 'hi' }],
  [{ role: 'user' }],
  [{ role: 'user', content: 5 }],
  [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }],
  [{ role: 'user', content: [{ type: 'text' }] }],
  [{ role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{' } }] }],
  [{ role: 'tool', content: 'x' }],
  [{ role: 'user', content: 'hi', name: 7 }],
  'hello',
  [null],
];

const BAD_GRAMMARS: [string, unknown][] = [
  ['regex', '('],
  ['regex', '('.repeat(3000) + ')'.repeat(3000)],
  ['regex', '[z-a]'],
  ['ebnf', 'root ::= '],
  ['ebnf', 'root ::= (((("a"'],
  ['ebnf', `root ::= ${'('.repeat(3000)}"a"${')'.repeat(3000)}`],
  ['ebnf', 'nothing ::= "a"'],
  ['json_schema', { type: 'nonsense' }],
  ['json_schema', { type: 'object', properties: { a: { type: ['string', 7] } } }],
  ['json_schema', { type: 'array', items: 'x' }],
  ['json_schema', { anyOf: 'x' }],
  ['json_schema', { $ref: '#/nowhere' }],
  ['json_schema', { type: 'string', pattern: '(' }],
  ['response_format', { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'nonsense' } } }],
  ['response_format', { type: 'json_schema', json_schema: { name: 'x', schema: deep(60) } }],
  ['response_format', { type: 'json_schema' }],
  ['response_format', { type: 'grammar', grammar: 7 }],
  ['response_format', { type: 'xml' }],
];

const baseChat = () => ({ model: 'qwen3-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, temperature: 0 });
const baseCompletion = () => ({ model: 'qwen3-tiny', prompt: 'hi', max_tokens: 2, temperature: 0 });
const JSON_HEADERS = { 'Content-Type': 'application/json' };

/** One malformed request, drawn from `rng`. */
export function fuzzCase(rng: Rng): FuzzCase {
  const chat = rng.int(3) !== 0;
  const path = chat ? '/v1/chat/completions' : '/v1/completions';
  const post = (what: string, body: string | Uint8Array, headers: Record<string, string> = JSON_HEADERS): FuzzCase => ({ what, method: 'POST', path, headers, body });
  const kind = rng.int(10);
  if (kind <= 3) {
    // One field of a valid body broken.
    const body: Record<string, unknown> = chat ? baseChat() : baseCompletion();
    const field = pick(rng, chat ? CHAT_FIELDS : COMPLETION_FIELDS);
    body[field] = field === 'messages' && rng.int(2) === 0 ? pick(rng, BAD_MESSAGES) : badValue(rng);
    // Keep generation short: a field that could make a long answer valid is pinned again.
    if (field !== 'max_tokens' && field !== 'max_completion_tokens') body.max_tokens = 2;
    return post(`${field} = ${JSON.stringify(body[field])?.slice(0, 60)}`, JSON.stringify(body));
  }
  if (kind === 4) {
    // A raw number JSON.stringify cannot write.
    const field = pick(rng, ['temperature', 'top_p', 'max_tokens', 'seed', 'n', 'presence_penalty', 'min_p']);
    const raw = pick(rng, RAW_NUMBERS);
    const text = JSON.stringify(chat ? baseChat() : baseCompletion()).replace(/}$/, `,"${field}":${raw}}`);
    return post(`${field} = ${raw}`, text);
  }
  if (kind === 5) {
    const [field, value] = pick(rng, BAD_GRAMMARS);
    const body = { ...baseChat(), [field]: value, max_tokens: 4 };
    return { ...post(`${field} = ${JSON.stringify(value).slice(0, 60)}`, JSON.stringify(body)), path: '/v1/chat/completions' };
  }
  if (kind === 6) {
    // Bodies that are not a JSON object.
    const bodies: [string, string | Uint8Array][] = [
      ['empty', ''],
      ['truncated', '{"model":"qwen3-tiny","messages":[{"role":'],
      ['array', '[1,2,3]'],
      ['string', '"hi"'],
      ['deep', '['.repeat(50_000) + ']'.repeat(50_000)],
      ['invalid UTF-8', new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc1, 0xa7, 0xff, 0x22, 0x7d])],
      ['trailing garbage', JSON.stringify(baseChat()) + 'xyz'],
      ['duplicate keys', '{"model":"qwen3-tiny","model":7,"messages":[],"max_tokens":2}'],
      ['big string', JSON.stringify({ ...baseCompletion(), prompt: 'word '.repeat(400_000) })],
    ];
    const [what, body] = pick(rng, bodies);
    return post(what, body);
  }
  if (kind === 7) {
    const headers = pick<Record<string, string>>(rng, [{ 'Content-Type': 'text/plain' }, { 'Content-Type': 'application/x-www-form-urlencoded' }, {}]);
    return post(`content type ${JSON.stringify(headers)}`, JSON.stringify(chat ? baseChat() : baseCompletion()), headers);
  }
  if (kind === 8) {
    const method = pick(rng, ['GET', 'PUT', 'DELETE', 'PATCH', 'HEAD']);
    return { what: `${method} ${path}`, method, path, headers: {}, body: method === 'GET' || method === 'HEAD' ? null : '{}' };
  }
  const bad = pick(rng, ['/v1/nothing', '/v1/models/%E0%A4%A', '/v1/models/' + 'x'.repeat(3000), '/v1/chat', '/', '/v1/models/%00', '/v1//completions/']);
  return { what: `path ${bad.slice(0, 40)}`, method: pick(rng, ['GET', 'POST']), path: bad, headers: JSON_HEADERS, body: null };
}

export function fuzzCases(seed: number, count: number): FuzzCase[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => fuzzCase(rng));
}
