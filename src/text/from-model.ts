/** The text side of an opened model: its tokenizer (tokenizer.json or GGUF metadata) and chat template. */
import type { OpenedModel } from '../model/open';
import type { ChatTemplateConfig } from './chat-template';
import { loadGGUFTokenizer } from './gguf-tokenizer';
import { loadTokenizer, type TextTokenizer } from './tokenizer';

export function loadTextModel(opened: OpenedModel): { tokenizer: TextTokenizer; chatTemplate: ChatTemplateConfig } {
  const eosTokenIds = opened.config.eosTokenIds;
  let tokenizer: TextTokenizer;
  if (opened.tokenizer.json) tokenizer = loadTokenizer(opened.tokenizer.json, opened.tokenizer.config ?? {}, { eosTokenIds });
  else if (opened.tokenizer.gguf) tokenizer = loadGGUFTokenizer(opened.tokenizer.gguf, { eosTokenIds });
  else throw new Error('the model has no tokenizer (tokenizer.json or GGUF tokenizer metadata)');
  return { tokenizer, chatTemplate: chatTemplateOf(opened, tokenizer) };
}

/** A named list in tokenizer_config.json beats the single default openModel picked. */
export function chatTemplateOf(opened: OpenedModel, tokenizer: TextTokenizer): ChatTemplateConfig {
  return Array.isArray(tokenizer.chatTemplate) ? tokenizer.chatTemplate : (opened.chatTemplate ?? tokenizer.chatTemplate);
}
