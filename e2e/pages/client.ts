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

/** A streamed chat completion as this page saw it; times on a clock all pages of the browser share. */
export interface TimedStream {
  text: string;
  finish: string | null;
  completionTokens: number | null;
  /**
   * When each chunk with text arrived: not the role-only first chunk, sent before any token, nor a
   * token whose text is held back (part of a UTF-8 character), hence `completionTokens` for counts.
   */
  tokenTimes: number[];
}

let timed: { firstToken: Promise<void>; end: Promise<TimedStream> } | null = null;

/**
 * Starts a streamed chat request and returns at once, so that the test can start another page's
 * while this one streams: `timedFirstToken` resolves at its first text, `timedEnd` with all of it.
 */
function startTimedStream(request: Record<string, unknown>): void {
  let tokenSeen!: () => void;
  const seen = new Promise<void>((ok) => (tokenSeen = ok));
  const end = (async (): Promise<TimedStream> => {
    const client = new OpenAI({ baseURL: `${location.origin}/v1`, apiKey: 'unused', dangerouslyAllowBrowser: true, maxRetries: 0 });
    const body = { model: 'default', ...request, stream: true, stream_options: { include_usage: true } };
    const stream = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
    const out: TimedStream = { text: '', finish: null, completionTokens: null, tokenTimes: [] };
    for await (const chunk of stream) {
      const now = performance.timeOrigin + performance.now();
      const content = chunk.choices[0]?.delta?.content ?? '';
      if (content) {
        out.tokenTimes.push(now);
        tokenSeen();
      }
      out.text += content;
      out.finish = chunk.choices[0]?.finish_reason ?? out.finish;
      out.completionTokens = chunk.usage?.completion_tokens ?? out.completionTokens;
    }
    return out;
  })();
  // A stream that fails or ends without text settles firstToken too, rather than hang the test.
  timed = { firstToken: Promise.race([seen, end.then(() => undefined)]), end };
}
const timedFirstToken = () => timed!.firstToken;
const timedEnd = () => timed!.end;

Object.assign(window, { plainFetch, openaiStream, schemaAnswers, startTimedStream, timedFirstToken, timedEnd });
const status = document.querySelector<HTMLParagraphElement>('#status')!;
status.dataset.state = 'ready';
