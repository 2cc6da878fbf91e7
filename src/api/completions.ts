/**
 * `/v1/completions`: prompts to ids (with echo, FIM suffix, n and best_of), the chunk stream, and
 * the non-streamed reply as that stream folded.
 */
import type { Backend, TokenLogprob } from '../engine/types';
import { StreamingDetokenizer, type TextTokenizer } from '../text/index';
import { encodeLong } from '../text/tokenizer';
import { choiceOptions, newId, nowSeconds, structuredGrammar, UsageTracker, withChoiceSeed } from './choices';
import { invalid } from './errors';
import { runChoice, type TokenOut } from './generate';
import { merge } from './merge';
import { checkPromptBound, DEFAULT_LIMITS, type RequestLimits } from './limits';
import { fitPrompt } from './prompt';
import { routedExpertsExt } from './protocol/common';
import type { CompletionChunk, CompletionLogprobs, CompletionRequest, CompletionResponse, PromptInput } from './protocol/completions';
import { toSamplingParams } from './sampling';
import { tokenText } from '../text/token-bytes';

const FIM = { prefix: '<|fim_prefix|>', suffix: '<|fim_suffix|>', middle: '<|fim_middle|>' };

export interface CompletionRun {
  stream: boolean;
  chunks: AsyncGenerator<CompletionChunk, void, void>;
  /** Folds `chunks` (run to the end) into the reply. */
  fold(): Promise<CompletionResponse>;
}

interface PreparedPrompt {
  ids: number[];
  maxTokens: number;
  /** The prompt as text, for echo. */
  text: string;
}

