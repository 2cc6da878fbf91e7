/**
 * A LoRA adapter's source as every entry point takes it (createEngine's `lora`, `loadLora`, over
 * the Worker and on the wire): the file, URL, repo id or picked files alone, or `{ source, scale }`.
 * No imports, so the page-side transport can use it without pulling in the engine.
 */
export type Scaled<T> = T | { source: T; scale?: number };

/**
 * The `{ source, scale }` form of `s`. A source is itself never such an object: strings, URLs,
 * Blobs/Files (which have `text`), file lists and readers (`read`) have no `source` field.
 */
export function scaledSource<T>(s: Scaled<T>): { source: T; scale?: number } {
  const isPair = typeof s === 'object' && s !== null && !(s instanceof URL) && 'source' in s && !('text' in s) && !('read' in s);
  return isPair ? (s as { source: T; scale?: number }) : { source: s as T };
}
