import { describe, expect, it } from 'vitest';
import { PLAIN_MATH, type ModelConfig } from './config';
import { ModelError } from './errors';
import {
  assembleWeights,
  canonicalName,
  expectedTensors,
  expertHfName,
  expertPiece,
  HEAD_TENSORS,
  isMatrix,
  LAYER_TENSORS,
  layerRow,
  modelTensors,
  TAIL_TENSORS,
  validateTensors,
  type TensorRow,
} from './tensors';

const config: ModelConfig = {
  arch: 'qwen2',
  vocabSize: 10,
  hiddenSize: 8,
  intermediateSize: 12,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 2,
  rmsNormEps: 1e-6,
  ropeTheta: 10000,
  ropeScaling: null,
  ropeStyle: 'neox',
  maxPositionEmbeddings: 64,
  tieWordEmbeddings: false,
  attentionBias: true,
  qkNorm: false,
  slidingWindow: null,
  noRopeLayers: [],
  qkNormScope: 'head',
  normPlacement: 'pre',
  ...PLAIN_MATH,
  bosTokenId: null,
  eosTokenIds: [],
};

function shapes(c: ModelConfig): Map<string, { shape: number[] }> {
  return new Map(expectedTensors(c).filter((t) => !t.optional).map((t) => [t.name, { shape: t.shape }]));
}

describe('canonical tensor names', () => {
  it('maps Hugging Face names to llama.cpp names', () => {
    expect(canonicalName('model.embed_tokens.weight')).toBe('token_embd.weight');
    expect(canonicalName('model.norm.weight')).toBe('output_norm.weight');
    expect(canonicalName('lm_head.weight')).toBe('output.weight');
    expect(canonicalName('model.layers.3.input_layernorm.weight')).toBe('blk.3.attn_norm.weight');
    expect(canonicalName('model.layers.0.self_attn.q_proj.weight')).toBe('blk.0.attn_q.weight');
    expect(canonicalName('model.layers.0.self_attn.k_proj.bias')).toBe('blk.0.attn_k.bias');
    expect(canonicalName('model.layers.0.self_attn.o_proj.weight')).toBe('blk.0.attn_output.weight');
    expect(canonicalName('model.layers.12.self_attn.q_norm.weight')).toBe('blk.12.attn_q_norm.weight');
    expect(canonicalName('model.layers.0.post_attention_layernorm.weight')).toBe('blk.0.ffn_norm.weight');
    expect(canonicalName('model.layers.0.mlp.gate_proj.weight')).toBe('blk.0.ffn_gate.weight');
    expect(canonicalName('model.layers.0.mlp.up_proj.weight')).toBe('blk.0.ffn_up.weight');
    expect(canonicalName('model.layers.0.mlp.down_proj.weight')).toBe('blk.0.ffn_down.weight');
  });

  it("maps fused Phi-3 matrices to llama.cpp's fused names (split at load)", () => {
    expect(canonicalName('model.layers.2.self_attn.qkv_proj.weight')).toBe('blk.2.attn_qkv.weight');
    expect(canonicalName('model.layers.2.mlp.gate_up_proj.weight')).toBe('blk.2.ffn_up.weight');
  });

  it("maps Granite 4.0's dense MLP (the hybrid family's shared one) to llama.cpp's names: gate/up fused, split at load", () => {
    const granite: ModelConfig = { ...config, arch: 'granite' };
    expect(canonicalName('model.layers.3.shared_mlp.input_linear.weight', granite)).toBe('blk.3.ffn_up.weight');
    expect(canonicalName('model.layers.3.shared_mlp.output_linear.weight', granite)).toBe('blk.3.ffn_down.weight');
    // Only on the family that has such checkpoints.
    expect(canonicalName('model.layers.3.shared_mlp.input_linear.weight', config)).toBeNull();
  });

  it("reads a multimodal checkpoint's text tensors in both transformers layouts and skips its vision tower", () => {
    expect(canonicalName('language_model.model.layers.1.self_attn.q_proj.weight')).toBe('blk.1.attn_q.weight');
    expect(canonicalName('language_model.model.embed_tokens.weight')).toBe('token_embd.weight');
    expect(canonicalName('language_model.lm_head.weight')).toBe('output.weight');
    expect(canonicalName('model.language_model.layers.1.mlp.down_proj.weight')).toBe('blk.1.ffn_down.weight');
    expect(canonicalName('model.language_model.norm.weight')).toBe('output_norm.weight');
    expect(canonicalName('vision_tower.vision_model.embeddings.patch_embedding.weight')).toBeNull();
    expect(canonicalName('multi_modal_projector.mm_input_projection_weight')).toBeNull();
  });

  it('returns null for tensors the model does not use', () => {
    expect(canonicalName('model.layers.0.self_attn.rotary_emb.inv_freq')).toBeNull();
    expect(canonicalName('vision_tower.weight')).toBeNull();
  });
});

