/**
 * The models the page offers. The bundled one is generated at `npm start` (tools/bundle-demo-model.ts)
 * and needs no network; the others are small instruction models known to load.
 *
 * The engine reads every weight type llama.cpp's usual presets write (F32/F16/BF16, Q8_0, the
 * legacy Q4/Q5 types, the K-quants, IQ4_NL/IQ4_XS, MXFP4), so a Q4_K_M file loads even when the
 * model's rows are not multiples of 256 (Qwen2.5-0.5B: 896, SmolLM2-360M: 960) and llama.cpp's
 * quantiser fell back to Q5_0 and Q8_0 for most tensors. Qwen2.5-0.5B's Q4_K_M is Qwen's own file;
 * SmolLM2-360M's is bartowski's (HuggingFaceTB publishes only Q8_0 for it), the one most apps
 * download. Every repo/file path below was checked against public code that downloads it
 * (November 2026); none could be fetched from here (no network).
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
    label: 'Qwen2.5 0.5B Instruct · Q4_K_M',
    model: 'Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf',
    size: '0.5 GB',
    note: 'mostly Q5_0 and Q8_0: llama.cpp’s fallbacks for rows of 896',
  },
  {
    label: 'Llama 3.2 1B Instruct · Q4_K_M',
    model: 'bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_K_M.gguf',
    size: '0.8 GB',
  },
  {
    label: 'SmolLM2 360M Instruct · Q4_K_M',
    model: 'bartowski/SmolLM2-360M-Instruct-GGUF/SmolLM2-360M-Instruct-Q4_K_M.gguf',
    size: '0.27 GB',
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
