/**
 * The API as one function, `handle(Request) => Promise<Response>`: the same in a page's fetch
 * shim, a service worker and Node. Routes match on the path's end, so any prefix works
 * (`/v1/chat/completions`, `/api/v1/chat/completions`). Nothing is ever thrown out of `handle`.
 */
import type { Backend } from '../engine/types';
import { prepareChat } from './chat';
import { prepareCompletion } from './completions';
import { ApiError, invalid, toApiError } from './errors';
import { CHAT_FIELDS, parseChatRequest } from './protocol/chat';
import { asBody, bool, readField, str, type Json } from './protocol/field';
import { parseCompletionRequest } from './protocol/completions';
import { checkJsonDepth, DEFAULT_LIMITS, readBodyText, type RequestLimits } from './limits';
import { createResponses, responsesSse } from './responses/responses';
import { sseStream } from './sse';
import { renderChat } from './template';
import { encodeLong } from '../text/tokenizer';
import { nowSeconds } from './choices';
import { adapterCards, loadAdapter, splitAdapter, unloadAdapter, withAdapter } from './lora';
import { createEmbeddings, refuseEmbeddingModel } from './embeddings';
import { parseEmbeddingRequest } from './protocol/embeddings';

export interface AppOptions {
  /** The loaded models (a function when they change over time). */
  backends: Backend[] | (() => Backend[]);
  /** True while a model loads: `/health` and generation answer 503. */
  loading?: () => boolean;
  /** When set, every request but `/health` and CORS preflights needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Request limits (src/api/limits.ts); each defaults to DEFAULT_LIMITS'. */
  limits?: Partial<RequestLimits>;
}

export interface App {
  handle(request: Request): Promise<Response>;
}

const CORS: Record<string, string> = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Authorization, Content-Type, OpenAI-Organization, OpenAI-Project, X-Stainless-*',
  'Access-Control-Max-Age': '86400',
};

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...CORS, 'Content-Type': 'application/json' } });
}

function errorResponse(e: unknown): Response {
  const err = toApiError(e);
  return json(err.toJSON(), err.status);
}

const notFound = (what: string) => new ApiError(404, what, 'invalid_request_error', null, 'not_found');

/**
 * One route: a method and the path it ends with (any prefix works), or a pattern whose first
 * group is the route's argument. `open` routes need no API key.
 */
interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  path: string | RegExp;
  open?: boolean;
  run(request: Request, arg: string | undefined): Promise<Response> | Response;
}

/** The argument a path gives a route, or null when the route's path does not match. */
function matchPath(route: Route, path: string): { arg?: string } | null {
  if (typeof route.path === 'string') return path.endsWith(route.path) || path === route.path.slice(1) ? {} : null;
  const m = route.path.exec(path);
  if (!m) return null;
  try {
    return { arg: m[1] === undefined ? undefined : decodeURIComponent(m[1]) };
  } catch {
    throw invalid(null, `the path ${JSON.stringify(path)} is not valid percent-encoding`, 'invalid_path');
  }
}

