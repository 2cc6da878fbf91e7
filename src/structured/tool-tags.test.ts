/**
 * Tool-call grammars on the three fixture tokenizers (qwen3: hermes, llama: llama3, mistral:
 * mistral), token by token: what each format's grammar accepts and refuses, that what it accepts
 * parses back into calls (src/text/tool-calls.ts), and how Mistral's `[TOOL_CALLS]` special
 * token fits in.
 */
import Ajv2020 from 'ajv/dist/2020';
import { beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ensureFixture } from '../testing/fixtures/shared';
import { loadTextModel } from '../text/from-model';
import type { TextTokenizer } from '../text/tokenizer';
import { ToolCallParser, type ToolCallFormat } from '../text/tool-calls';
import { compileConstraint, type Constraint, type ConstraintSpec, type ForcedTool } from './grammar';

const tok = {} as Record<ToolCallFormat, TextTokenizer>;

beforeAll(async () => {
  const [q, l, m] = await Promise.all([
    ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] }),
    ensureFixture({ arch: 'llama', preset: 'tiny' }, { hf: [], gguf: ['F32'] }),
    ensureFixture({ arch: 'mistral', preset: 'tiny' }, { hf: ['F32'], gguf: [] }),
  ]);
  tok.hermes = loadTextModel(await openModel(q.hf.F32!)).tokenizer;
  tok.llama3 = loadTextModel(await openModel(l.gguf.F32!)).tokenizer;
  tok.mistral = loadTextModel(await openModel(m.hf.F32!)).tokenizer;
  // Granite's real tokenizer is byte-level BPE as Qwen's; its <|tool_call|> is plain text here.
  tok.granite = tok.hermes;
  // Phi-4-mini's too (o200k); its <|tool_call|> and <|/tool_call|> are plain text here.
  tok.phi4 = tok.hermes;
});

const WEATHER = { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'] };
const TIME = { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] };
const TOOLS: ForcedTool[] = [
  { name: 'get_weather', parameters: WEATHER },
  { name: 'get_time', parameters: TIME },
];
const ajv = new Ajv2020({ strict: false });

/**
 * Calls written as each template writes them (arguments compact, as our JSON grammar writes
 * them): two, except in llama3, whose template holds one call per message.
 */
const CALLS: Record<ToolCallFormat, string> = {
  hermes:
    '<tool_call>\n{"name": "get_weather", "arguments": {"city":"Oslo","days":3}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "get_time", "arguments": {"tz":"UTC"}}\n</tool_call>',
  llama3: '{"name": "get_weather", "parameters": {"city":"Oslo","days":3}}',
  mistral: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city":"Oslo","days":3}}, {"name": "get_time", "arguments": {"tz":"UTC"}}]',
  granite: '<|tool_call|>[{"name": "get_weather", "arguments": {"city":"Oslo","days":3}}, {"name": "get_time", "arguments": {"tz":"UTC"}}]',
  phi4: '<|tool_call|>[{"name": "get_weather", "arguments": {"city":"Oslo","days":3}}, {"name": "get_time", "arguments": {"tz":"UTC"}}]<|/tool_call|>',
};
/** How each list format's list ends (the others have no list). */
const LIST_END: Partial<Record<ToolCallFormat, string>> = { mistral: ']', granite: ']', phi4: ']<|/tool_call|>' };
const FORMATS = Object.keys(CALLS) as ToolCallFormat[];

async function start(format: ToolCallFormat, spec: Partial<ConstraintSpec> & { kind: 'tool_calls' | 'tool_calls_auto' }): Promise<Constraint> {
  const full = { format, tools: TOOLS, multiple: true, ...spec } as ConstraintSpec;
  return (await compileConstraint(tok[format], full)).start();
}

/** Feeds `text`; the token the grammar refused (as text), or null when it took all of it. */
async function feed(format: ToolCallFormat, c: Constraint, text: string): Promise<string | null> {
  const t = tok[format];
  for (const id of t.encode(text, { addSpecialTokens: false })) if (!c.accept(id)) return t.decode([id], { skipSpecialTokens: false });
  return null;
}

