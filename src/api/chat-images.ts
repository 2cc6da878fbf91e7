/**
 * A chat's images on their way to a vision model: checked against the model, loaded and
 * processed (Idefics3's tiles), and each `<image>` the chat template wrote expanded into the tile
 * grid's tokens (src/vision/idefics3.ts). A user who types `<image>` gets text: only the
 * template's own placeholders (outside the render's literal ranges) are expanded.
 */
import type { Backend, PromptImage } from '../engine/types';
import { imagePromptText, IDEFICS3_TOKENS, processImage } from '../vision/idefics3';
import { invalid } from './errors';
import { findImageParts, loadImage, type ImageLimits } from './images';
import type { ChatCompletionRequest } from './protocol/chat';

export interface ChatImages {
  prompt: string;
  literalRanges: [number, number][];
  images: PromptImage[];
}

/** Image parts reach only a model with a vision tower; for any other they are a 400 naming the first. */
export function checkImagesTaken(req: Pick<ChatCompletionRequest, 'messages' | 'model'>, backend: Backend): void {
  const parts = findImageParts(req.messages);
  if (parts.length && !backend.vision)
    throw invalid(parts[0]!.param, `${parts[0]!.param}: the model ${JSON.stringify(req.model)} takes no images (it has no vision tower; a GGUF model takes one with --mmproj)`, 'model_takes_no_images');
}

/** The rendered chat with its images expanded, and the images' tiles in prompt order. */
export async function expandChatImages(
  req: Pick<ChatCompletionRequest, 'messages'>,
  backend: Backend,
  rendered: { prompt: string; literalRanges: [number, number][] },
  limits: ImageLimits,
  signal?: AbortSignal,
): Promise<ChatImages> {
  const parts = findImageParts(req.messages);
  if (parts.length === 0 || !backend.vision) return { ...rendered, images: [] };
  const { prompt, literalRanges } = rendered;
  const placeholder = IDEFICS3_TOKENS.image;
  const literal = (at: number) => literalRanges.some(([a, b]) => at < b && at + placeholder.length > a);
  const places: number[] = [];
  for (let at = prompt.indexOf(placeholder); at >= 0; at = prompt.indexOf(placeholder, at + placeholder.length)) if (!literal(at)) places.push(at);
  if (places.length !== parts.length)
    throw invalid(parts[0]!.param, `the chat template placed ${places.length} images for the request's ${parts.length} image parts; this model's template cannot place them`, 'image_not_placed');

  const { processor } = backend.vision;
  const images: PromptImage[] = [];
  let out = '';
  let from = 0;
  const ranges: [number, number][] = [];
  let shift = 0;
  let r = 0;
  for (let i = 0; i < parts.length; i++) {
    // One image decoded and processed at a time: a request's pixels are never all decoded at once.
    const p = processImage(await loadImage(parts[i]!, limits, signal), processor);
    images.push({ tiles: p.tiles });
    const text = imagePromptText(p.rows, p.cols, processor.imageSeqLen);
    const at = places[i]!;
    for (; r < literalRanges.length && literalRanges[r]![0] < at; r++) ranges.push([literalRanges[r]![0] + shift, literalRanges[r]![1] + shift]);
    out += prompt.slice(from, at) + text;
    from = at + placeholder.length;
    shift += text.length - placeholder.length;
  }
  for (; r < literalRanges.length; r++) ranges.push([literalRanges[r]![0] + shift, literalRanges[r]![1] + shift]);
  return { prompt: out + prompt.slice(from), literalRanges: ranges, images };
}
