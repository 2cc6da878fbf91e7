import { describe, expect, it } from 'vitest';
import { MATMUL_SPECS, matmulGrid, matmulRef, MATVEC_SPECS, matvecGrid, specProblem } from './matmul';

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
    expect(specProblem({ TILE_M: 32, TILE_N: 32, TILE_K: 8, TM: 8, TN: 4 })).toMatch(/at most 16/);
    expect(specProblem({ TILE_M: 32, TILE_N: 32, TILE_K: 6, TM: 4, TN: 4 })).toMatch(/TILE_K/);
    expect(specProblem({ THREADS: 0 })).toMatch(/THREADS/);
    expect(specProblem({ THREADS: 512 })).toMatch(/THREADS/);
  });
});
