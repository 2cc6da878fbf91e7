/**
 * Server-sent events framing: `data: {json}\n\n` per event, then `data: [DONE]\n\n`. An error
 * after the stream started becomes an `{"error": ...}` event and the stream still ends; a
 * cancelled response stops the source (and so the generation behind it).
 */
import { toApiError } from './errors';

const encoder = new TextEncoder();
const frame = (data: string) => encoder.encode(`data: ${data}\n\n`);

export function sseStream(events: AsyncIterable<unknown>): ReadableStream<Uint8Array> {
  const it = events[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const r = await it.next();
        if (!r.done) return controller.enqueue(frame(JSON.stringify(r.value)));
        controller.enqueue(frame('[DONE]'));
      } catch (e) {
        controller.enqueue(frame(JSON.stringify(toApiError(e).toJSON())));
        controller.enqueue(frame('[DONE]'));
      }
      controller.close();
    },
    async cancel() {
      await it.return?.();
    },
  });
}
