/**
 * OpenAI's Responses request as the chat completion request the rest of the API already serves:
 * `input` (a string or items) and `instructions` become messages, `text.format` becomes
 * `response_format`, `max_output_tokens` becomes `max_tokens`, function tools become chat tools.
 * The chat reader then validates every field; its errors are renamed to the Responses field.
 */
import { ApiError, invalid, unsupported } from '../errors';
import { SAMPLING_FIELDS } from '../protocol/common';
import type { Json } from '../protocol/field';
import { STRUCTURED_FIELDS } from '../protocol/structured';

/**
 * Chat fields a Responses body may carry under their own names: the shared sampling and stopping
 * fields (structured output aside: Responses asks for it in `text.format`; hidden states have no
 * place in a response object) and the chat template's variables. The chat reader checks them.
 */
const PASS_THROUGH = [...Object.keys(SAMPLING_FIELDS).filter((k) => !(k in STRUCTURED_FIELDS) && k !== 'return_hidden_states'), 'chat_template_kwargs'];

/** The Responses fields that shape the reply object (echoed in it) beside the chat body. */
export interface ResponsesRequest {
  model: string;
  stream: boolean;
  store: boolean;
  instructions: string | null;
  previousResponseId: string | null;
  maxOutputTokens: number | null;
  metadata: Record<string, string>;
  tools: Json[];
  toolChoice: unknown;
  textFormat: Json;
  temperature: number | null;
  topP: number | null;
  parallelToolCalls: boolean;
  reasoningEffort: string | null;
}

/** A chat message as the chat reader takes it. */
export type ChatMessageJson = Json;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The text of a message's content: a string, or its text parts joined. */
function contentText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalid(param, `${param} must be a string or a list of content parts`);
  return content.map((part, i) => partText(part, `${param}[${i}]`)).join('');
}

/** One text part's text (input_text, output_text, text, refusal); any other part is refused by type. */
function partText(part: unknown, at: string): string {
  if (!isObject(part)) throw invalid(at, `${at} must be a content part object`);
  if (part.type === 'input_text' || part.type === 'output_text' || part.type === 'text') {
    if (typeof part.text !== 'string') throw invalid(`${at}.text`, `${at}.text must be a string`);
    return part.text;
  }
  if (part.type === 'refusal') return typeof part.refusal === 'string' ? part.refusal : '';
  throw unsupported(at, `content of type ${JSON.stringify(part.type)}`);
}

/**
 * A message's content for the chat reader: its text (as contentText), or with `input_image` parts
 * (`{type: "input_image", image_url, detail}`) the chat's parts in order, each image an
 * `image_url` part, so images take the chat's path (decoding, errors, the model's placeholders).
 */
function messageContent(content: unknown, param: string): string | Json[] {
  if (!Array.isArray(content) || !content.some((p) => isObject(p) && p.type === 'input_image')) return contentText(content, param);
  return content.map((part, i) => {
    if (!isObject(part) || part.type !== 'input_image') return { type: 'text', text: partText(part, `${param}[${i}]`) };
    if (typeof part.image_url !== 'string') {
      if (part.file_id !== undefined) throw unsupported(`${param}[${i}].file_id`, 'input_image parts by file_id (there is no Files API); send image_url');
      throw invalid(`${param}[${i}].image_url`, `${param}[${i}].image_url must be a string (a data: or http(s) URL)`);
    }
    return { type: 'image_url', image_url: { url: part.image_url, ...(part.detail !== undefined ? { detail: part.detail } : {}) } };
  });
}

/** `input` items as chat messages: consecutive function calls become one assistant turn. */
export function inputMessages(input: unknown): ChatMessageJson[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input)) throw invalid('input', 'input must be a string or a list of input items');
  const out: ChatMessageJson[] = [];
  input.forEach((item, i) => {
    const at = `input[${i}]`;
    if (!isObject(item)) throw invalid(at, `${at} must be an object`);
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const role = item.role;
        if (role !== 'user' && role !== 'assistant' && role !== 'system' && role !== 'developer')
          throw invalid(`${at}.role`, `${at}.role must be user, assistant, system or developer; got ${JSON.stringify(role)}`);
        out.push({ role, content: messageContent(item.content, `${at}.content`) });
        return;
      }
      case 'function_call': {
        if (typeof item.name !== 'string' || typeof item.call_id !== 'string' || typeof item.arguments !== 'string')
          throw invalid(at, `${at}: a function_call needs string name, call_id and arguments`);
        const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
        const last = out[out.length - 1];
        if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) (last.tool_calls as unknown[]).push(call);
        else out.push({ role: 'assistant', content: null, tool_calls: [call] });
        return;
      }
      case 'function_call_output': {
        if (typeof item.call_id !== 'string') throw invalid(`${at}.call_id`, `${at}.call_id must be a string`);
        const output = typeof item.output === 'string' ? item.output : contentText(item.output, `${at}.output`);
        out.push({ role: 'tool', tool_call_id: item.call_id, content: output });
        return;
      }
      case 'reasoning':
        // The model's earlier thinking: chat templates drop it from past turns too.
        return;
      default:
        throw unsupported(`${at}.type`, `input items of type ${JSON.stringify(type)}`);
    }
  });
  return out;
}

const FIELD_NAMES: Record<string, string> = {
  messages: 'input',
  max_tokens: 'max_output_tokens',
  response_format: 'text.format',
  reasoning_effort: 'reasoning.effort',
};

