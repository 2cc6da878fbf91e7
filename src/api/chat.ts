/**
 * `/v1/chat/completions`: the chat rendered with the model's template, each choice's text split
 * into reasoning, content and tool calls, the chunk stream, and the reply as that stream folded.
 */
import type { Backend } from '../engine/types';
import { ChatOutputParser, detectReasoningFormat, detectToolCallFormat, promptOpensReasoning, type OutputEvent, type TextTokenizer } from '../text/index';
import { choiceOptions, forcedToolGrammar, newId, nowSeconds, strictToolGrammar, structuredGrammar, UsageTracker, withChoiceSeed } from './choices';
import { runChoice, type TokenOut } from './generate';
import { checkImagesTaken, expandChatImages } from './chat-images';
import { merge } from './merge';
import { checkPromptBound, DEFAULT_LIMITS, type RequestLimits } from './limits';
import { fitPrompt } from './prompt';
import type { ChatChunkChoice, ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse, ChatDelta, ChatLogprobs, ChatToolCall } from './protocol/chat';
import { routedExpertsExt, type RoutedExpertsExt } from './protocol/common';
import { toSamplingParams } from './sampling';
import { chatPromptIds, renderChat } from './template';
import { tokenBytes, tokenText } from '../text/token-bytes';

/** Control tokens that open tool calls; kept in the text for the tool-call parser. */
const TOOL_MARKERS = ['[TOOL_CALLS]', '<|python_tag|>', '<|tool_call|>', '<|/tool_call|>'];

export interface ChatRun {
  stream: boolean;
  chunks: AsyncGenerator<ChatCompletionChunk, void, void>;
  fold(): Promise<ChatCompletionResponse>;
}

