/**
 * A tool round trip as the `openai` SDK (and the AI SDK) sends it: the assistant's tool-call turn
 * comes back with `content: null`. Every template must take it (200, never a 4xx/5xx), and a
 * template that tests `content is none` (DeepSeek-R1) must see null, not '' (issue #12).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatTemplateConfig } from '../text/index';
import { appFor, clientFor, loadRig, SpyBackend, type Rig } from '../testing/api-rig';
import type { App } from './app';

const REPO = join(import.meta.dirname, '..', '..');
// The real DeepSeek-R1 template and Python's rendering of it (see src/text/testdata/render_golden.py).
const DEEPSEEK = join(REPO, '..', 'shared', 'templates', 'deepseek-r1-distill-qwen-32b.jinja');
const golden = JSON.parse(readFileSync(join(REPO, 'src', 'text', 'testdata', 'golden', 'deepseek-r1-distill-qwen-32b.json'), 'utf8'));
const cases = JSON.parse(readFileSync(join(REPO, 'src', 'text', 'testdata', 'chat-cases.json'), 'utf8'));
const roundTrip = cases.cases.find((c: { name: string }) => c.name === 'tool_round_trip_null_content');
const TOOLS = cases.tools as OpenAI.ChatCompletionTool[];
const MESSAGES = roundTrip.messages as OpenAI.ChatCompletionMessageParam[];

/** The tiny qwen3 model under another chat template (the weights do not matter for rendering). */
class WithTemplate extends SpyBackend {
  constructor(
    inner: SpyBackend['inner'],
    private readonly name: string,
    private readonly template: ChatTemplateConfig,
  ) {
    super(inner);
  }
  override get id() {
    return this.name;
  }
  override get chatTemplate() {
    return this.template;
  }
}

let rig: Rig;
let app: App;
let client: OpenAI;
const hasDeepSeek = existsSync(DEEPSEEK);

beforeAll(async () => {
  rig = await loadRig();
  const extra = hasDeepSeek ? [new WithTemplate(rig.qwen.backend, 'qwen3-tiny-deepseek-template', readFileSync(DEEPSEEK, 'utf8'))] : [];
  app = appFor([rig.qwen.backend, rig.llama.backend, ...extra]);
  client = clientFor(app);
});
afterAll(() => rig?.close());

describe('a tool round trip with content null', () => {
  // One token each: what is checked is that the request is taken (the SDK throws on a 4xx/5xx).
  it('is answered with 200 by qwen3-tiny (Qwen3 template: content passed as its probe decides)', async () => {
    const res = await client.chat.completions.create({ model: 'qwen3-tiny', messages: MESSAGES, tools: TOOLS, max_tokens: 1, temperature: 0 });
    expect(res.choices).toHaveLength(1);
    expect(res.usage!.prompt_tokens).toBeGreaterThan(0);
  });

  it('is streamed with 200 by llama-tiny (Llama 3 template)', async () => {
    const stream = await client.chat.completions.create({ model: 'llama-tiny', messages: MESSAGES, tools: TOOLS, max_tokens: 1, temperature: 0, stream: true });
    let chunks = 0;
    for await (const _ of stream) chunks++;
    expect(chunks).toBeGreaterThan(0);
  });

  it.skipIf(!hasDeepSeek)("reaches DeepSeek-R1's template as null: the prompt is Python's, with no empty assistant turn, and the reply 200", async () => {
    const model = 'qwen3-tiny-deepseek-template';
    const res = await app.handle(
      new Request('http://localhost/apply-template', { method: 'POST', body: JSON.stringify({ model, messages: MESSAGES, tools: TOOLS, add_generation_prompt: true }) }),
    );
    expect(res.status).toBe(200);
    const { prompt } = (await res.json()) as { prompt: string };
    expect(prompt).not.toContain('<｜Assistant｜><｜end▁of▁sentence｜>');
    // The fixture tokenizer has no bos_token; Python's rendering starts with DeepSeek's.
    const bos = cases.specialTokens['deepseek-r1-distill-qwen-32b.jinja'].bos_token as string;
    expect(prompt).toBe((golden.results.tool_round_trip_null_content.output as string).slice(bos.length));
    const reply = await client.chat.completions.create({ model, messages: MESSAGES, tools: TOOLS, max_tokens: 1, temperature: 0 });
    expect(reply.choices[0].finish_reason).toBeDefined();
  });
});
