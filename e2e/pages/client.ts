// Page B of the service worker e2e test: no engine, only plain fetch and the OpenAI client
// against this origin's /v1, which the service worker relays to the host page.
import OpenAI from 'openai';

const messages = [{ role: 'user' as const, content: 'Say hi' }];

async function plainFetch(): Promise<{ status: number; body: any }> {
  const r = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'default', messages, max_tokens: 3, temperature: 0 }),
  });
  return { status: r.status, body: await r.json() };
}

async function openaiStream(): Promise<{ text: string; finish: string | null }> {
  const client = new OpenAI({ baseURL: `${location.origin}/v1`, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0 });
  const stream = await client.chat.completions.create({ model: 'default', messages, max_tokens: 3, temperature: 0, stream: true });
  let text = '';
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

/**
 * A json_schema request (xgrammar then runs where the engine is: the host page's Worker), sent
 * whole with plain fetch and streamed with the OpenAI client, so both response paths are used.
 */
async function schemaAnswers(schema: Record<string, unknown>): Promise<{ status: number; whole: any; streamed: string }> {
  const body = { model: 'default', messages, max_tokens: 60, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'answer', schema } } };
  const r = await fetch('/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const whole = await r.json();
  const client = new OpenAI({ baseURL: `${location.origin}/v1`, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0 });
  const stream = await client.chat.completions.create({ ...(body as OpenAI.ChatCompletionCreateParamsNonStreaming), stream: true });
  let streamed = '';
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  return { status: r.status, whole, streamed };
}

Object.assign(window, { plainFetch, openaiStream, schemaAnswers });
const status = document.querySelector<HTMLParagraphElement>('#status')!;
status.dataset.state = 'ready';
