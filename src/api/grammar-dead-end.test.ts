/**
 * Grammars that cannot end, through the app on the tiny qwen3 (issue #26 point 2): one whose
 * language is empty, or that can walk into a rule that never ends, is a 400 naming `ebnf` before
 * anything runs; a choice whose grammar allows no token at run time (a dead end the compile-time
 * check cannot see), or refuses a token its own mask allowed, ends with a 400 in OpenAI's error
 * shape (an error event once streaming), and the next request is served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Constraint } from '../structured/grammar';
import type { GenerateRequest, GeneratedToken, GenerationResult } from '../engine/types';
import { appFor, loadRig, SpyBackend, type Rig } from '../testing/api-rig';
import type { App } from './app';

/** How a wrapped grammar misbehaves once `after` tokens were accepted: it masks everything, or refuses every token. */
type Fault = { kind: 'dead' | 'refuse'; after: number } | null;

/** The qwen backend, whose choices' grammars fail as `fault` says (the sampling and model are real). */
class FaultyGrammar extends SpyBackend {
  fault: Fault = null;
  override generate(request: GenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    const c = request.constraint;
    const fault = this.fault;
    if (!c || !fault) return super.generate(request);
    let accepted = 0;
    const broken: Constraint = {
      words: c.words,
      param: c.param,
      mask: async (out) => {
        await c.mask(out);
        if (fault.kind === 'dead' && accepted >= fault.after) out.fill(0);
      },
      accept: (id) => (fault.kind === 'refuse' && accepted >= fault.after ? false : (accepted++, c.accept(id))),
      isTerminated: () => c.isTerminated(),
      dispose: () => c.dispose(),
    };
    return super.generate({ ...request, constraint: broken });
  }
}

let rig: Rig;
let app: App;
let backend: FaultyGrammar;

beforeAll(async () => {
  rig = await loadRig();
  backend = new FaultyGrammar(rig.qwen.backend);
  app = appFor([backend]);
});
afterAll(() => rig?.close());

const post = (body: object) =>
  app.handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }));
const chat = (extra: object) =>
  post({ model: 'qwen3-tiny', messages: [{ role: 'user', content: 'Answer.' }], max_tokens: 24, temperature: 0, chat_template_kwargs: { enable_thinking: false }, ...extra });

type ErrorBody = { error: { message: string; type: string; param: string | null; code: string | null } };

/** A request that must be served: a grammar that can end, followed to its end. */
async function expectServed(): Promise<void> {
  const r = await chat({ ebnf: 'root ::= "yes" | "no"' });
  expect(r.status).toBe(200);
  const body = (await r.json()) as { choices: { message: { content: string }; finish_reason: string }[] };
  expect(body.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: expect.stringMatching(/^(yes|no)$/) } });
}

describe('grammars that cannot end', () => {
  it.each([
    ['root ::= root', /derives no finite string: rule root never ends/],
    ['root ::= "a" x\nx ::= x "b"', /derives no finite string: rules root, x never end/],
    ['root ::= "a" | "b" tail\ntail ::= "c" tail', /could reach a point where it cannot end: rule tail never ends/],
    ['root ::= "a" [^\\x00-\\U0010FFFF]', /character class \[\^\\0-\\U0010ffff\] matches no character/],
  ])('answers 400 naming ebnf for %j, then serves the next request', async (ebnf, message) => {
    backend.fault = null;
    const r = await chat({ ebnf });
    expect(r.status).toBe(400);
    const body = (await r.json()) as ErrorBody;
    expect(body.error).toMatchObject({ type: 'invalid_request_error', param: 'ebnf', code: 'invalid_structured_output' });
    expect(body.error.message).toMatch(message);
    await expectServed();
  });

  it('ends a choice whose grammar allows no token with a 400 naming the field, then serves the next request', async () => {
    backend.fault = { kind: 'dead', after: 2 };
    const r = await chat({ ebnf: 'root ::= [a-z]+' });
    expect(r.status).toBe(400);
    const body = (await r.json()) as ErrorBody;
    expect(body.error).toMatchObject({ type: 'invalid_request_error', param: 'ebnf', code: 'grammar_dead_end' });
    expect(body.error.message).toMatch(/^ebnf: after 2 tokens of output the grammar allows no next token/);
    backend.fault = null;
    await expectServed();
  });

  it('ends a streamed choice whose grammar refuses a token its mask allowed with an error event, then serves the next request', async () => {
    backend.fault = { kind: 'refuse', after: 1 };
    const r = await chat({ response_format: { type: 'json_object' }, stream: true });
    expect(r.status).toBe(200);
    const events = (await r.text()).split('\n\n').filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]');
    const last = JSON.parse(events.at(-1)!.slice(6)) as ErrorBody;
    expect(last.error).toMatchObject({ type: 'invalid_request_error', param: 'response_format', code: 'grammar_refused' });
    expect(last.error.message).toMatch(/refused token \d+, which the grammar's mask allowed/);
    backend.fault = null;
    await expectServed();
  });
});
