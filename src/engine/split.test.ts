/**
 * The engine on weights split by rows (issue #15): a weight buffer limit forced far below the tiny
 * fixtures' tensors (`maxWeightPartBytes`, as a device granting only that would) makes the embedding (the output matrix too, when tied), the
 * FFN and attention matrices go up as 2 to 5 parts each, and the engine must still match the
 * reference forward pass exactly as unsplit (engine.test.ts's rule and tolerance).
 */
import { describe, expect, it } from 'vitest';
import { WebGPUError } from '../gpu/errors';
import { openModel } from '../model/open';
import { expectModelMatchesReference, splittingLimit } from '../testing/engine-check';
import { useFixtureURLs } from '../testing/fixture-server';
import { testGPU } from '../testing/gpu';
import type { Arch } from '../model/arch';
import { gpuBytesPerRow } from '../kernels/weights';
import { GpuEngine } from './engine';

const LOGIT_TOLERANCE = 1e-3; // f32, as engine.test.ts
const STEPS = 8;

/** Labels of the buffers `device` creates while `run` runs. */
async function bufferLabels(device: GPUDevice, run: () => Promise<void>): Promise<string[]> {
  const labels: string[] = [];
  const original = device.createBuffer;
  device.createBuffer = function (this: GPUDevice, d: GPUBufferDescriptor) {
    labels.push(d.label ?? '');
    return original.call(device, d);
  };
  try {
    await run();
  } finally {
    device.createBuffer = original;
  }
  return labels;
}

/** Parts per tensor, from the upload's `name [part i/n]` labels. */
function partCounts(labels: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const l of labels) {
    const m = /^(.*) \[part \d+\/(\d+)\]$/.exec(l);
    if (m) counts.set(m[1]!, Number(m[2]));
  }
  return counts;
}

// F32, F16, Q8_0 (with qwen2's q/k/v biases), a K-quant and a mix (Q4_K_M: Q6_K and Q4_K rows).
const CASES: Array<[Arch, string]> = [
  ['qwen3', 'F32'],
  ['llama', 'F16'],
  ['qwen2', 'Q8_0'],
  ['mistral', 'Q4_K'],
  ['llama', 'Q4_K_M'],
];

describe.each([...new Set(CASES.map(([a]) => a))])('the GPU engine on the tiny %s fixture with weights split by rows', (arch) => {
  const urls = useFixtureURLs(arch);

  it.each(CASES.filter(([a]) => a === arch).map(([, v]) => v))('%s: greedy tokens and teacher-forced logits match the reference', async (variant) => {
    const gpu = await testGPU();
    const url = urls()[variant]!;
    const limit = await splittingLimit(url);
    const labels = await bufferLabels(gpu.device, () =>
      expectModelMatchesReference(gpu, url, {
        precision: 'f32',
        steps: STEPS,
        tolerance: LOGIT_TOLERANCE,
        salt: 7,
        engine: { maxWeightPartBytes: limit },
      }),
    );
    const parts = partCounts(labels);
    expect(parts.get('token_embd.weight')).toBeGreaterThanOrEqual(3);
    // Untied: the output matrix splits too; tied, the head reads the embedding's parts.
    if (labels.some((l) => l.startsWith('output.weight'))) expect(parts.get('output.weight')).toBeGreaterThanOrEqual(3);
    // Gate and up of one type go up as one interleaved matrix (ffn_gate_up), else apart.
    const gateUp = (l: number, which: 'gate' | 'up') => parts.get(`blk.${l}.ffn_gate_up.weight`) ?? parts.get(`blk.${l}.ffn_${which}.weight`);
    for (const [name, count] of [['blk.0 gate', gateUp(0, 'gate')], ['blk.1 up', gateUp(1, 'up')], ['blk.1.ffn_down.weight', parts.get('blk.1.ffn_down.weight')]] as const) {
      expect(count, name).toBeGreaterThanOrEqual(3);
    }
    // q alone, or joined with k and v at upload (attn_qkv; attn_qk where v has a type of its own).
    const q = [...parts].find(([name]) => /^blk\.0\.attn_qk?v?\.weight$/.test(name));
    expect(q?.[1], 'blk.0 q parts').toBeGreaterThanOrEqual(2);
  });
});

describe('a weight buffer limit smaller than one row', () => {
  const urls = useFixtureURLs('llama');

  it('refuses the model before uploading, naming the tensor', async () => {
    const gpu = await testGPU();
    const opened = await openModel(urls()['Q8_0']!);
    const error = await GpuEngine.load(opened, { gpu, precision: 'f32', maxWeightPartBytes: 64 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).code).toBe('limits_too_small');
    // A 256-wide Q8_0 row: 8 blocks of 34 bytes (the GPU layout keeps the GGUF's bytes).
    const rowBytes = gpuBytesPerRow('Q8_0', opened.config.hiddenSize);
    expect(rowBytes).toBe(272);
    expect((error as WebGPUError).message).toMatch(new RegExp(`^One row of token_embd\\.weight is ${rowBytes} bytes but this GPU's storage bindings hold 64`));
  });
});

describe('the GPU engine on the tiny qwen3moe fixture with its expert stacks split by experts', () => {
  const urls = useFixtureURLs('qwen3moe', { which: { hf: [], gguf: ['Q8_0'] } });

  it('Q8_0 at a limit of two experts: every stack in two parts, greedy tokens and teacher-forced logits match the reference', async () => {
    const gpu = await testGPU();
    const url = urls().Q8_0!;
    const { tensors, config } = await openModel(url);
    // Two experts of the largest stack (one expert: its rows of the GPU layout).
    const expertBytes = Math.max(
      ...['ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps'].map((n) => {
        const { shape, dtype } = tensors.get(`blk.0.${n}.weight`)!.info;
        return shape[1]! * gpuBytesPerRow(dtype, shape[2]!);
      }),
    );
    expect(config.moe!.numExperts).toBe(4);
    const labels = await bufferLabels(gpu.device, () =>
      expectModelMatchesReference(gpu, url, { precision: 'f32', steps: STEPS, tolerance: LOGIT_TOLERANCE, salt: 11, engine: { maxWeightPartBytes: 2 * expertBytes } }),
    );
    const parts = partCounts(labels);
    for (const l of [0, 1]) for (const n of ['ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps']) expect(parts.get(`blk.${l}.${n}.weight`), `blk.${l}.${n}`).toBe(2);
  });

  it('refuses a limit smaller than one expert, naming the tensor', async () => {
    const gpu = await testGPU();
    const opened = await openModel(urls().Q8_0!);
    const { shape, dtype } = opened.tensors.get('blk.0.ffn_gate_exps.weight')!.info;
    const error = await GpuEngine.load(opened, { gpu, precision: 'f32', maxWeightPartBytes: shape[1]! * gpuBytesPerRow(dtype, shape[2]!) - 1 }).catch((e: unknown) => e);
    expect((error as WebGPUError).code).toBe('limits_too_small');
    expect((error as WebGPUError).message).toMatch(/^One expert of blk\.0\.ffn_gate_exps\.weight is \d+ bytes/);
  });
});
