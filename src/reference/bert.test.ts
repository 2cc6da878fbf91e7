/**
 * The BERT encoder's config, names and CPU reference. all-MiniLM-L6-v2's config.json reads as its
 * published shape; every HF name maps to llama.cpp's (`bert.` prefix or none; the pooler and
 * MLM head skipped). The reference follows transformers' BertModel: a one-token input, whose
 * attention is its own value row, is written out by hand here (post-norm order, biases, erf GELU);
 * attention is bidirectional (the first row depends on the last token); positions are learned;
 * the pooled vector is the L2-normalised mean of every row.
 */
import { describe, expect, it } from 'vitest';
import { erfRef } from '../kernels/gelu';
import { bertCanonicalName, bertConfigFromHF, bertConfigFromGGUF, BERT_HEAD_TENSORS, BERT_LAYER_TENSORS, type BertConfig } from '../model/bert';
import { random } from '../testing/kernel-helpers';
import { bertForward, loadBertWeights, meanPoolNormalized, type BertWeights } from './bert';

const MINILM = {
  architectures: ['BertModel'], model_type: 'bert', vocab_size: 30522, hidden_size: 384, num_hidden_layers: 6, num_attention_heads: 12,
  intermediate_size: 1536, hidden_act: 'gelu', max_position_embeddings: 512, type_vocab_size: 2, layer_norm_eps: 1e-12, position_embedding_type: 'absolute',
};

describe('BERT config and names', () => {
  it('reads all-MiniLM-L6-v2’s config.json, and the same from GGUF keys', () => {
    const c = bertConfigFromHF(MINILM);
    expect(c).toEqual({ vocabSize: 30522, hiddenSize: 384, numLayers: 6, numHeads: 12, intermediateSize: 1536, maxPositionEmbeddings: 512, typeVocabSize: 2, layerNormEps: 1e-12 });
    const meta = new Map<string, unknown>([
      ['bert.vocab_size', 30522], ['bert.embedding_length', 384], ['bert.block_count', 6], ['bert.attention.head_count', 12], ['bert.feed_forward_length', 1536],
      ['bert.context_length', 512], ['tokenizer.ggml.token_type_count', 2], ['bert.attention.layer_norm_epsilon', 1e-12],
    ]);
    expect(bertConfigFromGGUF(meta)).toEqual(c);
  });

  it('refuses the activations and position types it does not run, naming the key', () => {
    expect(() => bertConfigFromHF({ ...MINILM, hidden_act: 'gelu_new' })).toThrow(expect.objectContaining({ field: 'hidden_act' }));
    expect(() => bertConfigFromHF({ ...MINILM, position_embedding_type: 'relative_key' })).toThrow(expect.objectContaining({ field: 'position_embedding_type' }));
  });

  it('maps HF names to llama.cpp’s, with or without the bert. prefix, and skips the pooler', () => {
    expect(bertCanonicalName('embeddings.word_embeddings.weight')).toBe('token_embd.weight');
    expect(bertCanonicalName('bert.embeddings.token_type_embeddings.weight')).toBe('token_types.weight');
    expect(bertCanonicalName('encoder.layer.3.attention.self.query.bias')).toBe('blk.3.attn_q.bias');
    expect(bertCanonicalName('encoder.layer.0.attention.output.LayerNorm.weight')).toBe('blk.0.attn_output_norm.weight');
    expect(bertCanonicalName('encoder.layer.5.output.LayerNorm.bias')).toBe('blk.5.layer_output_norm.bias');
    expect(bertCanonicalName('encoder.layer.1.intermediate.dense.weight')).toBe('blk.1.ffn_up.weight');
    expect(bertCanonicalName('pooler.dense.weight')).toBeNull();
    const names = [...BERT_HEAD_TENSORS, ...BERT_LAYER_TENSORS].flatMap((t) => [t.hf, t.gguf]);
    expect(new Set(names).size).toBe(names.length);
  });
});

