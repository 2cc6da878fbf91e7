import { describe, expect, it } from 'vitest';
import { loadsMtpHead, mtpHeadNotLoaded } from './mtp-option';

describe('EngineOptions.mtp: the MTP head loads only when asked for', () => {
  const withHead = { arch: 'qwen35', mtpLayers: 1 } as const;
  const without = { arch: 'llama', mtpLayers: 0 } as const;

  it('loads for mtp: true or speculative mtp, not by default nor for another speculation', () => {
    expect(loadsMtpHead(withHead, {})).toBe(false);
    expect(loadsMtpHead(withHead, { speculative: { type: 'ngram' } })).toBe(false);
    expect(loadsMtpHead(withHead, { mtp: true })).toBe(true);
    expect(loadsMtpHead(withHead, { speculative: { type: 'mtp' } })).toBe(true);
    expect(loadsMtpHead(withHead, { mtp: false })).toBe(false);
    expect(loadsMtpHead(without, {})).toBe(false);
    expect(loadsMtpHead(without, { mtp: false })).toBe(false);
  });

  it('refuses a head the model lacks, naming the option that asked, and mtp: false beside speculative mtp', () => {
    expect(() => loadsMtpHead(without, { mtp: true })).toThrow(expect.objectContaining({ name: 'ModelError', code: 'invalid_field', field: 'mtp', message: expect.stringMatching(/llama model has none/) }));
    expect(() => loadsMtpHead(without, { speculative: { type: 'mtp' } })).toThrow(expect.objectContaining({ field: 'speculative' }));
    expect(() => loadsMtpHead(withHead, { mtp: false, speculative: { type: 'mtp' } })).toThrow(expect.objectContaining({ code: 'invalid_field', field: 'mtp' }));
  });

  it('tells a request on an engine without the head how to load it (400)', () => {
    const e = mtpHeadNotLoaded();
    expect(e).toMatchObject({ code: 'invalid_field', status: 400, param: 'speculative' });
    expect(e.message).toMatch(/mtp: true \(serve --mtp\)/);
  });
});
