import { describe, expect, it } from 'vitest';
import { configFromHF } from '../model/config-hf';
import { mergeLora, mergeOne } from './merge';
import { moduleRankAlpha, parsePeftConfig } from './peft';
import type { LoraAdapter, LoraWeight } from './types';

const weight = (w: Partial<LoraWeight>): LoraWeight => ({ layer: 0, target: 'v', rank: 1, inFeatures: 1, outFeatures: 1, a: new Float32Array(1), b: new Float32Array(1), scale: 1, ...w });

describe('mergeOne', () => {
  it('adds scale · B · A to W (a hand-computed 3x2 case of rank 2)', () => {
    // W [3, 2], B [3, 2], A [2, 2], scale 0.5
    const W = Float32Array.of(1, 2, 3, 4, 5, 6);
    const B = Float32Array.of(1, 0, 0, 1, 1, 1);
    const A = Float32Array.of(2, 4, 6, 8);
    // B·A = [[2, 4], [6, 8], [8, 12]]; · 0.5 = [[1, 2], [3, 4], [4, 6]]
    const got = mergeOne(W, weight({ rank: 2, inFeatures: 2, outFeatures: 3, a: A, b: B, scale: 0.5 }));
    expect(Array.from(got)).toEqual([2, 4, 6, 8, 9, 12]);
  });

  it('accumulates in float64: a sum float32 would round away survives', () => {
    // 2^24 + 1 rounds back to 2^24 in float32, leaving 0 after the last term; float64 keeps the 1
    const a = Float32Array.of(1, 1, 1);
    const b = Float32Array.of(2 ** 24, 1, -(2 ** 24));
    const got = mergeOne(Float32Array.of(0), weight({ rank: 3, a, b, scale: 1 }));
    expect(got[0]).toBe(1);
  });
});

describe('PEFT scaling', () => {
  const scaleOf = (json: Record<string, unknown>, module = 'model.layers.0.self_attn.q_proj') => {
    const c = parsePeftConfig(json, 'adapter_config.json');
    const { r, alpha } = moduleRankAlpha(c, module, 'adapter_config.json');
    return c.useRslora ? alpha / Math.sqrt(r) : alpha / r;
  };

  it('is lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora', () => {
    expect(scaleOf({ r: 8, lora_alpha: 16 })).toBe(2);
    expect(scaleOf({ r: 16, lora_alpha: 8, use_rslora: true })).toBe(2);
    // PEFT's defaults: r 8, lora_alpha 8
    expect(scaleOf({})).toBe(1);
  });

  it('takes r and alpha from rank_pattern / alpha_pattern keys that match the module name', () => {
    const json = { r: 8, lora_alpha: 16, rank_pattern: { 'layers.1.self_attn.q_proj': 4 }, alpha_pattern: { v_proj: 2 } };
    expect(scaleOf(json, 'model.layers.1.self_attn.q_proj')).toBe(4); // 16 / 4
    expect(scaleOf(json, 'model.layers.11.self_attn.q_proj')).toBe(2); // no match: "1" must follow a dot
    expect(scaleOf(json, 'model.layers.0.self_attn.v_proj')).toBe(0.25); // 2 / 8
  });
});

describe('mergeLora', () => {
  const config = configFromHF({
    model_type: 'llama',
    vocab_size: 8,
    hidden_size: 4,
    intermediate_size: 8,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    num_key_value_heads: 1,
    rms_norm_eps: 1e-5,
    max_position_embeddings: 64,
  });

  it('replaces exactly the adapted matrices and leaves every other array as it was', () => {
    const base = new Map([
      ['blk.0.attn_v.weight', new Float32Array(2 * 4)],
      ['blk.0.attn_q.weight', new Float32Array(4 * 4)],
    ]);
    const adapter: LoraAdapter = {
      name: 'x',
      file: 'x/adapter_model.safetensors',
      format: 'peft',
      qkRows: 'halves',
      vHeadOrder: 'grouped',
      weights: [weight({ target: 'v', rank: 1, inFeatures: 4, outFeatures: 2, a: Float32Array.of(1, 2, 3, 4), b: Float32Array.of(1, -1), scale: 2 })],
    };
    const merged = mergeLora(config, base, adapter);
    expect(merged.get('blk.0.attn_q.weight')).toBe(base.get('blk.0.attn_q.weight'));
    expect(Array.from(merged.get('blk.0.attn_v.weight')!)).toEqual([2, 4, 6, 8, -2, -4, -6, -8]);
    expect(Array.from(base.get('blk.0.attn_v.weight')!)).toEqual(new Array(8).fill(0));
  });
});