/** Validation, tokenization and length checks happen here, before any byte of the reply. */
export async function prepareCompletion(req: CompletionRequest, backend: Backend, signal?: AbortSignal, limits: RequestLimits = DEFAULT_LIMITS): Promise<CompletionRun> {
  const tok = backend.tokenizer;
  const prompts: PreparedPrompt[] = [];
  for (const [i, p] of req.prompt.entries()) {
    if (typeof p === 'string' && !req.truncate_sequence) checkPromptBound(p, tok.vocab, backend.contextLength, 'prompt');
    const ids = req.suffix !== undefined ? await fimIds(tok, p, req.suffix) : await promptIds(tok, p, req.prompt.length > 1 ? `prompt[${i}]` : 'prompt');
    if (ids.length === 0) throw invalid('prompt', 'the prompt is empty (it has no tokens)');
    const fit = fitPrompt(ids, backend, { maxTokens: req.max_tokens, maxTokensParam: 'max_tokens', promptParam: 'prompt', truncate: req.truncate_sequence });
    const text = typeof p === 'string' && fit.promptIds.length === ids.length ? p : tok.decode(fit.promptIds, { skipSpecialTokens: req.skip_special_tokens });
    prompts.push({ ids: fit.promptIds, maxTokens: fit.maxTokens, text });
  }

  const n = req.n;
  const bestOf = req.best_of ?? n;
  const sampling = toSamplingParams(req, backend.generationConfig);
  // best_of ranks choices by cumulative logprob, so it needs them even when the reply does not.
  const internal = bestOf > n ? { ...sampling, logprobs: true } : sampling;
  const echoScores = req.echo && req.logprobs !== undefined ? await Promise.all(prompts.map((p) => scoreEcho(backend, p.ids, req.logprobs!))) : [];

  const id = newId('cmpl');
  const created = nowSeconds();
  const usage = new UsageTracker(prompts.map((p) => p.ids.length));
  const cumulative = new Map<number, number>();
  const base = { ...choiceOptions(req, backend, signal), grammar: await structuredGrammar(req, backend, { timeLimitMs: limits.grammarCompileMs }) };
  const wantLogprobs = req.logprobs !== undefined;
  const includeUsage = req.stream ? !!req.stream_options?.include_usage : true;
  const continuous = !!(req.stream && req.stream_options?.continuous_usage_stats);

  const chunk = (choices: CompletionChunk['choices']): CompletionChunk => ({
    id,
    object: 'text_completion',
    created,
    model: req.model,
    choices,
    ...(continuous ? { usage: usage.usage } : {}),
  });

  async function* chunks(): AsyncGenerator<CompletionChunk, void, void> {
    const gens = prompts.flatMap((p) =>
      Array.from({ length: bestOf }, (_, j) =>
        runChoice({ ...base, generate: { ...base.generate, promptIds: p.ids, maxTokens: p.maxTokens, sampling: withChoiceSeed(internal, j) } }),
      ),
    );
    const echoed = new Set<number>();
    const counted = new Map<number, number>();
    for await (const [index, ev] of merge(gens)) {
      const p = Math.floor(index / bestOf);
      const echoText = req.echo ? prompts[p].text : '';
      let text = '';
      let logprobs: CompletionLogprobs | null = null;
      if (req.echo && !echoed.has(index)) {
        echoed.add(index);
        text = echoText;
        if (wantLogprobs) logprobs = echoScores[p];
      }
      if (ev.type === 'delta') {
        text += ev.text;
        for (const t of ev.tokens) {
          usage.addToken();
          counted.set(index, (counted.get(index) ?? 0) + 1);
          cumulative.set(index, (cumulative.get(index) ?? 0) + (t.logprob ?? 0));
        }
        if (wantLogprobs) logprobs = concatLogprobs(logprobs, completionLogprobs(tok, ev.tokens, echoText.length));
        if (text === '' && !logprobs?.tokens.length) continue;
        yield chunk([{ index, text, logprobs, finish_reason: null, matched_stop: null }]);
      } else {
        usage.end(p, ev.usage, counted.get(index) ?? 0);
        const hidden = { ...(ev.hiddenState ? { hidden_states: ev.hiddenState } : {}), ...(ev.routedExperts ? { sglext: routedExpertsExt(ev.routedExperts) } : {}) };
        yield chunk([{ index, text, logprobs: wantLogprobs ? (logprobs ?? emptyLogprobs()) : null, finish_reason: ev.finishReason, matched_stop: ev.matchedStop, ...hidden }]);
      }
    }
    if (includeUsage) yield { ...chunk([]), usage: usage.usage };
  }

  const stream = chunks();
  return {
    stream: req.stream,
    chunks: stream,
    async fold() {
      const byIndex = new Map<number, CompletionResponse['choices'][number]>();
      let total = usage.usage;
      for await (const c of stream) {
        if (c.usage && c.choices.length === 0) total = c.usage;
        for (const ch of c.choices) {
          const acc = byIndex.get(ch.index) ?? { index: ch.index, text: '', logprobs: null, finish_reason: null, matched_stop: null };
          acc.text += ch.text;
          acc.logprobs = ch.logprobs ? concatLogprobs(acc.logprobs, ch.logprobs) : acc.logprobs;
          if (ch.finish_reason) {
            acc.finish_reason = ch.finish_reason;
            acc.matched_stop = ch.matched_stop;
          }
          if (ch.hidden_states) acc.hidden_states = ch.hidden_states;
          if (ch.sglext) acc.sglext = ch.sglext;
          byIndex.set(ch.index, acc);
        }
      }
      let choices = [...byIndex.values()].sort((a, b) => a.index - b.index);
      if (bestOf > n) choices = pickBest(choices, bestOf, n, cumulative, wantLogprobs);
      return { id, object: 'text_completion', created, model: req.model, choices, usage: total };
    },
  };
}

/** Per prompt, the n choices of best_of with the highest cumulative logprob, re-indexed. */
function pickBest(choices: CompletionResponse['choices'], bestOf: number, n: number, cum: Map<number, number>, keepLogprobs: boolean): CompletionResponse['choices'] {
  const out: CompletionResponse['choices'] = [];
  for (let p = 0; p * bestOf < choices.length; p++) {
    const group = choices.filter((c) => Math.floor(c.index / bestOf) === p);
    group.sort((a, b) => (cum.get(b.index) ?? 0) - (cum.get(a.index) ?? 0));
    for (const c of group.slice(0, n)) out.push({ ...c, index: out.length, logprobs: keepLogprobs ? c.logprobs : null });
  }
  return out;
}

