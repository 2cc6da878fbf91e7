import { describe, expect, it } from 'vitest';
import { memoryKind, memoryWarning, systemMemory, type MemoryUse } from './memory';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const BIG = { maxStorageBufferBindingSize: 2 * GiB, maxBufferSize: 4 * GiB };
const DEFAULTS = { maxStorageBufferBindingSize: 128 * MiB, maxBufferSize: 256 * MiB };
/** Llama-3.2-1B in Q8_0 with a 4096-token context: about 1.3 GiB of weights, 0.1 GiB of KV. */
const ONE_B: MemoryUse = { weights: 1.3 * GiB, kvCache: 0.125 * GiB, other: 0.05 * GiB };

describe('memoryKind', () => {
  const info = { vendor: '', architecture: '', description: '', isFallbackAdapter: false };
  it("follows the adapter's type where the browser gives it", () => {
    expect(memoryKind({ ...info, vendor: 'intel', type: 'discrete GPU' })).toBe('discrete');
    expect(memoryKind({ ...info, vendor: 'nvidia', type: 'integrated GPU' })).toBe('shared');
    expect(memoryKind({ ...info, type: 'CPU' })).toBe('shared');
  });

  it('else takes NVIDIA as discrete and everything else (Apple, Intel, mobile, AMD, unknown, software) as shared', () => {
    expect(memoryKind({ ...info, vendor: 'nvidia' })).toBe('discrete');
    for (const vendor of ['apple', 'intel', 'qualcomm', 'arm', 'amd', '']) expect(memoryKind({ ...info, vendor }), vendor).toBe('shared');
    expect(memoryKind({ ...info, vendor: 'nvidia', isFallbackAdapter: true })).toBe('shared');
    expect(memoryKind({ ...info, vendor: 'google', architecture: 'swiftshader' })).toBe('shared');
  });
});

describe('memoryWarning', () => {
  const at = (bytes: number, atLeast = false) => ({ bytes, atLeast, source: 'test' });

  it('says nothing while the model takes at most half of shared memory', () => {
    expect(memoryWarning({ use: ONE_B, kind: 'shared', system: at(4 * GiB), limits: BIG })).toBeNull();
    expect(memoryWarning({ use: ONE_B, kind: 'shared', system: at(2.95 * GiB), limits: BIG })).toBeNull();
  });

  it('warns past half of shared memory, with the figures and what to do', () => {
    const w = memoryWarning({ use: ONE_B, kind: 'shared', system: at(2 * GiB), limits: BIG })!;
    expect(w).toMatch(/about 1\.5 GiB of GPU memory \(weights 1\.3 GiB, KV cache 128 MiB, other 51 MiB\)/);
    expect(w).toMatch(/more than 50% of the 2\.0 GiB of system memory the GPU shares \(test\)/);
    expect(w).toMatch(/more quantised model, or a lower kvCacheTokens or contextLength/);
  });

  it('gives a discrete GPU three quarters of system memory', () => {
    expect(memoryWarning({ use: ONE_B, kind: 'discrete', system: at(2 * GiB), limits: BIG })).toBeNull();
    expect(memoryWarning({ use: ONE_B, kind: 'discrete', system: at(1.5 * GiB), limits: BIG })).toMatch(/75% of the 1\.5 GiB of system memory the GPU sits beside/);
  });

  it("says 'at least' for navigator.deviceMemory's capped 8 GiB", () => {
    const big: MemoryUse = { weights: 4.5 * GiB, kvCache: 0, other: 0 };
    expect(memoryWarning({ use: big, kind: 'shared', system: at(8 * GiB, true), limits: BIG })).toMatch(/of the at least 8\.0 GiB/);
  });

  it('assumes a 4 GiB phone-class device when memory is unknown and the device grants only default limits; else says nothing', () => {
    const w = memoryWarning({ use: { ...ONE_B, weights: 2 * GiB }, kind: 'shared', system: undefined, limits: DEFAULTS });
    expect(w).toMatch(/of the 4\.0 GiB .*default limits/);
    expect(memoryWarning({ use: ONE_B, kind: 'shared', system: undefined, limits: DEFAULTS })).toBeNull();
    expect(memoryWarning({ use: { ...ONE_B, weights: 100 * GiB }, kind: 'shared', system: undefined, limits: BIG })).toBeNull();
  });

  it('takes memoryBytes, when given, as the budget itself', () => {
    expect(memoryWarning({ use: ONE_B, kind: 'discrete', system: at(64 * GiB), limits: BIG, memoryBytes: GiB })).toMatch(/more than the 1\.0 GiB the GPU may use \(memoryBytes\)/);
    expect(memoryWarning({ use: ONE_B, kind: 'shared', system: at(GiB), limits: BIG, memoryBytes: 2 * GiB })).toBeNull();
  });
});

describe('systemMemory', () => {
  it("reads Node's os.totalmem()", () => {
    const m = systemMemory()!;
    expect(m.source).toBe('os.totalmem()');
    expect(m.bytes).toBeGreaterThan(256 * MiB);
    expect(m.atLeast).toBe(false);
  });
});
