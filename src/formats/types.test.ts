import { describe, expect, it } from 'vitest';
import { FormatError } from './types';

describe('FormatError', () => {
  it('carries code and file and serialises them', () => {
    const e = new FormatError('truncated', 'a.gguf', 'ends early');
    expect(e).toBeInstanceOf(Error);
    expect(e.message).toBe('a.gguf: ends early');
    expect(JSON.parse(JSON.stringify(e))).toMatchObject({ name: 'FormatError', code: 'truncated', file: 'a.gguf' });
  });
});
