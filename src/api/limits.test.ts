/**
 * The request limits on their own: the depth scan never recurses and ignores brackets in strings,
 * bodies are refused as soon as they pass the cap (declared or streamed), and the prompt bound is
 * sound (never refuses a prompt that fits) yet refuses megabytes without tokenizing.
 */
import { describe, expect, it } from 'vitest';
import { ApiError } from './errors';
import { checkJsonDepth, checkPromptBound, readBodyText } from './limits';

const status = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as ApiError).status;
  }
  return 200;
};

describe('checkJsonDepth', () => {
  it('accepts nesting up to the limit and refuses one level more, naming the limit', () => {
    expect(status(() => checkJsonDepth('['.repeat(5) + ']'.repeat(5), 5))).toBe(200);
    expect(() => checkJsonDepth('{"a":'.repeat(6) + '1' + '}'.repeat(6), 5)).toThrow(/limit of 5 levels/);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(status(() => checkJsonDepth(JSON.stringify({ s: '[[[[[[[[[[{{{{{\\"[[[[' }), 2))).toBe(200);
  });

  it('scans 100k levels without overflowing the stack', () => {
    expect(status(() => checkJsonDepth('['.repeat(100_000) + ']'.repeat(100_000), 128))).toBe(400);
  });
});

describe('readBodyText', () => {
  const streamOf = (chunks: number, size: number) => {
    let sent = 0;
    return new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent++ === chunks) return c.close();
        c.enqueue(new Uint8Array(size).fill(0x20));
      },
    });
  };

  it('refuses a declared Content-Length past the cap without reading the body', async () => {
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({ pull: (c) => void (pulled++, c.enqueue(new Uint8Array(10))) });
    const req = new Request('http://x/', { method: 'POST', body, headers: { 'content-length': '1000000' }, duplex: 'half' } as RequestInit);
    await expect(readBodyText(req, 1000)).rejects.toMatchObject({ status: 413 });
    expect(pulled).toBeLessThanOrEqual(1);
  });

  it('stops reading a chunked body as soon as it passes the cap', async () => {
    let pulled = 0;
    const inner = streamOf(1000, 1024);
    const reader = inner.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        pulled++;
        const { done, value } = await reader.read();
        if (done) c.close();
        else c.enqueue(value);
      },
    });
    const req = new Request('http://x/', { method: 'POST', body, duplex: 'half' } as RequestInit);
    await expect(readBodyText(req, 10 * 1024)).rejects.toMatchObject({ status: 413, code: 'request_too_large' });
    expect(pulled).toBeLessThan(20);
  });

  it('refuses invalid UTF-8 with a 400 and reads a body within the cap', async () => {
    const bad = new Request('http://x/', { method: 'POST', body: new Uint8Array([0x7b, 0xc1, 0xa7, 0x7d]) });
    await expect(readBodyText(bad, 100)).rejects.toMatchObject({ status: 400 });
    expect(await readBodyText(new Request('http://x/', { method: 'POST', body: '{"a":1}' }), 100)).toBe('{"a":1}');
  });
});

describe('checkPromptBound', () => {
  const vocab = ['a', 'bb', 'hello', '<|im_start|>'];

  it('never refuses a prompt that could fit: the bound is length > context × longest token × 4', () => {
    // 12 characters per token at most (the special token), context 10.
    expect(status(() => checkPromptBound('x'.repeat(10 * 12 * 4), vocab, 10, 'prompt'))).toBe(200);
    expect(status(() => checkPromptBound('x'.repeat(10 * 12 * 4 + 1), vocab, 10, 'prompt'))).toBe(400);
  });

  it('refuses a 5 MB prompt at once, naming the field', () => {
    let err: ApiError | undefined;
    try {
      checkPromptBound('word '.repeat(1_000_000), vocab, 4096, 'messages');
    } catch (e) {
      err = e as ApiError;
    }
    expect(err).toMatchObject({ status: 400, param: 'messages', code: 'context_length_exceeded' });
  });
});
