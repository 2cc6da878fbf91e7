import { describe, expect, it } from 'vitest';
import { chooseDecodeSpec, choosePrefillSpec, DECODE_ROW_SPECS, DECODE_SPEC, DEFAULT_PREFILL_CHUNK, defaultPrefillChunk, DISCRETE_PREFILL_CHUNK, EMULATED_PREFILL_SPEC, LARGE_PREFILL_SPEC, MATMUL_SPECS, matmulGrid, matmulRef, MATVEC_SPECS, MATVEC_TARGET_WORKGROUPS, matvecGrid, PREFILL_SPEC, prefillWorkgroupBytes, specProblem } from './matmul';

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
    for (const s of [...MATVEC_SPECS, ...DECODE_ROW_SPECS, ...MATMUL_SPECS]) expect(specProblem(s)).toBeNull();
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
  it('takes the 4 × 4-per-thread tiles on GPUs and the direct kernel on CPU emulations', () => {
    expect(choosePrefillSpec(false)).toBe(PREFILL_SPEC);
    expect(choosePrefillSpec(true)).toBe(EMULATED_PREFILL_SPEC);
    // Within WebGPU's guaranteed limits (16 KB of workgroup memory, 256 threads) at either precision.
    expect(prefillWorkgroupBytes(PREFILL_SPEC, 'f32')).toBe(3072);
    expect((PREFILL_SPEC.TILE_M / PREFILL_SPEC.TM) * (PREFILL_SPEC.TILE_N / PREFILL_SPEC.TN)).toBe(128);
    expect(prefillWorkgroupBytes(LARGE_PREFILL_SPEC, 'f32')).toBe(16384);
    expect(prefillWorkgroupBytes(LARGE_PREFILL_SPEC, 'f16')).toBe(12288);
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

describe('chooseDecodeSpec', () => {
  const limits = { maxComputeWorkgroupStorageSize: 16384, maxComputeInvocationsPerWorkgroup: 256 };
  const rows = (n: number, subgroupMaxSize = 0, glu = false) => chooseDecodeSpec(n, limits, subgroupMaxSize, glu).ROWS_PER_WG;

  it('takes the most rows per workgroup that still make the target workgroups, else the fewest', () => {
    expect(MATVEC_TARGET_WORKGROUPS).toBe(8 * 132); // eight per SM of an H100 or H200
    // Llama-3.2-1B: o and down (2048 rows) 1 per workgroup (2 would make 1024 workgroups), the
    // fused qkv (3072) 2 (1536), lm_head (128256) 4; Qwen2.5-0.5B's o (896) 1.
    expect(rows(2048)).toBe(1);
    expect(rows(3072)).toBe(2);
    expect(rows(128256)).toBe(4);
    expect(rows(896)).toBe(1);
    // The edges: 4 (2) rows per workgroup from 4 (2) × (target - 1) + 1 rows.
    expect(rows(4 * (MATVEC_TARGET_WORKGROUPS - 1) + 1)).toBe(4);
    expect(rows(4 * (MATVEC_TARGET_WORKGROUPS - 1))).toBe(2);
    expect(rows(2 * (MATVEC_TARGET_WORKGROUPS - 1) + 1)).toBe(2);
    expect(rows(2 * (MATVEC_TARGET_WORKGROUPS - 1))).toBe(1);
    // A small projection (a MoE router, the test fixtures) gets a workgroup per row.
    expect(rows(64)).toBe(1);
    expect(chooseDecodeSpec(4096, limits)).toBe(DECODE_SPEC);
  });

  it('keeps a GLU row pair in one workgroup and a row on whole subgroups where their width is known', () => {
    // Llama-3.2-1B's gate_up (16384 interleaved rows) 4; a small one 2, never 1.
    expect(rows(16384, 0, true)).toBe(4);
    expect(rows(4096, 0, true)).toBe(2);
    expect(rows(64, 0, true)).toBe(2);
    // AMD's 64-wide waves: at most 2 rows of 128 threads; 128-wide subgroups: 1, or DECODE_SPEC under GLU.
    expect(rows(16384, 64)).toBe(2);
    expect(rows(16384, 128)).toBe(1);
    expect(chooseDecodeSpec(16384, limits, 128, true)).toBe(DECODE_SPEC);
    // Subgroups narrower than 32 change nothing (a row keeps 32 threads).
    expect(rows(16384, 16)).toBe(4);
  });
});
