/**
 * The one generation path both endpoints share: prompt ids in, text deltas out. It drives the
 * backend, detokenizes without splitting characters, applies stop strings / regexes (holding back
 * text that may become one), decides the finish reason and `matched_stop`, and carries each
 * token's logprobs. Streamed and non-streamed replies are both built from these events.
 */
import type { Backend, GenerateRequest, TokenLogprob } from '../engine/types';
import type { CompiledConstraint } from '../structured/spec';
import { StreamingDetokenizer } from '../text/index';
import { StopMatcher, type TextOptions } from './stop';

/** One choice's generation: the backend's request, the API's text-level stopping, the grammar. */
export interface ChoiceRequest {
  backend: Backend;
  /** What the backend gets; runChoice adds its own signal and the grammar's constraint. */
  generate: Omit<GenerateRequest, 'signal' | 'constraint'>;
  text: TextOptions;
  /** Structured output: each choice runs its own matcher of this grammar. */
  grammar?: CompiledConstraint;
  signal?: AbortSignal;
}

export interface TokenOut {
  id: number;
  logprob?: number;
  top?: TokenLogprob[];
  /** Where the token's text starts in this choice's output text (UTF-16 units). */
  offset: number;
}

export type FinishReason = 'stop' | 'length' | 'abort';

export interface ChoiceUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  /** Speculative decoding's counts (GenerationResult.speculation). */
  speculation?: { proposed: number; accepted: number };
}

export type ChoiceEvent =
  | { type: 'delta'; text: string; tokens: TokenOut[] }
  | { type: 'end'; finishReason: FinishReason; matchedStop: string | number | null; usage: ChoiceUsage; hiddenState?: number[]; routedExperts?: number[] };

export async function* runChoice(req: ChoiceRequest): AsyncGenerator<ChoiceEvent, void, void> {
  const { backend, generate } = req;
  const tok = backend.tokenizer;
  const detok = new StreamingDetokenizer(tok, {
    skipSpecialTokens: req.text.skipSpecialTokens,
    context: generate.promptIds.slice(-4),
    keepSpecialIds: req.text.keepSpecialIds,
  });
  const stopper = new StopMatcher(req.text.stop, req.text.stopRegex, req.text.noStopTrim);
  const enders = new Set([...(generate.ignoreEos ? [] : tok.eosIds), ...generate.stopTokenIds]);

  // Our own signal: the caller's abort, or ours when a stop string ends the choice.
  const ctl = new AbortController();
  const onAbort = () => ctl.abort();
  if (req.signal?.aborted) ctl.abort();
  req.signal?.addEventListener('abort', onAbort, { once: true });

  const constraint = req.grammar ? await req.grammar.start() : undefined;
  const gen = backend.generate({ ...generate, signal: ctl.signal, ...(constraint ? { constraint } : {}) });
  let finished = false;
  let count = 0;
  // return_hidden_states: the final hidden state the last token was drawn from (as SGLang's choices carry).
  let lastHidden: Float32Array | undefined;
  // return_routed_experts: every generated token's [layers][k] expert ids, flat (the endpoints send them as SGLang's sglext).
  const routed: number[] = [];
  const hidden = () => ({
    ...(generate.returnHiddenStates ? { hiddenState: lastHidden ? Array.from(lastHidden) : [] } : {}),
    ...(generate.returnRoutedExperts ? { routedExperts: routed } : {}),
  });
  try {
    for (;;) {
      const r = await gen.next();
      if (r.done) {
        finished = true;
        const rest = stopper.push(detok.flush(), true);
        if (rest.text) yield { type: 'delta', text: rest.text, tokens: [] };
        const result = r.value;
        const usage = { promptTokens: result.promptTokens, completionTokens: result.completionTokens, cachedTokens: result.cachedTokens, ...(result.speculation ? { speculation: result.speculation } : {}) };
        if (rest.hit) yield { type: 'end', finishReason: 'stop', matchedStop: rest.hit.matched, usage, ...hidden() };
        else yield { type: 'end', finishReason: result.finishReason, matchedStop: result.finishReason === 'stop' ? (result.stopTokenId ?? null) : null, usage, ...hidden() };
        return;
      }
      const t = r.value;
      count++;
      if (t.hidden) lastHidden = t.hidden;
      if (t.routedExperts) for (const ids of t.routedExperts) routed.push(...ids);
      const out: TokenOut = { id: t.id, offset: detok.text.length };
      if (t.logprob !== undefined) out.logprob = t.logprob;
      if (t.top) out.top = t.top;
      // The token that ends generation (EOS, a stop id) is not text unless no_stop_trim.
      const delta = enders.has(t.id) && !req.text.noStopTrim ? '' : detok.push(t.id);
      const { text, hit } = stopper.push(delta);
      yield { type: 'delta', text, tokens: [out] };
      if (hit) {
        // Stop the backend at its next step and collect its result for the usage.
        ctl.abort();
        let end = await gen.next();
        while (!end.done) end = await gen.next();
        finished = true;
        const v = end.value;
        yield {
          type: 'end',
          finishReason: 'stop',
          matchedStop: hit.matched,
          usage: { promptTokens: v.promptTokens, completionTokens: count, cachedTokens: v.cachedTokens, ...(v.speculation ? { speculation: v.speculation } : {}) },
          ...hidden(),
        };
        return;
      }
    }
  } finally {
    req.signal?.removeEventListener('abort', onAbort);
    if (!finished) {
      // The consumer went away (stream cancelled): stop the backend and free its sequence.
      ctl.abort();
      await gen.return(undefined as never).catch(() => undefined);
    }
    // The backend is done with it (finished, or returned above).
    constraint?.dispose();
  }
}
