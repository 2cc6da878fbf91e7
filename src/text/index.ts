/** The text layer: tokenizers, streaming detokenizer, chat templates, output parsers. */
export { TemplateError, TokenizerError, type TemplateErrorCode, type TokenizerErrorCode } from './errors';
export {
  loadTokenizer,
  type TextTokenizer,
  type EncodeOptions,
  type DecodeOptions,
  type VocabType,
  type TokenizerLoadOptions,
} from './tokenizer';
export {
  loadGGUFTokenizer,
  tokenizerFilesFromGGUF,
  mergesFromScores,
  GGUF_PRE_TOKENIZERS,
  GGUF_TOKEN_TYPE,
  type GGUFMetadata,
  type GGUFTokenizerFiles,
} from './gguf-tokenizer';
export { StreamingDetokenizer, type DetokenizerOptions } from './detokenizer';
export {
  ChatTemplate,
  CHATML_TEMPLATE,
  selectChatTemplate,
  chatTemplateFromGGUF,
  type ChatTemplateConfig,
  type ChatTemplateOptions,
  type RenderChatRequest,
  type RenderChatResult,
  type SelectedTemplate,
} from './chat-template';
export {
  normaliseMessages,
  templateWantsContentParts,
  templateWantsStringArguments,
  templateInputRules,
  NULL_CONTENT_PROBE,
  type TemplateInputRules,
  type ChatMessage,
  type ChatRole,
  type ChatContentPart,
  type ChatTool,
  type ChatToolCall,
} from './chat-messages';
export { strftime } from './strftime';
export { ReasoningParser, REASONING_FORMATS, detectReasoningFormat, promptOpensReasoning, templateHasReasoning, type ReasoningFormat, type ReasoningOptions } from './reasoning';
export { ToolCallParser, detectToolCallFormat, type ToolCallFormat, type ToolCallParserOptions } from './tool-calls';
export { ChatOutputParser, foldEvents, type ChatOutputParserOptions, type FoldedOutput } from './chat-output';
export type { OutputEvent, ToolCallDelta } from './stream-text';
