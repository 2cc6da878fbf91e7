/**
 * `POST /v1/embeddings`: the request as a field table in OpenAI's field order, its reading, and
 * the response shape.
 */
import { invalid } from '../errors';
import { asBody, custom, field, int, oneOf, readFields, str, type FieldsOf } from './field';

/** One input: a text (the tokenizer adds the model's special tokens) or token ids (used as given). */
export type EmbeddingInput = string | number[];

export const EMBEDDING_FIELDS = {
  input: field(custom(readInput), {
    required: true,
    doc: 'A string, a list of strings, a list of token ids or a list of token-id lists; none of them empty. Ids are used as given (no special tokens added).',
  }),
  model: field(str, { required: true, doc: 'The model id; `"default"` is the only loaded model. It must be an embedding model.' }),
  dimensions: field(int({ min: 1 }), { doc: "Keep the first d values of each embedding, then L2-normalise again (at most the model's size)." }),
  encoding_format: field(oneOf(['float', 'base64'] as const), { default: 'float', doc: '`float`: lists of numbers; `base64`: little-endian float32 bytes, base64 (what the `openai` SDKs ask for).' }),
  user: field(str, { doc: 'An end-user id; accepted and ignored.' }),
};

export type EmbeddingRequest = FieldsOf<typeof EMBEDDING_FIELDS>;

/** Validates a parsed JSON body into an `EmbeddingRequest`; throws a 400 naming the field. */
export function parseEmbeddingRequest(raw: unknown): EmbeddingRequest {
  return readFields(EMBEDDING_FIELDS, asBody(raw));
}

const isId = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;

/** The input forms as a list of inputs: a string or one id list is one input; a list of strings or of id lists is a batch. */
function readInput(v: unknown, param: string): EmbeddingInput[] {
  const bad = () => invalid(param, `${param} must be a string, a list of strings, a list of token ids or a list of token-id lists`);
  if (typeof v === 'string') {
    if (v.length === 0) throw invalid(param, `${param} must not be an empty string`);
    return [v];
  }
  if (!Array.isArray(v)) throw bad();
  if (v.length === 0) throw invalid(param, `${param} must not be an empty list`);
  let list: EmbeddingInput[];
  if (v.every((x) => typeof x === 'string')) list = v as string[];
  else if (v.every(isId)) list = [v as number[]];
  else if (v.every((x) => Array.isArray(x) && x.every(isId))) list = v as number[][];
  else throw bad();
  const empty = list.findIndex((x) => x.length === 0);
  if (empty >= 0) throw invalid(param, `${param}[${empty}] must not be empty`);
  return list;
}

// ---------------------------------------------------------------------------------------------
// Response

export interface EmbeddingData {
  object: 'embedding';
  index: number;
  /** The vector, or its little-endian float32 bytes as base64 (`encoding_format: "base64"`). */
  embedding: number[] | string;
}

export interface EmbeddingResponse {
  object: 'list';
  data: EmbeddingData[];
  model: string;
  /** Tokens of every input, special tokens included. */
  usage: { prompt_tokens: number; total_tokens: number };
}
