/** The OpenAI-compatible API: `createApp({ backends }).handle(request)`. */
export { createApp, type App, type AppOptions } from './app';
export { ApiError, toApiError, type ErrorBody, type ErrorType } from './errors';
export { toSamplingParams, type GenerationDefaults } from './sampling';
export type { CompletionRequest, CompletionResponse, CompletionChunk, CompletionLogprobs } from './protocol/completions';
export type { ChatCompletionRequest, ChatCompletionResponse, ChatCompletionChunk, ChatLogprobs } from './protocol/chat';
export type { Usage, StreamOptions, SamplingFields } from './protocol/common';
