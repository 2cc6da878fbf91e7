/** Rendering a chat with the model's own template (shared by chat completions and /apply-template). */
import type { Backend } from '../engine/types';
import { ChatTemplate } from '../text/index';
import { encodeLong } from '../text/tokenizer';
import type { ChatCompletionRequest } from './protocol/chat';

const cache = new WeakMap<Backend, Map<string, ChatTemplate>>();

/**
 * The backend's template, parsed once; the `tool_use` variant when tools are given and it has one.
 * Its load-time probe (does it render `content: null`? see ChatTemplate.inputRules) runs once per
 * backend and variant through this cache, never per request.
 */
export function chatTemplateOf(backend: Backend, tools: boolean): ChatTemplate {
  let byKind = cache.get(backend);
  if (!byKind) cache.set(backend, (byKind = new Map()));
  const key = tools ? 'tools' : 'plain';
  let t = byKind.get(key);
  if (!t) {
    const tok = backend.tokenizer;
    t = ChatTemplate.fromConfig(backend.chatTemplate, { bosToken: tok.bosToken, eosToken: tok.eosToken, specialTokens: tok.specialTokens, tools });
    byKind.set(key, t);
  }
  return t;
}

/** What rendering takes of a chat request; /apply-template passes any reasoning_effort string through. */
export type ChatRenderInput = Pick<ChatCompletionRequest, 'messages'> &
  Partial<Pick<ChatCompletionRequest, 'tools' | 'add_generation_prompt' | 'continue_final_message' | 'chat_template_kwargs'>> & { reasoning_effort?: string };

export function renderChat(backend: Backend, r: ChatRenderInput) {
  const template = chatTemplateOf(backend, !!r.tools?.length);
  const kwargs = { ...(r.reasoning_effort ? { reasoning_effort: r.reasoning_effort } : {}), ...(r.chat_template_kwargs ?? {}) };
  const rendered = template.render({
    messages: r.messages,
    tools: r.tools,
    add_generation_prompt: r.add_generation_prompt ?? !r.continue_final_message,
    continue_final_message: r.continue_final_message,
    chat_template_kwargs: kwargs,
  });
  return { ...rendered, template };
}

/**
 * The rendered chat as ids: template control tokens are tokens, user-typed ones stay text. A long
 * chat is tokenized off the event loop (TextTokenizer.encodeAsync).
 */
export function chatPromptIds(backend: Backend, prompt: string, literalRanges: [number, number][]): Promise<number[]> {
  return encodeLong(backend.tokenizer, prompt, { addSpecialTokens: false, literalRanges });
}