/** A prompt in any of its forms as ids; strings get the tokenizer's BOS as HF adds it. Long texts are tokenized off the event loop. */
async function promptIds(tok: TextTokenizer, p: PromptInput, param: string): Promise<number[]> {
  if (typeof p === 'string') return encodeLong(tok, p);
  let ids: number[] = [];
  for (const [i, x] of p.entries()) {
    if (typeof x === 'string') ids = ids.concat(await encodeLong(tok, x, { addSpecialTokens: i === 0 }));
    else if (x >= tok.vocabSize) throw invalid(param, `${param} holds token id ${x}, outside the vocabulary (0..${tok.vocabSize - 1})`);
    else ids.push(x);
  }
  return ids;
}

/** Fill-in-the-middle in Qwen/StarCoder's PSM order, for tokenizers with the FIM tokens. */
async function fimIds(tok: TextTokenizer, p: PromptInput, suffix: string): Promise<number[]> {
  const pre = tok.tokenToId(FIM.prefix);
  const suf = tok.tokenToId(FIM.suffix);
  const mid = tok.tokenToId(FIM.middle);
  if (pre === undefined || suf === undefined || mid === undefined)
    throw invalid('suffix', `suffix needs a fill-in-the-middle model; this tokenizer has no ${FIM.prefix}, ${FIM.suffix} and ${FIM.middle} tokens`);
  if (typeof p !== 'string') throw invalid('suffix', 'suffix works with a text prompt only');
  const plain = (s: string) => encodeLong(tok, s, { addSpecialTokens: false, parseSpecial: false });
  return [pre, ...(await plain(p)), suf, ...(await plain(suffix)), mid];
}

function emptyLogprobs(): CompletionLogprobs {
  return { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
}

function concatLogprobs(a: CompletionLogprobs | null, b: CompletionLogprobs): CompletionLogprobs {
  if (!a) return b;
  return {
    tokens: [...a.tokens, ...b.tokens],
    token_logprobs: [...a.token_logprobs, ...b.token_logprobs],
    top_logprobs: [...a.top_logprobs, ...b.top_logprobs],
    text_offset: [...a.text_offset, ...b.text_offset],
  };
}

/** OpenAI's shape; top_logprobs holds the alternatives plus the chosen token (as vLLM does). */
function completionLogprobs(tok: TextTokenizer, tokens: TokenOut[], base: number): CompletionLogprobs {
  const top = (t: { id: number; logprob: number | null }, alts: TokenLogprob[] | undefined) => {
    const d: Record<string, number> = {};
    for (const a of alts ?? []) d[tokenText(tok, a.id)] ??= a.logprob;
    if (t.logprob !== null) d[tokenText(tok, t.id)] ??= t.logprob;
    return d;
  };
  return {
    tokens: tokens.map((t) => tokenText(tok, t.id)),
    token_logprobs: tokens.map((t) => t.logprob ?? null),
    top_logprobs: tokens.map((t) => top({ id: t.id, logprob: t.logprob ?? null }, t.top)),
    text_offset: tokens.map((t) => base + t.offset),
  };
}

/** Echoed prompt tokens with teacher-forced logprobs (null for the first, as OpenAI). */
async function scoreEcho(backend: Backend, ids: number[], topN: number): Promise<CompletionLogprobs> {
  const tok = backend.tokenizer;
  const scores = backend.scorePrompt ? await backend.scorePrompt(ids, topN) : ids.map(() => ({ logprob: null, top: [] }));
  const detok = new StreamingDetokenizer(tok, { skipSpecialTokens: false });
  const out = emptyLogprobs();
  ids.forEach((id, i) => {
    out.tokens.push(tokenText(tok, id));
    out.text_offset.push(detok.text.length);
    detok.push(id);
    const s = scores[i];
    out.token_logprobs.push(s.logprob);
    if (s.logprob === null) out.top_logprobs.push(null);
    else {
      const d: Record<string, number> = {};
      for (const a of s.top) d[tokenText(tok, a.id)] ??= a.logprob;
      d[tokenText(tok, id)] ??= s.logprob;
      out.top_logprobs.push(d);
    }
  });
  return out;
}
