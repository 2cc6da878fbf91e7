/**
 * Backend errors reach a client as OpenAI error objects with their own status and code, never as
 * a 500 `internal_error`: a full KV cache is a 503 (it passes), a prompt the model cannot take a 400.
 */
import { describe, expect, it } from 'vitest';
import { toApiError } from '../api/errors';
import { ModelError } from '../model/errors';
import { checkPromptIds } from './backend-util';
import { BackendDisposedError, ContextLengthError, GrammarDeadEndError, GrammarRefusedError, KvCacheFullError } from './errors';
import { KvPages } from './kv-pages';

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('expected a throw');
}

describe('backend errors as API errors', () => {
  it('maps a full KV cache to a 503 kv_cache_full that says what to do', () => {
    const kv = new KvPages(2, 16);
    const e = toApiError(thrown(() => kv.append(0, 40)));
    expect(e.status).toBe(503);
    expect(e.toJSON().error).toMatchObject({ type: 'service_unavailable', code: 'kv_cache_full' });
    expect(e.message).toMatch(/KV cache is full: 3 more pages of 16 tokens are needed but 2 are free/);
  });

  it('maps prompt faults to 400s and our own faults to 500s with their codes', () => {
    expect(toApiError(thrown(() => checkPromptIds([1, 900], 100))).toJSON().error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_prompt' });
    expect(toApiError(new ContextLengthError('too long')).status).toBe(400);
    expect(toApiError(new BackendDisposedError('GpuEngine')).toJSON().error).toMatchObject({ type: 'service_unavailable', code: 'backend_disposed' });
    // A grammar that cannot be followed ends its choice as the caller's error, naming the field.
    expect(toApiError(new GrammarRefusedError(5, 'ebnf'))).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'grammar_refused', param: 'ebnf' });
    expect(toApiError(new GrammarDeadEndError(3, 'tools'))).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'grammar_dead_end', param: 'tools' });
    const model = toApiError(new ModelError('missing_tensor', 'blk.0.attn_q.weight is missing', 'blk.0.attn_q.weight'));
    expect(model.status).toBe(500);
    expect(model.toJSON().error).toMatchObject({ code: 'missing_tensor', param: 'blk.0.attn_q.weight', message: 'model: blk.0.attn_q.weight is missing' });
  });

  it('keeps KvCacheFullError importable from kv-pages, as the same class', () => {
    expect(thrown(() => new KvPages(1, 4).append(0, 9))).toBeInstanceOf(KvCacheFullError);
  });
});