export function createApp(options: AppOptions): App {
  const backends = () => (typeof options.backends === 'function' ? options.backends() : options.backends);
  const loading = () => options.loading?.() ?? false;
  const limits = { ...DEFAULT_LIMITS, ...options.limits };

  /**
   * `model` to a backend: its id, `"default"` for the only one; `"<id>:<adapter>"` (or
   * `"default:<adapter>"`) runs it with that loaded LoRA adapter, as does `lora_path` (./lora.ts);
   * the `model` form wins when both are given.
   */
  function resolve(model: string | undefined, required: boolean, loraPath?: string): Backend {
    const all = backends();
    if (all.length === 0) throw new ApiError(503, 'no model is loaded yet; retry when GET /health answers 200', 'service_unavailable', null, 'model_not_loaded');
    const base = (): Backend => {
      if (model === undefined) {
        if (required) throw invalid('model', 'model is required', 'missing_required_parameter');
        return all[0];
      }
      const exact = all.find((b) => b.id === model);
      if (exact) return exact;
      if (model === 'default' && all.length === 1) return all[0];
      throw new ApiError(404, `The model \`${model}\` does not exist. Loaded: ${all.map((b) => b.id).join(', ')}`, 'invalid_request_error', 'model', 'model_not_found');
    };
    const named = model !== undefined && !all.some((b) => b.id === model) ? splitAdapter(model, all) : null;
    if (named) return withAdapter(named.backend, named.adapter, 'model');
    const backend = base();
    return loraPath !== undefined ? withAdapter(backend, loraPath, 'lora_path') : backend;
  }

  /** `resolve` for the generating routes: an embedding model is refused there. */
  function generator(model: string | undefined, loraPath?: string): Backend {
    const b = resolve(model, true, loraPath);
    refuseEmbeddingModel(b);
    return b;
  }

  /** The body as a JSON object, within the size and nesting limits. */
  async function body(request: Request): Promise<Json> {
    const text = await readBodyText(request, limits.maxBodyBytes);
    checkJsonDepth(text, limits.maxJsonDepth);
    try {
      return asBody(JSON.parse(text));
    } catch (e) {
      if (e instanceof ApiError) throw e;
      throw invalid(null, `the request body is not valid JSON: ${(e as Error).message}`, 'invalid_json');
    }
  }

  function ensureReady(): void {
    if (loading()) throw new ApiError(503, 'the model is still loading; retry when GET /health answers 200', 'service_unavailable', null, 'model_loading');
  }

  // OpenAI's Responses API runs as a streamed chat completion (src/api/responses/).
  const responses = createResponses({
    async runChat(chat, signal) {
      const req = parseChatRequest(chat);
      ensureReady();
      const run = await prepareChat(req, generator(req.model, req.lora_path), signal, limits);
      return { req, chunks: run.chunks };
    },
  });

  async function responseReply(run: Awaited<ReturnType<typeof responses.create>>): Promise<Response> {
    if (run.stream)
      return new Response(responsesSse(run.events), {
        headers: { ...CORS, 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive' },
      });
    return json(await run.fold());
  }

  /** Every route, in match order (`/chat/completions` before `/completions`). */
  const routes: Route[] = [
    {
      method: 'POST',
      path: '/chat/completions',
      async run(request) {
        const req = parseChatRequest(await body(request));
        ensureReady();
        return reply(await prepareChat(req, generator(req.model, req.lora_path), request.signal, limits));
      },
    },
    {
      method: 'POST',
      path: '/completions',
      async run(request) {
        const req = parseCompletionRequest(await body(request));
        ensureReady();
        return reply(await prepareCompletion(req, generator(req.model, req.lora_path), request.signal, limits));
      },
    },
    { method: 'POST', path: '/embeddings', run: async (request) => embeddings(parseEmbeddingRequest(await body(request)), request.signal) },
    { method: 'GET', path: '/models', run: () => json({ object: 'list', data: allCards() }) },
    {
      method: 'GET',
      path: /\/models\/([^/]+)$/,
      run(_request, id) {
        const card = allCards().find((x) => x.id === id);
        if (!card) throw new ApiError(404, `The model \`${id}\` does not exist`, 'invalid_request_error', 'model', 'model_not_found');
        return json(card);
      },
    },
    // LoRA adapters at run time, as SGLang and vLLM name these routes (./lora.ts).
    { method: 'POST', path: '/load_lora_adapter', run: async (request) => (ensureReady(), json(await loadAdapter(await body(request), backends()))) },
    { method: 'POST', path: '/unload_lora_adapter', run: async (request) => (ensureReady(), json(await unloadAdapter(await body(request), backends()))) },
    { method: 'POST', path: '/tokenize', run: async (request) => tokenize(await body(request)) },
    { method: 'POST', path: '/detokenize', run: async (request) => detokenize(await body(request)) },
    { method: 'POST', path: '/apply-template', run: async (request) => applyTemplate(await body(request)) },
    { method: 'POST', path: '/apply_template', run: async (request) => applyTemplate(await body(request)) },
    { method: 'POST', path: '/responses', run: async (request) => responseReply(await responses.create(await body(request), request.signal ?? new AbortController().signal)) },
    { method: 'GET', path: /\/responses\/([^/]+)$/, run: (_request, id) => json(responses.get(id!)) },
    { method: 'DELETE', path: /\/responses\/([^/]+)$/, run: (_request, id) => json(responses.delete(id!)) },
    {
      method: 'GET',
      path: '/health',
      open: true,
      run: () => (loading() || backends().length === 0 ? json({ status: 'loading' }, 503) : json({ status: 'ok' })),
    },
  ];

  async function dispatch(request: Request): Promise<Response> {
    let path: string;
    try {
      path = new URL(request.url, 'http://localhost').pathname.replace(/\/+$/, '');
    } catch {
      throw invalid(null, `the request target ${JSON.stringify(request.url)} is not a valid URL`, 'invalid_path');
    }
    // The first route whose path matches decides; its siblings on the same path share the method check.
    const first = routes.find((r) => matchPath(r, path));
    if (!first) throw notFound(`no route for ${request.method} ${path || '/'}`);
    const same = routes.filter((r) => String(r.path) === String(first.path));
    const r = same.find((x) => x.method === request.method);
    if (!r) {
      const allow = [...new Set(same.map((x) => x.method)), 'OPTIONS'].join(', ');
      const err = new ApiError(405, `${request.method} is not allowed here; use ${allow}`, 'invalid_request_error', null, 'method_not_allowed');
      return new Response(JSON.stringify(err.toJSON()), { status: 405, headers: { ...CORS, 'Content-Type': 'application/json', Allow: allow } });
    }
    if (!r.open && options.apiKey !== undefined) {
      // On the headers alone, before any of the body is read.
      const auth = request.headers.get('authorization') ?? '';
      if (auth !== `Bearer ${options.apiKey}`)
        throw new ApiError(401, 'Incorrect or missing API key: send "Authorization: Bearer <key>"', 'authentication_error', null, 'invalid_api_key');
    }
    return r.run(request, matchPath(r, path)?.arg);
  }

  /** SSE for a stream; otherwise the stream folded into one JSON reply. */
  async function reply(run: { stream: boolean; chunks: AsyncGenerator<unknown, void, void>; fold(): Promise<unknown> }): Promise<Response> {
    if (run.stream)
      return new Response(sseStream(run.chunks), {
        headers: { ...CORS, 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive' },
      });
    return json(await run.fold());
  }

  /** OpenAI's embeddings, on an embedding model (./embeddings.ts). */
  async function embeddings(req: ReturnType<typeof parseEmbeddingRequest>, signal: AbortSignal): Promise<Response> {
    ensureReady();
    return json(await createEmbeddings(req, resolve(req.model, true), signal));
  }

  /** SGLang's `{prompt}` or llama.cpp's `{content}`; `with_pieces` gives `{id, piece}` pairs. */
  async function tokenize(b: Json): Promise<Response> {
    ensureReady();
    const backend = resolve(readField(b, 'model', str), false);
    const tok = backend.tokenizer;
    const text = b.prompt !== undefined ? b.prompt : b.content;
    const add = readField(b, 'add_special_tokens', bool) ?? readField(b, 'add_special', bool) ?? true;
    const one = (s: unknown, param: string) => {
      if (typeof s !== 'string') throw invalid(param, `${param} must be a string or a list of strings`);
      return encodeLong(tok, s, { addSpecialTokens: add, parseSpecial: readField(b, 'parse_special', bool) ?? true });
    };
    const param = b.prompt !== undefined ? 'prompt' : 'content';
    if (text === undefined || text === null) throw invalid('prompt', 'prompt (or content) is required', 'missing_required_parameter');
    if (Array.isArray(text)) {
      const tokens: number[][] = [];
      for (const [i, s] of text.entries()) tokens.push(await one(s, `${param}[${i}]`));
      return json({ tokens, count: tokens.map((t) => t.length), max_model_len: backend.contextLength });
    }
    const ids = await one(text, param);
    const tokens = readField(b, 'with_pieces', bool) ? ids.map((id) => ({ id, piece: tok.decode([id]) })) : ids;
    return json({ tokens, count: ids.length, max_model_len: backend.contextLength });
  }

  /** `{tokens}` in; the text as SGLang's `text` and llama.cpp's `content`. */
  function detokenize(b: Json): Response {
    ensureReady();
    const backend = resolve(readField(b, 'model', str), false);
    const tok = backend.tokenizer;
    const ids = b.tokens;
    if (!Array.isArray(ids) || !ids.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x < tok.vocabSize))
      throw invalid('tokens', `tokens must be a list of token ids from 0 to ${tok.vocabSize - 1}`);
    const text = tok.decode(ids as number[], { skipSpecialTokens: readField(b, 'skip_special_tokens', bool) ?? false });
    return json({ text, content: text });
  }

  /** llama.cpp's `/apply-template`: the rendered chat, not tokenized. */
  function applyTemplate(b: Json): Response {
    ensureReady();
    const backend = resolve(readField(b, 'model', str), false);
    const messages = readField(b, 'messages', CHAT_FIELDS.messages.shape, true)!;
    const kwargs = b.chat_template_kwargs;
    if (kwargs !== undefined && kwargs !== null && (typeof kwargs !== 'object' || Array.isArray(kwargs))) throw invalid('chat_template_kwargs', 'chat_template_kwargs must be an object');
    const tools = Array.isArray(b.tools) ? (b.tools as never) : undefined;
    const { prompt } = renderChat(backend, {
      messages,
      tools,
      add_generation_prompt: readField(b, 'add_generation_prompt', bool),
      continue_final_message: readField(b, 'continue_final_message', bool),
      chat_template_kwargs: (kwargs ?? undefined) as Record<string, unknown> | undefined,
      reasoning_effort: readField(b, 'reasoning_effort', str),
    });
    return json({ prompt });
  }

  /** Every model, each followed by its LoRA adapters. */
  function allCards(): Array<{ id: string } & Record<string, unknown>> {
    return backends().flatMap((b) => [modelCard(b), ...(adapterCards(b, startedAt) as Array<{ id: string }>)]);
  }

  async function handle(request: Request): Promise<Response> {
    try {
      if (request.method === 'OPTIONS') return new Response(null, { status: 204, headers: CORS });
      return await dispatch(request);
    } catch (e) {
      return errorResponse(e);
    }
  }

  return { handle };
}

const startedAt = nowSeconds();

/**
 * A model's card; an embedding model says so (`type`, its vector's `dimensions`: what /v1/embeddings
 * serves), and a model with a vision tower lists what it takes (`input_modalities`, as OpenRouter's cards do).
 */
function modelCard(b: Backend) {
  const embedding = b.config.embedding ? { type: 'embedding' as const, dimensions: b.config.hiddenSize } : {};
  const vision = b.vision ? { input_modalities: ['text', 'image'] } : {};
  return { id: b.id, object: 'model' as const, created: startedAt, owned_by: 'webgpu-llm', max_model_len: b.contextLength, ...embedding, ...vision };
}
