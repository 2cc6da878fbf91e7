/**
 * Typed model errors. `code` is stable (for the API layer and the demo); `field` names the config
 * key or tensor at fault so a message can point at the exact line of config.json or the tensor.
 */
export type ModelErrorCode =
  | 'unsupported_arch' // model_type / general.architecture we do not run
  | 'missing_field' // a required config.json / GGUF metadata key is absent
  | 'invalid_field' // a key is present but its value is unusable
  | 'missing_tensor' // an expected weight is not in the file
  | 'tensor_shape' // a weight's shape differs from what the config implies
  | 'unsupported_dtype' // a weight is stored in a type the loader cannot read
  | 'missing_file' // a required file of a Hugging Face folder is absent
  | 'bad_location'; // openModel() was given something it cannot open

export class ModelError extends Error {
  override readonly name = 'ModelError';
  constructor(
    readonly code: ModelErrorCode,
    message: string,
    /** The config key, metadata key, tensor or file the error is about. */
    readonly field?: string,
  ) {
    super(message);
  }

  toJSON(): { name: string; code: ModelErrorCode; message: string; field?: string } {
    return { name: this.name, code: this.code, message: this.message, field: this.field };
  }
}
