/**
 * `POST /v1/embeddings` on an embedding model (ModelConfig.embedding). Each input runs as its own
 * sequence of one step through the backend, so the engine batches inputs with each other and
 * with every other request: the prompt is prefilled and the step's final hidden state of its last
 * token comes back over the hidden-states channel (`returnHiddenStates`); the head of an
 * embedding model stops at the final norm (src/engine/forward/head.ts), and the draw that step
 * makes is dropped. That row is the last-token pooling of Qwen3-Embedding; it is cut to
 * `dimensions` and L2-normalised here. An encoder (BERT: src/engine/encoder-backend.ts) has
 * `embed` instead: its pooled vectors come back whole, and are cut and normalised the same way.
 */
import type { Backend, GenerateRequest } from '../engine/types';
import { GREEDY } from '../engine/sequence';
import { encodeLong } from '../text/tokenizer';
import { ApiError, invalid } from './errors';
import { base64Of } from './protocol/common';
import type { EmbeddingData, EmbeddingInput, EmbeddingRequest, EmbeddingResponse } from './protocol/embeddings';

/** A 400 for a model that has no pooling: chat and completions models serve no embeddings. */
function notEmbeddingModel(b: Backend): ApiError {
  return invalid(
    'model',
    `the model \`${b.id}\` is not an embedding model (its folder has no sentence-transformers Pooling module, its GGUF no pooling_type): load an embedding model for /v1/embeddings`,
    'model_not_embedding',
  );
}

/** An embedding model answers only /v1/embeddings: its head computes no logits to draw from. */
export function refuseEmbeddingModel(b: Backend): void {
  if (b.config.embedding) throw invalid('model', `the model \`${b.id}\` is an embedding model: use /v1/embeddings`, 'model_is_embedding');
}

/**
 * Tokens an input may have: the model's `max_seq_length`, within the engine's context (a decoder's
 * prompt leaves one position for the draw the engine makes after it; an encoder's `embed` none).
 */
export function embeddingInputLimit(b: Backend): number {
  return Math.min(b.config.embedding?.maxSeqLength ?? Infinity, b.embed ? b.contextLength : b.contextLength - 1);
}

export async function createEmbeddings(req: EmbeddingRequest, backend: Backend, signal?: AbortSignal): Promise<EmbeddingResponse> {
  const e = backend.config.embedding;
  if (!e) throw notEmbeddingModel(backend);
  if (e.pooling !== 'last' && !backend.embed) throw invalid('model', `the model \`${backend.id}\` pools by ${e.pooling}, which this engine does not run yet`, 'unsupported_pooling');
  const size = backend.config.hiddenSize;
  if (req.dimensions !== undefined && req.dimensions > size) throw invalid('dimensions', `dimensions must be at most the model's ${size}; got ${req.dimensions}`);
  const limit = embeddingInputLimit(backend);
  const inputs = await Promise.all(req.input.map((x, i) => tokens(backend, x, i, limit)));
  // An encoder pools and batches itself; a decoder's inputs are sequences of its engine, batched there.
  const vectors = backend.embed ? await backend.embed(inputs, signal) : await Promise.all(inputs.map((ids) => lastHidden(backend, ids, signal)));
  const data = vectors.map((v, index): EmbeddingData => {
    const out = normalized(v.subarray(0, req.dimensions ?? size));
    return { object: 'embedding', index, embedding: req.encoding_format === 'base64' ? base64Of(new Uint8Array(out.buffer)) : Array.from(out) };
  });
  const n = inputs.reduce((s, ids) => s + ids.length, 0);
  return { object: 'list', data, model: backend.id, usage: { prompt_tokens: n, total_tokens: n } };
}

/** An input's ids: a text with the tokenizer's special tokens, ids as given; a 400 past the limit. */
async function tokens(backend: Backend, x: EmbeddingInput, i: number, limit: number): Promise<number[]> {
  const param = 'input';
  const tok = backend.tokenizer;
  const ids = typeof x === 'string' ? await encodeLong(tok, x) : x;
  const bad = typeof x === 'string' ? -1 : ids.findIndex((id) => id >= backend.config.vocabSize);
  if (bad >= 0) throw invalid(param, `${param}[${i}][${bad}] is ${ids[bad]}, not a token id (the vocabulary has ${backend.config.vocabSize})`);
  if (ids.length > limit)
    throw invalid(param, `${param}[${i}] has ${ids.length} tokens; this model takes at most ${limit} per input`, 'context_length_exceeded');
  return ids;
}

/** One input through the backend: its last token's final hidden state. */
async function lastHidden(backend: Backend, promptIds: number[], signal?: AbortSignal): Promise<Float32Array> {
  const request: GenerateRequest = { promptIds, maxTokens: 1, sampling: GREEDY, stopTokenIds: [], ignoreEos: true, minTokens: 0, returnHiddenStates: true, ...(signal ? { signal } : {}) };
  let hidden: Float32Array | undefined;
  for await (const t of backend.generate(request)) hidden ??= t.hidden;
  if (!hidden) throw new ApiError(500, 'the backend returned no hidden state for an embedding input', 'server_error', null, 'internal_error');
  return hidden;
}

/** `v` over its L2 norm (float32, as the wire carries it); a zero vector stays zero. */
function normalized(v: Float32Array): Float32Array {
  let ss = 0;
  for (const x of v) ss += x * x;
  const inv = ss > 0 ? 1 / Math.sqrt(ss) : 0;
  return Float32Array.from(v, (x) => x * inv);
}