export async function prepareChat(req: ChatCompletionRequest, backend: Backend, signal?: AbortSignal, limits: RequestLimits = DEFAULT_LIMITS): Promise<ChatRun> {
  const tok = backend.tokenizer;
  checkImagesTaken(req, backend);
  const rendered = renderChat(backend, req);
  const { template } = rendered;
  const { prompt, literalRanges, images } = await expandChatImages(req, backend, rendered, limits, signal);
  if (!req.truncate_sequence) checkPromptBound(prompt, tok.vocab, backend.contextLength, 'messages');
  const maxParam = req.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
  const { promptIds, maxTokens } = fitPrompt(await chatPromptIds(backend, prompt, literalRanges), backend, {
    maxTokens: req.max_completion_tokens ?? req.max_tokens,
    maxTokensParam: maxParam,
    promptParam: 'messages',
    // Cutting a prompt's start could cut an image's tokens: with images an over-long prompt is a 400.
    truncate: req.truncate_sequence && images.length === 0,
  });

  const toolFormat = req.tools?.length && req.tool_choice !== 'none' ? detectToolCallFormat(template.text) : null;
  const reasoningFormat = detectReasoningFormat(template.text);
  const reasoning = reasoningFormat
    ? {
        ...reasoningFormat.options,
        startsInReasoning: promptOpensReasoning(prompt, reasoningFormat.options.startTag, reasoningFormat.options.endTag),
        separateReasoning: req.separate_reasoning,
        streamReasoning: req.stream_reasoning,
      }
    : null;
  const keepSpecialIds = toolFormat ? TOOL_MARKERS.map((m) => tok.tokenToId(m)).filter((x): x is number => x !== undefined) : [];

  const n = req.n;
  const sampling = toSamplingParams(req, backend.generationConfig);
  const id = newId('chatcmpl');
  const created = nowSeconds();
  const usage = new UsageTracker([promptIds.length]);
  const forced = req.tool_choice === 'required' || typeof req.tool_choice === 'object';
  const compile = { timeLimitMs: limits.grammarCompileMs };
  const grammar = forced
    ? await forcedToolGrammar(req, toolFormat, backend, compile)
    : ((await strictToolGrammar(req, toolFormat, backend, compile)) ?? (await structuredGrammar(req, backend, compile)));
  const base = { ...choiceOptions(req, backend, signal), grammar };
  const includeUsage = req.stream ? !!req.stream_options?.include_usage : true;
  const continuous = !!(req.stream && req.stream_options?.continuous_usage_stats);
  const wantLogprobs = req.logprobs;

  const chunk = (choice: ChatChunkChoice): ChatCompletionChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: req.model,
    choices: [choice],
    ...(continuous ? { usage: usage.usage } : {}),
  });

  async function* chunks(): AsyncGenerator<ChatCompletionChunk, void, void> {
    const parsers = Array.from({ length: n }, () => new ChatOutputParser({ reasoning, toolCallFormat: toolFormat }));
    const gens = parsers.map((_, j) =>
      runChoice({ ...base, generate: { ...base.generate, promptIds, maxTokens, sampling: withChoiceSeed(sampling, j), ...(images.length ? { images } : {}) }, text: { ...base.text, keepSpecialIds } }),
    );
    // OpenAI's first chunk of each choice carries only the role.
    for (let index = 0; index < n; index++) yield chunk({ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
    const counted = new Map<number, number>();
    for await (const [index, ev] of merge(gens)) {
      const parser = parsers[index];
      if (ev.type === 'delta') {
        for (let k = 0; k < ev.tokens.length; k++) usage.addToken();
        counted.set(index, (counted.get(index) ?? 0) + ev.tokens.length);
        const delta = toDelta(parser.push(ev.text));
        const logprobs = wantLogprobs && ev.tokens.length ? chatLogprobs(tok, ev.tokens) : null;
        if (!delta && !logprobs) continue;
        yield chunk({ index, delta: delta ?? {}, logprobs, finish_reason: null });
      } else {
        usage.end(0, ev.usage, counted.get(index) ?? 0);
        const delta = toDelta(parser.finish());
        if (delta) yield chunk({ index, delta, logprobs: null, finish_reason: null });
        const finish = ev.finishReason === 'stop' && parser.hasToolCalls ? 'tool_calls' : ev.finishReason;
        yield chunk({ index, delta: ev.hiddenState ? { hidden_states: ev.hiddenState } : {}, logprobs: null, finish_reason: finish, matched_stop: ev.matchedStop, ...(ev.routedExperts ? { sglext: routedExpertsExt(ev.routedExperts) } : {}) });
      }
    }
    if (includeUsage) yield { id, object: 'chat.completion.chunk', created, model: req.model, choices: [], usage: usage.usage };
  }

  const stream = chunks();
  return {
    stream: req.stream,
    chunks: stream,
    async fold() {
      type Acc = { content: string; reasoning: string; calls: ChatToolCall[]; logprobs: ChatLogprobs | null; finish: ChatChunkChoice['finish_reason']; matched: string | number | null; hidden?: number[]; sglext?: RoutedExpertsExt };
      const acc = new Map<number, Acc>();
      let total = usage.usage;
      for await (const c of stream) {
        if (c.usage && c.choices.length === 0) total = c.usage;
        for (const ch of c.choices) {
          let a = acc.get(ch.index);
          if (!a) acc.set(ch.index, (a = { content: '', reasoning: '', calls: [], logprobs: wantLogprobs ? { content: [] } : null, finish: null, matched: null }));
          a.content += ch.delta.content ?? '';
          a.reasoning += ch.delta.reasoning_content ?? '';
          for (const d of ch.delta.tool_calls ?? []) {
            const call = (a.calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
            if (d.id) call.id = d.id;
            call.function.name += d.function.name ?? '';
            call.function.arguments += d.function.arguments ?? '';
          }
          if (ch.logprobs && a.logprobs) a.logprobs.content.push(...ch.logprobs.content);
          if (ch.delta.hidden_states) a.hidden = ch.delta.hidden_states;
          if (ch.sglext) a.sglext = ch.sglext;
          if (ch.finish_reason) {
            a.finish = ch.finish_reason;
            a.matched = ch.matched_stop ?? null;
          }
        }
      }
      const choices = [...acc.entries()]
        .sort(([x], [y]) => x - y)
        .map(([index, a]) => ({
          index,
          message: {
            role: 'assistant' as const,
            content: a.content === '' && a.calls.length ? null : a.content,
            reasoning_content: a.reasoning === '' ? null : a.reasoning,
            ...(a.calls.length ? { tool_calls: a.calls } : {}),
          },
          logprobs: a.logprobs,
          finish_reason: a.finish,
          matched_stop: a.matched,
          ...(a.hidden ? { hidden_states: a.hidden } : {}),
          ...(a.sglext ? { sglext: a.sglext } : {}),
        }));
      return { id, object: 'chat.completion', created, model: req.model, choices, usage: total };
    },
  };
}

/** Parser events as one chunk delta (null when there is nothing to send). */
function toDelta(events: OutputEvent[]): ChatDelta | null {
  if (events.length === 0) return null;
  const d: ChatDelta = {};
  for (const e of events) {
    if (e.type === 'content') d.content = (d.content ?? '') + e.text;
    else if (e.type === 'reasoning') d.reasoning_content = (d.reasoning_content ?? '') + e.text;
    else (d.tool_calls ??= []).push(e.delta);
  }
  return d;
}

function chatLogprobs(tok: TextTokenizer, tokens: TokenOut[]): ChatLogprobs {
  const entry = (id: number, logprob: number) => ({ token: tokenText(tok, id), logprob, bytes: tokenBytes(tok, id) });
  return {
    content: tokens.map((t) => ({ ...entry(t.id, t.logprob ?? 0), top_logprobs: (t.top ?? []).map((a) => entry(a.id, a.logprob)) })),
  };
}
