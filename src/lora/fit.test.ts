import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../model/config';
import { configFromHF } from '../model/config-hf';
import { permuteQK } from '../model/qk-rows';
import { fitLora } from './fit';
import { LoraError, type LoraAdapter, type LoraWeight } from './types';

// hidden 8, 2 heads of 4 (q: 8 rows), 1 kv head (k/v: 4 rows), intermediate 16, 2 layers
const hf: ModelConfig = configFromHF({
  model_type: 'llama',
  vocab_size: 8,
  hidden_size: 8,
  intermediate_size: 16,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  rms_norm_eps: 1e-5,
  max_position_embeddings: 64,
});
const gguf: ModelConfig = { ...hf, ropeStyle: 'interleaved' };

const seq = (n: number) => Float32Array.from({ length: n }, (_, i) => i);
const w = (x: Partial<LoraWeight> & Pick<LoraWeight, 'target' | 'outFeatures' | 'inFeatures'>): LoraWeight => ({
  layer: 0,
  rank: 1,
  scale: 1,
  a: seq(x.inFeatures),
  b: seq(x.outFeatures),
  ...x,
});
const adapter = (weights: LoraWeight[], extra: Partial<LoraAdapter> = {}): LoraAdapter => ({ name: 'a', file: 'a/adapter_model.safetensors', format: 'peft', qkRows: 'halves', vHeadOrder: 'grouped', weights, ...extra });

function failure(f: () => unknown): LoraError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(LoraError);
    return e as LoraError;
  }
  throw new Error('did not throw');
}

describe('fitLora', () => {
  it('passes an adapter whose shapes match the base, as it is', () => {
    const a = adapter([w({ target: 'q', outFeatures: 8, inFeatures: 8 }), w({ target: 'down', outFeatures: 8, inFeatures: 16, layer: 1 })]);
    expect(fitLora(a, hf)).toBe(a);
  });

  it('permutes q/k B rows into a llama GGUF base’s order (and back), leaving A and other targets alone', () => {
    const q = w({ target: 'q', outFeatures: 8, inFeatures: 8 });
    const k = w({ target: 'k', outFeatures: 4, inFeatures: 8 });
    const v = w({ target: 'v', outFeatures: 4, inFeatures: 8 });
    const fitted = fitLora(adapter([q, k, v]), gguf);
    expect(fitted.qkRows).toBe('interleaved');
    expect(fitted.weights[0]!.b).toEqual(permuteQK(q.b, 8, 2));
    expect(fitted.weights[1]!.b).toEqual(permuteQK(k.b, 4, 1));
    expect(fitted.weights[0]!.a).toBe(q.a);
    expect(fitted.weights[2]).toBe(v);
    const back = fitLora(fitted, hf);
    expect(back.weights[0]!.b).toEqual(q.b);
    expect(back.weights[1]!.b).toEqual(k.b);
  });

  it('refuses shapes of another base, naming the layer, the target and both shapes', () => {
    const e = failure(() => fitLora(adapter([w({ target: 'gate', outFeatures: 32, inFeatures: 8 })]), hf));
    expect(e.code).toBe('tensor_shape');
    expect(e.file).toBe('a/adapter_model.safetensors');
    expect(e.message).toContain('layer 0 gate');
    expect(e.message).toContain('[16, 8]');
    expect(e.message).toContain('another base model');
  });

  it('refuses a layer the base does not have', () => {
    const e = failure(() => fitLora(adapter([w({ target: 'v', outFeatures: 4, inFeatures: 8, layer: 2 })]), hf));
    expect(e.code).toBe('wrong_base');
    expect(e.message).toContain('layer 2');
  });

  it('refuses a GGUF adapter of another architecture', () => {
    const e = failure(() => fitLora(adapter([], { format: 'gguf', ggufArch: 'qwen2' }), hf));
    expect(e.code).toBe('wrong_base');
    expect(e.message).toContain('"qwen2"');
  });

  it('moves a DeltaNet’s value heads into a GGUF base’s tiled order: B rows of dn_qkv’s v, dn_z, dn_b, dn_a, A columns of dn_out', () => {
    // Qwen3.5-like: a DeltaNet on layer 0, 2 key heads and 4 value heads of 1 (qkv: 2 + 2 + 4 rows); layer 1 attention.
    const d = { layers: [0], convKernel: 4, numKHeads: 2, numVHeads: 4, headKDim: 1, headVDim: 1, vHeadOrder: 'tiled', aStored: 'neg' } as const;
    const hybrid: ModelConfig = { ...hf, deltaNet: d };
    const qkv = w({ target: 'dn_qkv', outFeatures: 8, inFeatures: 8 });
    const z = w({ target: 'dn_z', outFeatures: 4, inFeatures: 8 });
    const out = w({ target: 'dn_out', outFeatures: 8, inFeatures: 4 });
    const fitted = fitLora(adapter([qkv, z, out]), hybrid);
    expect(fitted.vHeadOrder).toBe('tiled');
    // grouped heads 0 1 | 2 3 (key heads 0 0 1 1) tiled as 0 2 1 3
    expect([...fitted.weights[0]!.b]).toEqual([0, 1, 2, 3, 4, 6, 5, 7]);
    expect([...fitted.weights[1]!.b]).toEqual([0, 2, 1, 3]);
    expect([...fitted.weights[2]!.a]).toEqual([0, 2, 1, 3]);
    expect(fitted.weights[2]!.b).toBe(out.b);
    expect(fitLora(fitted, { ...hybrid, deltaNet: { ...d, vHeadOrder: 'grouped' } }).weights.map((x) => [...x.a, ...x.b])).toEqual([qkv, z, out].map((x) => [...x.a, ...x.b]));
    // attention's q on the DeltaNet layer, the DeltaNet's z on the attention layer: refused
    expect(failure(() => fitLora(adapter([w({ target: 'q', outFeatures: 8, inFeatures: 8 })]), hybrid)).message).toContain("layer 0 q: this model has no q matrix to adapt (layer 0's token mixer is deltanet)");
    expect(failure(() => fitLora(adapter([{ ...z, layer: 1 }]), hybrid)).code).toBe('unsupported_target');
  });

  it('refuses the FFN targets of a mixture-of-experts base (it has no dense gate/up/down), keeping attention targets', () => {
    const moe: ModelConfig = { ...hf, moe: { numExperts: 4, numExpertsUsed: 2, expertIntermediateSize: 16, normTopkProb: true, sharedExpertIntermediateSize: null, denseLayers: [] } };
    expect(fitLora(adapter([w({ target: 'v', outFeatures: 4, inFeatures: 8 })]), moe).weights).toHaveLength(1);
    const e = failure(() => fitLora(adapter([w({ target: 'up', outFeatures: 16, inFeatures: 8 })]), moe));
    expect(e.code).toBe('unsupported_target');
    expect(e.message).toContain('layer 0 up: this model has no up matrix');
  });
});
