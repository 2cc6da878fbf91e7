/** A model's generation_config.json: its sampling defaults, read by the API and the backends. */

/** generation_config.json's sampling defaults (HF names). */
export interface GenerationDefaults {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
}
