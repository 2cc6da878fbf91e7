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

Object.assign(window, { plainFetch, openaiStream });
const status = document.querySelector<HTMLParagraphElement>('#status')!;
status.dataset.state = 'ready';
