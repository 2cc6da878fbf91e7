/**
 * The models the page offers. The bundled one is generated at `npm start` (tools/bundle-demo-model.ts)
 * and needs no network; the others are small instruction models known to load.
 *
 * The engine reads F32/F16/BF16, Q8_0, Q4_0, Q4_K and Q6_K. A Q4_K_M file only uses those when
 * the model's rows are multiples of 256; for models whose hidden size is not (Qwen2.5-0.5B: 896,
 * SmolLM2-360M: 960) llama.cpp's K-quant files fall back to Q5_0 for some tensors, so those are
 * offered as Q8_0, which is pure. Every repo/file path below was checked against public code that
 * downloads it (November 2026); none could be fetched from here (no network).
 */

export interface CatalogueModel {
  /** What the user sees. */
  label: string;
  /** What `createEngine({ model })` gets: a Hugging Face repo path or a URL. */
  model: string;
  /** Download size, roughly. */
  size: string;
  note?: string;
}

/** Served by Vite from demo/public/ (generated, git-ignored). */
export const BUNDLED_MODEL_PATH = '/models/tiny-qwen3/gguf/model-Q8_0.gguf';
/** A LoRA adapter for it (GGUF, rank 8 on every matrix; random too), for the adapter panel offline. */
export const BUNDLED_LORA_PATH = '/models/tiny-qwen3/lora/all-r8-rslora.gguf';

export const BUNDLED: CatalogueModel = {
  label: 'Tiny Qwen3 test model',
  model: BUNDLED_MODEL_PATH,
  size: '1.4 MB',
  note: 'random weights: it prints gibberish, but every part of the engine runs',
};

export const KNOWN_MODELS: readonly CatalogueModel[] = [
  {
    label: 'Qwen3 0.6B · Q8_0',
    model: 'Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf',
    size: '0.6 GB',
    note: 'thinks before answering (reasoning shown folded)',
  },
  {
    label: 'Qwen2.5 0.5B Instruct · Q8_0',
    model: 'Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q8_0.gguf',
    size: '0.7 GB',
  },
  {
    label: 'Llama 3.2 1B Instruct · Q4_K_M',
    model: 'bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_K_M.gguf',
    size: '0.8 GB',
  },
  {
    label: 'SmolLM2 360M Instruct · Q8_0',
    model: 'HuggingFaceTB/SmolLM2-360M-Instruct-GGUF/smollm2-360m-instruct-q8_0.gguf',
    size: '0.4 GB',
  },
  {
    label: 'SmolLM2 1.7B Instruct · Q4_K_M',
    model: 'HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF/smollm2-1.7b-instruct-q4_k_m.gguf',
    size: '1.1 GB',
  },
  {
    label: 'Qwen2.5 0.5B Instruct · safetensors',
    model: 'Qwen/Qwen2.5-0.5B-Instruct',
    size: '1 GB',
    note: 'a Hugging Face folder: config.json, tokenizer.json, model.safetensors',
  },
];