/** A chat reader's error, naming the Responses field it came from. */
export function renameParam(e: unknown): unknown {
  if (!(e instanceof ApiError) || !e.param) return e;
  const head = e.param.split(/[.[]/)[0]!;
  const name = FIELD_NAMES[head];
  if (!name) return e;
  const param = name + e.param.slice(head.length);
  return new ApiError(e.status, e.message.split(head).join(name), e.type, param, e.code);
}

/** The Responses body's own fields, checked, and the chat body it runs as. */
export function toChatBody(b: Json, previous: ChatMessageJson[]): { req: ResponsesRequest; chat: Json } {
  const str = (k: string) => {
    const v = b[k];
    if (v !== undefined && v !== null && typeof v !== 'string') throw invalid(k, `${k} must be a string`);
    return (v ?? null) as string | null;
  };
  if (b.input === undefined) throw invalid('input', 'input is required', 'missing_required_parameter');
  if (typeof b.model !== 'string') throw invalid('model', 'model is required', 'missing_required_parameter');
  const instructions = str('instructions');
  const previousResponseId = str('previous_response_id');
  for (const k of ['stream', 'store', 'parallel_tool_calls', 'background'] as const)
    if (b[k] !== undefined && b[k] !== null && typeof b[k] !== 'boolean') throw invalid(k, `${k} must be a boolean`);
  if (b.background === true) throw unsupported('background', 'background responses');
  if (b.metadata !== undefined && b.metadata !== null && (!isObject(b.metadata) || !Object.values(b.metadata).every((v) => typeof v === 'string')))
    throw invalid('metadata', 'metadata must map keys to strings');

  const tools = b.tools ?? [];
  if (!Array.isArray(tools)) throw invalid('tools', 'tools must be a list');
  const chatTools = tools.map((t, i) => {
    if (!isObject(t) || t.type !== 'function') throw unsupported(`tools[${i}].type`, `tools of type ${JSON.stringify(isObject(t) ? t.type : t)} (only function tools)`);
    if (typeof t.name !== 'string') throw invalid(`tools[${i}].name`, `tools[${i}].name must be a string`);
    return { type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters, strict: t.strict } };
  });
  let toolChoice: unknown = b.tool_choice;
  if (isObject(toolChoice)) {
    if (toolChoice.type !== 'function' || typeof toolChoice.name !== 'string') throw unsupported('tool_choice', `tool_choice ${JSON.stringify(toolChoice)}`);
    toolChoice = { type: 'function', function: { name: toolChoice.name } };
  }

  const text = b.text ?? {};
  if (!isObject(text)) throw invalid('text', 'text must be an object');
  const format = (text.format ?? { type: 'text' }) as Json;
  if (!isObject(format)) throw invalid('text.format', 'text.format must be an object');
  let responseFormat: Json | undefined;
  if (format.type === 'json_object') responseFormat = { type: 'json_object' };
  else if (format.type === 'json_schema') {
    if (typeof format.name !== 'string') throw invalid('text.format.name', 'text.format.name is required for json_schema', 'missing_required_parameter');
    responseFormat = { type: 'json_schema', json_schema: { name: format.name, schema: format.schema, strict: format.strict } };
  } else if (format.type !== 'text') throw invalid('text.format.type', `text.format.type must be text, json_object or json_schema; got ${JSON.stringify(format.type)}`);

  const reasoning = b.reasoning;
  if (reasoning !== undefined && reasoning !== null && !isObject(reasoning)) throw invalid('reasoning', 'reasoning must be an object');
  const effort = isObject(reasoning) ? (reasoning.effort ?? null) : null;

  const messages = [...(instructions ? [{ role: 'system', content: instructions }] : []), ...previous, ...inputMessages(b.input)];
  const chat: Json = {
    model: b.model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    ...(b.max_output_tokens !== undefined && b.max_output_tokens !== null ? { max_tokens: b.max_output_tokens } : {}),
    ...(chatTools.length ? { tools: chatTools } : {}),
    ...(toolChoice !== undefined && toolChoice !== null ? { tool_choice: toolChoice } : {}),
    ...(b.parallel_tool_calls !== undefined && b.parallel_tool_calls !== null ? { parallel_tool_calls: b.parallel_tool_calls } : {}),
    ...(responseFormat ? { response_format: responseFormat } : {}),
    ...(effort ? { reasoning_effort: effort } : {}),
    ...Object.fromEntries(PASS_THROUGH.filter((k) => b[k] !== undefined && b[k] !== null).map((k) => [k, b[k]])),
  };
  return {
    chat,
    req: {
      model: b.model,
      stream: b.stream === true,
      store: b.store !== false,
      instructions,
      previousResponseId,
      maxOutputTokens: typeof b.max_output_tokens === 'number' ? b.max_output_tokens : null,
      metadata: (b.metadata ?? {}) as Record<string, string>,
      tools,
      toolChoice: b.tool_choice ?? 'auto',
      textFormat: format,
      temperature: typeof b.temperature === 'number' ? b.temperature : null,
      topP: typeof b.top_p === 'number' ? b.top_p : null,
      parallelToolCalls: b.parallel_tool_calls !== false,
      reasoningEffort: typeof effort === 'string' ? effort : null,
    },
  };
}