/** The ids the grammar allows next. */
async function allowed(c: Constraint): Promise<number[]> {
  const mask = new Uint32Array(c.words);
  await c.mask(mask);
  const out: number[] = [];
  for (let id = 0; id < mask.length * 32; id++) if ((mask[id >>> 5]! >>> (id & 31)) & 1) out.push(id);
  return out;
}

/** Calls the format's parser finds in `text`, each checked against its tool's schema. */
function parsedCalls(format: ToolCallFormat, text: string): Array<{ name: string; args: unknown }> {
  const p = new ToolCallParser({ format, newId: () => 'abcdefghi' });
  const events = [...p.push(text), ...p.finish()];
  const calls: Array<{ name: string; arguments: string }> = [];
  for (const e of events) {
    if (e.type !== 'tool_call') continue;
    const c = (calls[e.delta.index] ??= { name: '', arguments: '' });
    c.name += e.delta.function.name ?? '';
    c.arguments += e.delta.function.arguments ?? '';
  }
  return calls.map((c) => {
    const args = JSON.parse(c.arguments);
    const tool = TOOLS.find((t) => t.name === c.name);
    expect(tool, c.name).toBeDefined();
    expect(ajv.validate(tool!.parameters as object, args), JSON.stringify(ajv.errors)).toBe(true);
    return { name: c.name, args };
  });
}

describe.each(FORMATS)('forced tool calls in the %s format', (format) => {
  it('takes calls written as the template writes them, then only end of turn; the parser reads them back', async () => {
    const c = await start(format, { kind: 'tool_calls' });
    expect(await feed(format, c, CALLS[format])).toBeNull();
    const next = await allowed(c);
    // After the last call: a separator for another (hermes), or end of turn (mistral: the list is
    // closed; llama3: one call per reply).
    const eos = next.filter((id) => tok[format].eosIds.includes(id));
    expect(eos.length).toBeGreaterThan(0);
    if (format !== 'hermes') expect(next).toEqual(eos);
    expect(c.accept(eos[0]!)).toBe(true);
    expect(c.isTerminated()).toBe(true);
    expect(parsedCalls(format, CALLS[format]).map((x) => x.name)).toEqual(format === 'llama3' ? ['get_weather'] : ['get_weather', 'get_time']);
    c.dispose();
  });

  it('refuses a tool that is not offered and arguments outside the schema', async () => {
    const open = { hermes: '<tool_call>\n', llama3: '', mistral: '[TOOL_CALLS][', granite: '<|tool_call|>[', phi4: '<|tool_call|>[' }[format];
    const args = format === 'llama3' ? 'parameters' : 'arguments';
    const unknown = await start(format, { kind: 'tool_calls' });
    expect(await feed(format, unknown, `${open}{"name": "get_stock`)).not.toBeNull();
    const badArgs = await start(format, { kind: 'tool_calls' });
    expect(await feed(format, badArgs, `${open}{"name": "get_weather", "${args}": {"city":"Rome"`)).not.toBeNull();
    unknown.dispose();
    badArgs.dispose();
  });

  it('allows exactly one call when multiple is off (a named tool, or parallel_tool_calls false)', async () => {
    const c = await start(format, { kind: 'tool_calls', tools: [TOOLS[1]!], multiple: false });
    const one = { hermes: '<tool_call>\n{"name": "get_time", "arguments": {"tz":"CET"}}\n</tool_call>', llama3: '{"name": "get_time", "parameters": {"tz":"CET"}}', mistral: '[TOOL_CALLS][{"name": "get_time", "arguments": {"tz":"CET"}}', granite: '<|tool_call|>[{"name": "get_time", "arguments": {"tz":"CET"}}', phi4: '<|tool_call|>[{"name": "get_time", "arguments": {"tz":"CET"}}' }[format];
    expect(await feed(format, c, one)).toBeNull();
    const next = await allowed(c);
    // A list: only the list's end (Mistral: `]`, its piece or its byte-fallback token; Phi-4-mini: `]<|/tool_call|>`, begun).
    const end = LIST_END[format];
    if (end) {
      const texts = new Set(next.map((id) => tok[format].decode([id], { skipSpecialTokens: false })));
      expect(texts.has(']')).toBe(true);
      expect([...texts].every((t) => t.length > 0 && end.startsWith(t))).toBe(true);
    } else expect(next.every((id) => tok[format].eosIds.includes(id))).toBe(true);
    c.dispose();
  });
});