describe('a mixture-of-experts model with dense layers', () => {
  it('gives its dense layers the dense MLP and the others the experts', () => {
    const mixed: ModelConfig = { ...config, moe: { numExperts: 4, numExpertsUsed: 2, expertIntermediateSize: 6, normTopkProb: false, sharedExpertIntermediateSize: 10, denseLayers: [0] } };
    const names = new Set(expectedTensors(mixed).map((t) => t.name));
    for (const n of ['ffn_gate', 'ffn_up', 'ffn_down']) {
      expect(names.has(`blk.0.${n}.weight`)).toBe(true);
      expect(names.has(`blk.1.${n}.weight`)).toBe(false);
      expect(names.has(`blk.0.${n}_exps.weight`)).toBe(false);
      expect(names.has(`blk.1.${n}_exps.weight`)).toBe(true);
      expect(names.has(`blk.1.${n}_shexp.weight`)).toBe(true);
    }
    expect(names.has('blk.0.ffn_gate_inp.weight')).toBe(false);
    expect(names.has('blk.0.ffn_gate_inp_shexp.weight')).toBe(false);
    // Both kinds' HF names read back.
    expect(canonicalName('model.layers.0.mlp.gate_proj.weight', mixed)).toBe('blk.0.ffn_gate.weight');
    expect(canonicalName('model.layers.1.mlp.gate.weight', mixed)).toBe('blk.1.ffn_gate_inp.weight');
  });
});

describe('expected tensors', () => {
  it('lists [out, in] shapes, biases when attentionBias, and output.weight unless tied', () => {
    const byName = shapes(config);
    expect(byName.get('token_embd.weight')!.shape).toEqual([10, 8]);
    expect(byName.get('blk.1.attn_q.weight')!.shape).toEqual([8, 8]);
    expect(byName.get('blk.1.attn_k.weight')!.shape).toEqual([4, 8]);
    expect(byName.get('blk.1.attn_v.bias')!.shape).toEqual([4]);
    expect(byName.get('blk.1.attn_output.weight')!.shape).toEqual([8, 8]);
    expect(byName.get('blk.1.ffn_down.weight')!.shape).toEqual([8, 12]);
    expect(byName.get('output.weight')!.shape).toEqual([10, 8]);
    expect(byName.has('blk.0.attn_q_norm.weight')).toBe(false);
    expect(shapes({ ...config, tieWordEmbeddings: true }).has('output.weight')).toBe(false);
    expect(shapes({ ...config, qkNorm: true }).get('blk.0.attn_k_norm.weight')!.shape).toEqual([2]);
    // OLMo 2 norms the whole q (4 heads of 2) and the whole k (2 kv heads of 2).
    const full = shapes({ ...config, qkNorm: true, qkNormScope: 'full' });
    expect([full.get('blk.0.attn_q_norm.weight')!.shape, full.get('blk.0.attn_k_norm.weight')!.shape]).toEqual([[8], [4]]);
  });

  it('accepts a complete file and ignores unknown extra tensors', () => {
    const found = shapes(config);
    found.set('something.else', { shape: [3] });
    expect(() => validateTensors(config, found)).not.toThrow();
  });

  it('names the tensor, the expected and the found shape when a shape is wrong', () => {
    const found = shapes(config);
    found.set('blk.1.ffn_up.weight', { shape: [12, 9] });
    expect(() => validateTensors(config, found)).toThrow(
      expect.objectContaining({ code: 'tensor_shape', field: 'blk.1.ffn_up.weight', message: 'tensor blk.1.ffn_up.weight has shape [12, 9], expected [12, 8]' }),
    );
  });

  it('names a missing tensor', () => {
    const found = shapes(config);
    found.delete('blk.0.attn_k.bias');
    try {
      validateTensors(config, found);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ModelError);
      expect((e as ModelError).code).toBe('missing_tensor');
      expect((e as ModelError).message).toBe('tensor blk.0.attn_k.bias is missing (expected shape [4])');
    }
  });
});

