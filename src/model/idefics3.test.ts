import { describe, expect, it } from 'vitest';
import { configFromHF } from './config-hf';
import { canonicalName } from './tensors';

// HuggingFaceTB/SmolVLM-256M-Instruct's config.json, as far as the text model goes (its text_config
// states these; the vision side is read by model/vision-open.ts).
const SMOLVLM_256M = {
  architectures: ['Idefics3ForConditionalGeneration'],
  model_type: 'idefics3',
  scale_factor: 4,
  image_token_id: 49190,
  text_config: {
    model_type: 'llama',
    hidden_size: 576,
    intermediate_size: 1536,
    num_hidden_layers: 30,
    num_attention_heads: 9,
    num_key_value_heads: 3,
    vocab_size: 49280,
    max_position_embeddings: 8192,
    rope_theta: 100000,
    rms_norm_eps: 1e-5,
  },
  vision_config: { model_type: 'idefics3_vision', hidden_size: 768, image_size: 512, patch_size: 16, num_hidden_layers: 12 },
};

describe('Idefics3 (SmolVLM) HF folders: the text model', () => {
  it('reads text_config as a Llama model over LlamaConfig defaults', () => {
    const c = configFromHF(SMOLVLM_256M);
    expect(c.arch).toBe('llama');
    expect([c.hiddenSize, c.intermediateSize, c.numLayers, c.numHeads, c.numKvHeads, c.headDim, c.vocabSize]).toEqual([576, 1536, 30, 9, 3, 64, 49280]);
    expect([c.ropeTheta, c.rmsNormEps, c.maxPositionEmbeddings, c.tieWordEmbeddings]).toEqual([100000, 1e-5, 8192, false]);
  });

  it('names the text tensors under model.text_model. as the text model, and skips the tower', () => {
    expect(canonicalName('model.text_model.layers.3.self_attn.q_proj.weight')).toBe('blk.3.attn_q.weight');
    expect(canonicalName('model.text_model.embed_tokens.weight')).toBe('token_embd.weight');
    expect(canonicalName('model.text_model.norm.weight')).toBe('output_norm.weight');
    expect(canonicalName('lm_head.weight')).toBe('output.weight');
    expect(canonicalName('model.vision_model.encoder.layers.0.mlp.fc1.weight')).toBeNull();
    expect(canonicalName('model.connector.modality_projection.proj.weight')).toBeNull();
  });
});
