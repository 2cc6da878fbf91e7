/** The text side of an opened model: its tokenizer (tokenizer.json or GGUF metadata) and chat template. */
import type { OpenedModel } from '../model/open';
import type { ChatTemplateConfig } from './chat-template';
import { loadGGUFTokenizer } from './gguf-tokenizer';
import { loadTokenizer, type TextTokenizer } from './tokenizer';

export function loadTextModel(opened: OpenedModel): { tokenizer: TextTokenizer; chatTemplate: ChatTemplateConfig } {
  const tokenizer = tokenizerOf(opened.tokenizer, opened.config.eosTokenIds);
  return { tokenizer, chatTemplate: chatTemplateOf(opened, tokenizer) };
}

/** The tokenizer of a model's tokenizer files (a decoder's, or an encoder's: src/model/encoder-open.ts). */
export function tokenizerOf(files: OpenedModel['tokenizer'], eosTokenIds?: OpenedModel['config']['eosTokenIds']): TextTokenizer {
  if (files.json) return loadTokenizer(files.json, files.config ?? {}, { eosTokenIds });
  if (files.gguf) return loadGGUFTokenizer(files.gguf, { eosTokenIds });
  throw new Error('the model has no tokenizer (tokenizer.json or GGUF tokenizer metadata)');
}

/** A named list in tokenizer_config.json beats the single default openModel picked. */
export function chatTemplateOf(opened: OpenedModel, tokenizer: TextTokenizer): ChatTemplateConfig {
  return Array.isArray(tokenizer.chatTemplate) ? tokenizer.chatTemplate : (opened.chatTemplate ?? tokenizer.chatTemplate);
}