describe('the tensor table', () => {
  const rows: readonly TensorRow[] = [...HEAD_TENSORS, ...LAYER_TENSORS, ...TAIL_TENSORS];
  // Every flag a row's condition may read, on and off.
  const configs = [false, true].flatMap((attentionBias) =>
    [false, true].flatMap((qkNorm) =>
      [false, true].flatMap((tieWordEmbeddings) =>
        (['pre', 'post', 'sandwich'] as const).flatMap((normPlacement) =>
          (['head', 'full'] as const).flatMap((qkNormScope) =>
            // dense, experts, experts with a shared one
            [null, 6, 10].map((shared): ModelConfig => ({
              ...config,
              attentionBias,
              qkNorm,
              tieWordEmbeddings,
              normPlacement,
              qkNormScope,
              moe: shared === null ? null : { numExperts: 4, numExpertsUsed: 2, expertIntermediateSize: 6, normTopkProb: false, sharedExpertIntermediateSize: shared === 6 ? null : shared, denseLayers: [] },
            })),
          ),
        ),
      ),
    ),
  );

  it('names each tensor once per format and each field once among the rows of one config', () => {
    for (const table of [[...HEAD_TENSORS, ...TAIL_TENSORS], LAYER_TENSORS] as const) {
      const list = table as readonly TensorRow[];
      for (const key of ['gguf', 'hf', 'field'] as const) {
        for (const c of configs) {
          const names = list.filter((r) => !r.when || r.when(c)).map((r) => r[key]).filter((n) => n !== null && n !== undefined);
          expect(new Set(names).size, key).toBe(names.length);
        }
      }
    }
  });

  it.each(rows.map((r) => [r.gguf, r] as const))('%s: its shape fits its kind in every config that has it', (_, row) => {
    for (const c of configs.filter((c) => !row.when || row.when(c))) {
      const shape = row.shape(c);
      // Experts stacked outermost: [experts, out, in].
      expect(shape.length).toBe(isMatrix(row.kind) ? (row.experts ? 3 : 2) : 1);
      if (row.experts) expect(shape[0]).toBe(c.moe!.numExperts);
      expect(shape.every((d) => Number.isInteger(d) && d > 0)).toBe(true);
      // RoPE rotates q and k heads: their rows are whole heads.
      if (row.rotary) expect(shape[0]).toBe((row.rotary === 'q' ? c.numHeads : c.numKvHeads) * c.headDim);
    }
  });

  it('maps every row\'s Hugging Face name to its canonical name and back to its row', () => {
    for (const r of [...HEAD_TENSORS, ...TAIL_TENSORS] as readonly TensorRow[]) if (r.hf) expect(canonicalName(r.hf)).toBe(r.gguf);
    for (const r of LAYER_TENSORS as readonly TensorRow[]) {
      if (r.experts) {
        // Each expert's HF tensor is a slice of the stacked one: not a canonical name of its own.
        const hf = expertHfName(`model.layers.7.${r.hf}`, 3);
        expect(canonicalName(hf)).toBeNull();
        expect(expertPiece(hf)).toEqual({ name: `blk.7.${r.gguf}`, expert: 3 });
      } else for (const c of configs.filter((c) => !r.when || r.when(c))) expect(canonicalName(`model.layers.7.${r.hf}`, c)).toBe(`blk.7.${r.gguf}`);
      // Rows sharing a canonical name (the pre-FFN norm under two HF names; the ssm_* tensors of
      // Qwen3.5's DeltaNet and Granite's Mamba-2, never in one config) load as one tensor.
      const shared = LAYER_TENSORS.filter((o) => o.gguf === r.gguf && o.field !== r.field).length > 0;
      const found = layerRow(`blk.7.${r.gguf}`);
      expect(found).toMatchObject({ gguf: r.gguf, kind: r.kind, ...(shared ? {} : { field: r.field }) });
      expect(found?.hfSqueezed).toBe(r.hfSqueezed);
    }
    // post_attention_layernorm: Llama's pre-FFN norm, OLMo 2's attention output norm.
    const hf = 'model.layers.2.post_attention_layernorm.weight';
    expect(canonicalName(hf)).toBe('blk.2.ffn_norm.weight');
    expect(canonicalName(hf, { ...config, normPlacement: 'post' })).toBe('blk.2.post_attention_norm.weight');
    expect(canonicalName('model.layers.2.post_feedforward_layernorm.weight', { ...config, normPlacement: 'post' })).toBe('blk.2.post_ffw_norm.weight');
    expect(canonicalName('model.layers.2.input_layernorm.weight', { ...config, normPlacement: 'post' })).toBeNull();
    // Gemma's sandwich: post_attention_layernorm is the attention output's norm there too, and
    // pre_feedforward_layernorm the pre-FFN one.
    const sandwich: ModelConfig = { ...config, normPlacement: 'sandwich' };
    expect(canonicalName(hf, sandwich)).toBe('blk.2.post_attention_norm.weight');
    expect(canonicalName('model.layers.2.pre_feedforward_layernorm.weight', sandwich)).toBe('blk.2.ffn_norm.weight');
    expect(canonicalName('model.layers.2.input_layernorm.weight', sandwich)).toBe('blk.2.attn_norm.weight');
    expect(canonicalName('model.layers.2.post_feedforward_layernorm.weight', sandwich)).toBe('blk.2.post_ffw_norm.weight');
    expect(layerRow('token_embd.weight')).toBeNull();
    expect(expertPiece('model.layers.1.mlp.experts.12.down_proj.weight')).toEqual({ name: 'blk.1.ffn_down_exps.weight', expert: 12 });
    expect(expertPiece('model.layers.1.mlp.shared_expert.down_proj.weight')).toBeNull();
    expect(canonicalName('model.layers.1.mlp.shared_expert.down_proj.weight')).toBe('blk.1.ffn_down_shexp.weight');
    expect(canonicalName('model.layers.1.mlp.gate.weight')).toBe('blk.1.ffn_gate_inp.weight');
  });

  it('expects each row exactly where its condition holds, in file order', () => {
    for (const c of configs) {
      const want = [
        ...(HEAD_TENSORS as readonly TensorRow[]).filter((r) => !r.when || r.when(c)).map((r) => r.gguf),
        ...[0, 1].flatMap((l) => (LAYER_TENSORS as readonly TensorRow[]).filter((r) => !r.when || r.when(c)).map((r) => `blk.${l}.${r.gguf}`)),
        'output_norm.weight',
        ...(c.tieWordEmbeddings ? [] : ['output.weight']),
      ];
      expect(expectedTensors(c).map((t) => t.name)).toEqual(want);
      expect(modelTensors(c).filter((t) => t.layer === 1).map((t) => t.name)).toEqual(want.filter((n) => n.startsWith('blk.1.')));
    }
  });

  it('assembles every field a config implies, optional ones when present, the embedding as the output when tied', () => {
    for (const c of configs) {
      const w = assembleWeights(c, (t) => (t.row.optional ? undefined : t.name));
      const fields = (LAYER_TENSORS as readonly TensorRow[]).filter((r) => !r.optional && (!r.when || r.when(c)));
      expect(w.layers[1]).toEqual(Object.fromEntries(fields.map((r) => [r.field, `blk.1.${r.gguf}`])));
      expect([w.tokenEmbd, w.outputNorm, w.output]).toEqual(['token_embd.weight', 'output_norm.weight', c.tieWordEmbeddings ? 'token_embd.weight' : 'output.weight']);
    }
    expect(assembleWeights(config, (t) => t.name).layers[0]!.bo).toBe('blk.0.attn_output.bias');
  });

  it('refuses to assemble without a required tensor, naming it', () => {
    expect(() => assembleWeights(config, (t) => (t.name === 'blk.1.attn_v.bias' ? undefined : t.name))).toThrow(
      expect.objectContaining({ code: 'missing_tensor', field: 'blk.1.attn_v.bias' }),
    );
  });
});