const TINY: BertConfig = { vocabSize: 20, hiddenSize: 8, numLayers: 2, numHeads: 2, intermediateSize: 16, maxPositionEmbeddings: 16, typeVocabSize: 2, layerNormEps: 1e-12 };

/** Seeded weights by llama.cpp name: norms about 1, the rest about ±0.5. */
async function tinyWeights(c: BertConfig): Promise<BertWeights> {
  let seed = 1;
  return loadBertWeights(c, async (name) => {
    const row = [...BERT_HEAD_TENSORS, ...BERT_LAYER_TENSORS].find((t) => name.endsWith(t.gguf))!;
    const v = random(row.shape(c).reduce((a, b) => a * b, 1), seed++, 0.5);
    return /norm\.weight$/.test(name) ? v.map((x) => 1 + x / 5) : v;
  });
}

describe('the BERT reference', () => {
  it('computes a one-token input as BertModel does, written out by hand', async () => {
    const c = { ...TINY, numLayers: 1 };
    const w = await tinyWeights(c);
    const l = w.layers[0]!;
    const H = c.hiddenSize;
    const ln = (x: number[], g: Float32Array, b: Float32Array) => {
      const m = x.reduce((s, v) => s + v, 0) / x.length;
      const sd = Math.sqrt(x.reduce((s, v) => s + (v - m) ** 2, 0) / x.length + c.layerNormEps);
      return x.map((v, i) => ((v - m) / sd) * g[i]! + b[i]!);
    };
    const dense = (x: number[], W: Float32Array, b: Float32Array) => Array.from(b, (bn, n) => x.reduce((s, v, k) => s + v * W[n * x.length + k]!, bn));
    const id = 7;
    const e = Array.from({ length: H }, (_, i) => w.wordEmbd![id * H + i]! + w.posEmbd![i]! + w.typeEmbd![i]!);
    let x = ln(e, w.embdNorm!, w.embdNormBias!);
    // One token: softmax over one key is 1, so attention gives its value row.
    const attn = dense(dense(x, l.v!, l.vBias!), l.o!, l.oBias!);
    x = ln(x.map((v, i) => v + attn[i]!), l.attnNorm!, l.attnNormBias!);
    const h = dense(x, l.up!, l.upBias!).map((v) => 0.5 * v * (1 + erfRef(v / Math.SQRT2)));
    const f = dense(h, l.down!, l.downBias!);
    x = ln(x.map((v, i) => v + f[i]!), l.ffnNorm!, l.ffnNormBias!);
    const got = bertForward(c, w, [id]);
    x.forEach((v, i) => expect(got[i]).toBeCloseTo(v, 5));
  });

  it('attends both ways, learns positions, and pools the mean of every row', async () => {
    const w = await tinyWeights(TINY);
    const H = TINY.hiddenSize;
    const a = bertForward(TINY, w, [2, 5, 9, 3]);
    const b = bertForward(TINY, w, [2, 5, 9, 4]);
    // The first row sees the last token.
    expect(Math.max(...a.subarray(0, H).map((v, i) => Math.abs(v - b[i]!)))).toBeGreaterThan(1e-3);
    // Swapping two tokens changes the pooled vector (positions are learned, not a bag of words).
    const pooled = meanPoolNormalized(a, 4, H);
    const swapped = meanPoolNormalized(bertForward(TINY, w, [2, 9, 5, 3]), 4, H);
    expect(Math.max(...pooled.map((v, i) => Math.abs(v - swapped[i]!)))).toBeGreaterThan(1e-3);
    const mean = Array.from({ length: H }, (_, i) => [0, 1, 2, 3].reduce((s, t) => s + a[t * H + i]!, 0) / 4);
    const n = Math.hypot(...mean);
    mean.forEach((m, i) => expect(pooled[i]).toBeCloseTo(m / n, 6));
    expect(Math.hypot(...pooled)).toBeCloseTo(1, 6);
  });

  it('refuses an input past the learned positions', async () => {
    const w = await tinyWeights(TINY);
    expect(() => bertForward(TINY, w, new Array(17).fill(1))).toThrow(RangeError);
  });
});
