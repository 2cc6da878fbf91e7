import { describe, expect, it } from 'vitest';
import { choosePrefillSpec, DEFAULT_PREFILL_CHUNK, defaultPrefillChunk, DISCRETE_PREFILL_CHUNK, EMULATED_PREFILL_SPEC, LARGE_PREFILL_SPEC, MATMUL_SPECS, matmulGrid, matmulRef, MATVEC_SPECS, matvecGrid, PREFILL_SPEC, prefillWorkgroupBytes, specProblem } from './matmul';

describe('matmulRef', () => {
  it('computes x · Wᵀ + bias for each token', () => {
    // x: 2 tokens × 3; W: 2 rows × 3.
    const x = new Float32Array([1, 2, 3, -1, 0, 1]);
    const w = new Float32Array([1, 0, 0, 0.5, 0.5, 0.5]);
    expect([...matmulRef(x, 2, 3, w, 2)]).toEqual([1, 3, -1, 0]);
    expect([...matmulRef(x, 2, 3, w, 2, new Float32Array([10, 20]))]).toEqual([11, 23, 9, 20]);
  });
});

describe('grids', () => {
  it('cover every row group, spilling matvec groups past 65535 into y', () => {
    expect(matvecGrid(37, { WG: 64, ROWS_PER_WG: 4, MAX_T: 1 })).toEqual([10, 1]);
    const [gx, gy] = matvecGrid(151936, { WG: 64, ROWS_PER_WG: 1, MAX_T: 1 });
    expect(gx).toBeLessThanOrEqual(65535);
    expect(gx * gy).toBeGreaterThanOrEqual(151936);
    expect(matmulGrid(37, 17, { TILE_M: 16, TILE_N: 32, TILE_K: 8, TM: 2, TN: 4 })).toEqual([2, 2]);
    // The direct kernel: 4 rows × 8 tokens per thread.
    expect(matmulGrid(37, 17, { THREADS: 4 })).toEqual([3, 3]);
    expect(matmulGrid(64, 16, { THREADS: 16 })).toEqual([1, 2]);
  });
});

describe('specProblem', () => {
  it('accepts the tested specs', () => {
    for (const s of [...MATVEC_SPECS, ...MATMUL_SPECS]) expect(specProblem(s)).toBeNull();
  });

  it('names what is wrong with a spec the shaders cannot run', () => {
    expect(specProblem({ WG: 96, ROWS_PER_WG: 1, MAX_T: 1 })).toMatch(/power of two/);
    expect(specProblem({ WG: 64, ROWS_PER_WG: 16, MAX_T: 8 })).toMatch(/MAX_T/);
    expect(specProblem({ TILE_M: 32, TILE_N: 32, TILE_K: 8, TM: 16, TN: 2 })).toMatch(/at most 8/);
    expect(specProblem({ TILE_M: 32, TILE_N: 32, TILE_K: 6, TM: 4, TN: 4 })).toMatch(/TILE_K/);
    expect(specProblem({ THREADS: 0 })).toMatch(/THREADS/);
    expect(specProblem({ THREADS: 512 })).toMatch(/THREADS/);
  });
});

describe('choosePrefillSpec', () => {
  const limits = (storage: number, threads: number) => ({ maxComputeWorkgroupStorageSize: storage, maxComputeInvocationsPerWorkgroup: threads });

  it('takes the large tiles where the device holds their workgroup memory and threads', () => {
    expect(prefillWorkgroupBytes(LARGE_PREFILL_SPEC, 'f32')).toBe(16384);
    expect(prefillWorkgroupBytes(LARGE_PREFILL_SPEC, 'f16')).toBe(12288);
    // WebGPU's default limits (16 KB, 256 threads) hold them at either precision.
    expect(choosePrefillSpec(limits(16384, 256), 'f32', false)).toBe(LARGE_PREFILL_SPEC);
    expect(choosePrefillSpec(limits(12288, 64), 'f16', false)).toBe(LARGE_PREFILL_SPEC);
  });

  it('falls back to the small tiles on smaller devices, and to the direct kernel on CPU emulations', () => {
    expect(choosePrefillSpec(limits(12288, 256), 'f32', false)).toBe(PREFILL_SPEC);
    expect(choosePrefillSpec(limits(16384, 32), 'f16', false)).toBe(PREFILL_SPEC);
    expect(choosePrefillSpec(limits(65536, 1024), 'f32', true)).toBe(EMULATED_PREFILL_SPEC);
  });
});

describe('defaultPrefillChunk', () => {
  it('is larger on discrete GPUs (by adapter type, or an NVIDIA vendor) and 128 elsewhere', () => {
    expect(defaultPrefillChunk({ type: 'discrete GPU', vendor: 'amd' }, false)).toBe(DISCRETE_PREFILL_CHUNK);
    expect(defaultPrefillChunk({ type: '', vendor: 'nvidia' }, false)).toBe(DISCRETE_PREFILL_CHUNK);
    expect(defaultPrefillChunk({ type: 'integrated GPU', vendor: 'intel' }, false)).toBe(DEFAULT_PREFILL_CHUNK);
    expect(defaultPrefillChunk({ type: '', vendor: 'apple' }, false)).toBe(DEFAULT_PREFILL_CHUNK);
    expect(defaultPrefillChunk({ type: '', vendor: 'google' }, true)).toBe(DEFAULT_PREFILL_CHUNK);
    expect(DISCRETE_PREFILL_CHUNK).toBeGreaterThan(DEFAULT_PREFILL_CHUNK);
  });
});