describe("Granite 4.0-H's Mamba-2 rows", () => {
  // Mamba-2 on layer 0 (4 heads of 2, 1 group, state 3, 4 taps), attention on layer 1.
  const c: ModelConfig = { ...config, arch: 'granite', attentionBias: false, mamba2: { layers: [0], convKernel: 4, numHeads: 4, headDim: 2, stateSize: 3, numGroups: 1, aStored: 'log' } };

  it('lists them on the Mamba-2 layers only, in_proj as z, xBC, dt rows, and maps HF names to llama.cpp names', () => {
    const shapes = new Map(expectedTensors(c).map((t) => [t.name, t.shape]));
    // in_proj: z (8) + xBC (8 + 2·3) + dt (4) = 26 rows; the conv over xBC's 14 channels.
    expect(shapes.get('blk.0.ssm_in.weight')).toEqual([26, 8]);
    expect(shapes.get('blk.0.ssm_conv1d.weight')).toEqual([14, 4]);
    expect(shapes.get('blk.0.ssm_conv1d.bias')).toEqual([14]);
    for (const name of ['ssm_dt.bias', 'ssm_a', 'ssm_d']) expect(shapes.get(`blk.0.${name}`)).toEqual([4]);
    expect(shapes.get('blk.0.ssm_norm.weight')).toEqual([8]);
    expect(shapes.get('blk.0.ssm_out.weight')).toEqual([8, 8]);
    expect(shapes.has('blk.0.attn_q.weight')).toBe(false);
    expect(shapes.has('blk.1.ssm_in.weight')).toBe(false);
    expect(shapes.has('blk.1.attn_q.weight')).toBe(true);
    expect(canonicalName('model.layers.0.mamba.in_proj.weight', c)).toBe('blk.0.ssm_in.weight');
    expect(canonicalName('model.layers.0.mamba.A_log', c)).toBe('blk.0.ssm_a');
    expect(canonicalName('model.layers.0.mamba.conv1d.bias', c)).toBe('blk.0.ssm_conv1d.bias');
  });
});
