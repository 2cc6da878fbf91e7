/**
 * LoRA adapters through `webgpu-llm serve --lora NAME=PATH` and the real OpenAI client over HTTP:
 * both request forms (`model: "<id>:<name>"`, `lora_path`), `/v1/models` listing adapters with
 * their parent, `/load_lora_adapter` and `/unload_lora_adapter` at run time, and the errors. Greedy
 * replies equal the float64 merged reference's tokens.
 */
import { relative } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveCommand } from '../cli/serve';
import { openModel } from '../model/open';
import { loadTextModel } from '../text/from-model';
import { greedy, ReferenceModel } from '../reference/forward';
import { ensureLoraFixture } from '../testing/fixtures/lora-write';
import { baseWeights, mergedReference } from '../testing/lora-reference';
import { serveDirectory, type StaticServer } from '../testing/server';
import type { Server } from './node-server';

let server: Server;
let files: StaticServer;
let client: OpenAI;
let lora: Awaited<ReturnType<typeof ensureLoraFixture>>['lora'];
let at: (p: string) => string;
/** The merged reference's greedy ids, decoded as the API decodes them. */
const want = new Map<string, string>();
const PROMPT = Array.from({ length: 12 }, (_, i) => (i * 7919 + 29) % 300);

beforeAll(async () => {
  const fx = await ensureLoraFixture({ arch: 'llama', preset: 'tiny' });
  lora = fx.lora;
  files = await serveDirectory(fx.model.root);
  at = (p) => `${files.url}/${relative(fx.model.root, p).split('\\').join('/')}`;
  const lines: string[] = [];
  server = (await serveCommand(['--model', fx.model.gguf.Q8_0!, '--port', '0', '--id', 'tiny', '--precision', 'f32', '--no-cache', '--lora', `qv=${lora.peft['qv-r4']!}`], (l) => lines.push(l)))!;
  expect(lines).toContain(`LoRA adapter "tiny:qv" (rank 4, q/v) from ${lora.peft['qv-r4']!}`);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0 });
  // The reference: the base and each adapter merged in float64.
  const opened = await openModel(fx.model.gguf.Q8_0!);
  const weights = await baseWeights(opened);
  const { tokenizer } = loadTextModel(opened);
  // The API's streaming detokenizer may hold back a lone invalid byte that a whole decode shows as
  // U+FFFD: compare without those.
  const decode = (ids: number[]) => clean(tokenizer.decode(ids, { skipSpecialTokens: false }));
  want.set('', decode(greedy(ReferenceModel.fromWeights(opened.config, weights, opened.ropeFreqFactors), PROMPT, 8)));
  for (const [name, spec] of [['qv', 'qv-r4'], ['all', 'all-r8-rslora']] as const) want.set(name, decode(greedy(await mergedReference(opened, lora.peft[spec]!, weights), PROMPT, 8)));
});

afterAll(async () => {
  await server?.close();
  await files?.close();
});

/** A greedy completion's text over the prompt ids (special tokens kept: the text is the ids decoded). */
async function completionText(body: Record<string, unknown>): Promise<string> {
  const r = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true, skip_special_tokens: false, ...body }) });
  const json = (await r.json()) as { choices?: Array<{ text: string }>; error?: unknown };
  if (!r.ok) throw Object.assign(new Error(JSON.stringify(json)), { status: r.status, body: json });
  return clean(json.choices![0]!.text);
}

const clean = (s: string) => s.replaceAll('\ufffd', '');

