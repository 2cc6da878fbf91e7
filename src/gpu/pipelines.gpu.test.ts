import { describe, expect, it } from 'vitest';
import { testGPU } from '../testing/gpu';
import { WebGPUError } from './errors';
import { kernelSource, PipelineCache, variantKey, type Kernel } from './pipelines';

const doubler: Kernel = {
  name: 'test_double',
  source: `alias act = f32;
override WG: u32 = 64;
@group(0) @binding(0) var<storage, read_write> x: array<act>;
@compute @workgroup_size(WG) fn main(@builtin(global_invocation_id) id: vec3u) {
  if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] * act(2); }
}`,
};

describe('the GPU runtime', () => {
  it('describes the adapter and device it acquired', async () => {
    const gpu = await testGPU();
    expect(gpu.info.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 1024 * 1024);
    expect(gpu.info.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
    expect(typeof gpu.info.f16).toBe('boolean');
    expect(gpu.info.f16).toBe(gpu.device.features.has('shader-f16'));
    expect(gpu.info.subgroups).toBe(gpu.device.features.has('subgroups'));
  });

  it('compiles each variant once and keys it by name, precision and constants', async () => {
    const { device } = await testGPU();
    const cache = new PipelineCache(device);
    const a = await cache.get(doubler, { constants: { WG: 64 } });
    const b = await cache.get(doubler, { constants: { WG: 64 } });
    const c = await cache.get(doubler, { constants: { WG: 128 } });
    expect(a).toBe(b);
    expect(c).not.toBe(a);
    expect(cache.size).toBe(2);
    expect(variantKey(doubler, { constants: { B: 1, A: 2 }, precision: 'f16' })).toBe('test_double/f16/A=2,B=1');
  });

  it('rewrites only the act alias for the f16 variant', () => {
    const f16 = kernelSource(doubler, 'f16');
    expect(f16.startsWith('enable f16;\n')).toBe(true);
    expect(f16).toContain('alias act = f16;');
    expect(f16).not.toContain('alias act = f32;');
    expect(() => kernelSource({ name: 'plain', source: 'fn main() {}' }, 'f16')).toThrow(/alias act = f32/);
  });

  it('turns a shader compile error into a typed error that names the kernel', async () => {
    const { device } = await testGPU();
    const cache = new PipelineCache(device);
    const broken: Kernel = { name: 'broken', source: '@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }' };
    const error = await cache.get(broken).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).code).toBe('validation');
    expect((error as WebGPUError).message).toContain('broken');
    expect(cache.size).toBe(0);
  });
});