describe('Mistral [TOOL_CALLS]', () => {
  it('is one special token, which xgrammar treats as its text, so a forced reply may begin with it', async () => {
    const id = tok.mistral.tokenToId('[TOOL_CALLS]')!;
    expect(tok.mistral.specialIds.has(id)).toBe(true);
    expect(tok.mistral.encode('[TOOL_CALLS][', { addSpecialTokens: false })[0]).toBe(id);
    const c = await start('mistral', { kind: 'tool_calls' });
    const first = await allowed(c);
    expect(first).toContain(id);
    // Nothing else but spellings of the same text: what the parser reads is the same either way.
    for (const other of first) expect('[TOOL_CALLS]['.startsWith(tok.mistral.decode([other], { skipSpecialTokens: false }))).toBe(true);
    expect(c.accept(id)).toBe(true);
    c.dispose();
  });
});

describe('strict tools under tool_choice auto', () => {
  it('mistral: free text, then a [TOOL_CALLS] list that must follow the tools, then free text again', async () => {
    const text = `Sure. ${CALLS.mistral} Done. [TOOL_CALLS][{"name": "get_time", "arguments": {"tz":"CET"}}]`;
    const c = await start('mistral', { kind: 'tool_calls_auto' });
    expect(await feed('mistral', c, text)).toBeNull();
    expect(parsedCalls('mistral', text).map((x) => x.name)).toEqual(['get_weather', 'get_time', 'get_time']);
    const bad = await start('mistral', { kind: 'tool_calls_auto' });
    expect(await feed('mistral', bad, 'Sure. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city":"Rome"')).not.toBeNull();
    c.dispose();
    bad.dispose();
  });

  it('hermes: calls anywhere between free text, each following its tool', async () => {
    const text = `Let me check. ${CALLS.hermes} That is all.`;
    const c = await start('hermes', { kind: 'tool_calls_auto' });
    expect(await feed('hermes', c, text)).toBeNull();
    expect(parsedCalls('hermes', text)).toHaveLength(2);
    const bad = await start('hermes', { kind: 'tool_calls_auto' });
    expect(await feed('hermes', bad, 'Hm <tool_call>\n{"name": "get_stock"')).not.toBeNull();
    c.dispose();
    bad.dispose();
  });

  it('llama3: free text, or one call that must be valid and ends the reply', async () => {
    const calls = await start('llama3', { kind: 'tool_calls_auto' });
    expect(await feed('llama3', calls, CALLS.llama3)).toBeNull();
    expect(parsedCalls('llama3', CALLS.llama3)).toHaveLength(1);

    const tagged = '<|python_tag|>{"name": "get_time", "parameters": {"tz":"UTC"}}';
    const afterTag = await start('llama3', { kind: 'tool_calls_auto' });
    expect(await feed('llama3', afterTag, tagged)).toBeNull();
    expect((await allowed(afterTag)).every((id) => tok.llama3.eosIds.includes(id))).toBe(true);
    expect(parsedCalls('llama3', tagged)).toEqual([{ name: 'get_time', args: { tz: 'UTC' } }]);

    const prose = await start('llama3', { kind: 'tool_calls_auto' });
    expect(await feed('llama3', prose, 'Plain words, no call.')).toBeNull();
    // Text after a call would make the parser read the whole reply as content: refused.
    const trailing = await start('llama3', { kind: 'tool_calls_auto' });
    expect(await feed('llama3', trailing, '{"name": "get_time", "parameters": {"tz":"UTC"}} and more')).not.toBeNull();
    const wrong = await start('llama3', { kind: 'tool_calls_auto' });
    expect(await feed('llama3', wrong, 'Hm {"name": "get_time", "parameters": {"tz":"PST"')).not.toBeNull();
    for (const c of [calls, afterTag, prose, trailing, wrong]) c.dispose();
  });
});