describe('LoRA adapters through serve', () => {
  it('runs an adapter chosen by model "<id>:<name>", "default:<name>" or lora_path, the model form winning', async () => {
    const viaModel = await client.completions.create({ model: 'tiny:qv', prompt: PROMPT, max_tokens: 8, temperature: 0 });
    expect(viaModel.model).toBe('tiny:qv');
    const text = viaModel.choices[0]!.text;
    const viaDefault = await client.completions.create({ model: 'default:qv', prompt: PROMPT, max_tokens: 8, temperature: 0 });
    const viaPath = await client.completions.create({ model: 'tiny', prompt: PROMPT, max_tokens: 8, temperature: 0, lora_path: 'qv' } as never);
    const base = await client.completions.create({ model: 'tiny', prompt: PROMPT, max_tokens: 8, temperature: 0 });
    expect(viaDefault.choices[0]!.text).toBe(text);
    expect(viaPath.choices[0]!.text).toBe(text);
    expect(base.choices[0]!.text).not.toBe(text);
    // The model form wins over an unknown lora_path.
    const both = await client.completions.create({ model: 'tiny:qv', prompt: PROMPT, max_tokens: 8, temperature: 0, lora_path: 'nope' } as never);
    expect(both.choices[0]!.text).toBe(text);
    // The tokens are the merged reference's.
    expect(await completionText({ model: 'tiny:qv' })).toBe(want.get('qv'));
    expect(await completionText({ model: 'tiny' })).toBe(want.get(''));
  });

  it('lists each adapter as a model with its parent', async () => {
    const list = await client.models.list();
    const ids = list.data.map((m) => m.id);
    expect(ids).toEqual(['tiny', 'tiny:qv']);
    const card = list.data[1] as unknown as Record<string, unknown>;
    expect(card).toMatchObject({ parent: 'tiny', root: lora.peft['qv-r4'], lora: { name: 'qv', rank: 4, targets: ['q', 'v'] } });
    expect(((await client.models.retrieve('tiny:qv')) as unknown as { parent: string }).parent).toBe('tiny');
  });

  it('loads and unloads adapters at run time, and a chat request picks one too', async () => {
    const load = await fetch(`${server.url}/load_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: 'all', lora_path: at(lora.gguf['all-r8-rslora']!) }) });
    expect(load.status).toBe(200);
    expect(await load.json()).toMatchObject({ success: true, lora_name: 'all', loaded_adapters: { qv: lora.peft['qv-r4'], all: at(lora.gguf['all-r8-rslora']!) } });
    expect(await completionText({ model: 'tiny:all' })).toBe(want.get('all'));
    const chat = await client.chat.completions.create({ model: 'tiny:all', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    const chatBase = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
    expect(chat.choices[0]!.message.content).not.toBe(chatBase.choices[0]!.message.content);
    const unload = await fetch(`${server.url}/v1/unload_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: 'all' }) });
    expect(unload.status).toBe(200);
    expect(await unload.json()).toMatchObject({ success: true, loaded_adapters: { qv: lora.peft['qv-r4'] } });
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['tiny', 'tiny:qv']);
  });

  it('answers an unknown adapter with 404 naming it, in either form, through the OpenAI client', async () => {
    const err = await client.completions.create({ model: 'tiny:gone', prompt: 'x', max_tokens: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).message).toContain('"gone" is not loaded (loaded: "qv")');
    const viaPath = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1, lora_path: 'gone' } as never).catch((e: unknown) => e);
    expect(viaPath).toBeInstanceOf(OpenAI.NotFoundError);
    expect((viaPath as { param?: string }).param).toBe('lora_path');
    const unload = await fetch(`${server.url}/unload_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: 'gone' }) });
    expect(unload.status).toBe(404);
  });

  it('refuses bad loads with a 400 naming the field and the file: missing, wrong base, taken name', async () => {
    const post = (body: object) => fetch(`${server.url}/load_lora_adapter`, { method: 'POST', body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, error: ((await r.json()) as { error: { param: string; message: string; code: string } }).error }));
    expect(await post({ lora_name: 'x' })).toMatchObject({ status: 400, error: { param: 'lora_path' } });
    expect(await post({ lora_name: 'a:b', lora_path: 'p' })).toMatchObject({ status: 400, error: { param: 'lora_name' } });
    const missing = await post({ lora_name: 'x', lora_path: `${files.url}/lora/none.gguf` });
    expect(missing).toMatchObject({ status: 400, error: { param: 'lora_path', message: expect.stringContaining('none.gguf') } });
    const qwen = await ensureLoraFixture({ arch: 'qwen3', preset: 'tiny' });
    const wrong = await post({ lora_name: 'x', lora_path: qwen.lora.gguf['qv-r4']! });
    expect(wrong).toMatchObject({ status: 400, error: { param: 'lora_path', code: 'wrong_base', message: expect.stringContaining('"qwen3" model, but the base is "llama"') } });
    expect(await post({ lora_name: 'qv', lora_path: lora.peft['qv-r4']! })).toMatchObject({ status: 409, error: { code: 'lora_exists' } });
  });
});
