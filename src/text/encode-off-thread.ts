/**
 * Long texts tokenized in a worker thread (issue #19): @huggingface/tokenizers runs on the thread
 * that calls it, at about 0.3-1.3 MB of text per second here, so a prompt of megabytes (what a
 * context of 32k tokens with a real vocabulary lets past the cheap bound in src/api/limits.ts)
 * would hold the event loop for seconds. One worker serves every tokenizer, each registered once
 * with its tokenizer.json; the main thread keeps the cheap parts (special-token splitting), the
 * worker runs the normalizer, pre-tokenizer and model, the same library on the same JSON, so the
 * ids are the same. Node only; elsewhere `offThreadEncoder` answers null and callers encode in place.
 */
import { isNode, OffThread } from '../platform/off-thread';

/**
 * The worker: `encode` is the library's own encode (HFTokenizer.encode's plain path); `sections`
 * encodes plain-text sections already split from special tokens, each as HFTokenizer.encodeFiltered
 * does (keep the two alike: encode-off-thread.test.ts compares them). Ids come back as an
 * Int32Array handed over, not copied: millions of them are what a long prompt makes.
 */
const WORKER_SOURCE = `
const { workerData } = require('worker_threads');
const { Tokenizer } = require(workerData.tokenizersFile);
const tokenizers = new Map();
const ops = {
  init(id, jsonText, config) {
    tokenizers.set(id, new Tokenizer({ added_tokens: [], ...JSON.parse(jsonText) }, config));
  },
  drop(id) {
    tokenizers.delete(id);
  },
  encode(id, text) {
    const ids = Int32Array.from(tokenizers.get(id).encode(text, { add_special_tokens: false }).ids);
    return transfer(ids, [ids.buffer]);
  },
  sections(id, sections) {
    const { normalizer, pre_tokenizer: pre, model } = tokenizers.get(id);
    const all = [];
    const lengths = new Int32Array(sections.length);
    sections.forEach(([text, sectionIndex], k) => {
      const normalised = normalizer ? normalizer(text) : text;
      if (normalised.length === 0) return;
      const words = pre ? pre(normalised, { section_index: sectionIndex }) : [normalised];
      for (const tok of model(words)) {
        const id = model.tokens_to_ids.get(tok) ?? model.unk_token_id;
        if (id === undefined) throw new Error('token ' + JSON.stringify(tok) + ' has no id and the model has no unk token');
        all.push(id);
        lengths[k]++;
      }
    });
    const ids = Int32Array.from(all);
    return transfer({ ids, lengths }, [ids.buffer, lengths.buffer]);
  },
};
`;

export interface OffThreadEncoder {
  /** The library's encode of `text` without special tokens added. */
  encode(text: string): Promise<Int32Array>;
  /** Plain-text sections `[text, sectionIndex]`, each encoded as encodeFiltered does: all their ids, and how many each has. */
  sections(sections: [string, number][]): Promise<{ ids: Int32Array; lengths: Int32Array }>;
}

let host: Promise<OffThread | null> | null = null;
const ids = new WeakMap<object, number>();
let nextId = 1;
/** Each tokenizer's registration: the worker's epoch and the `init` call. */
const registered = new Map<number, { epoch: number; done: Promise<unknown> }>();
const dropped = new FinalizationRegistry<number>((id) => {
  registered.delete(id);
  void host?.then((h) => h?.call('drop', [id])).catch(() => {});
});

function encodeHost(): Promise<OffThread | null> {
  host ??= (async () => {
    if (!isNode()) return null;
    const { createRequire } = await import('node:module');
    return OffThread.create(WORKER_SOURCE, { tokenizersFile: createRequire(import.meta.url).resolve('@huggingface/tokenizers') });
  })().catch(() => null);
  return host;
}

/**
 * The worker-side encoder for the tokenizer `owner` built from `json` and `config` (registered on
 * first use), or null where no worker can be had.
 */
export async function offThreadEncoder(owner: object, json: unknown, config: unknown): Promise<OffThreadEncoder | null> {
  const h = await encodeHost();
  if (!h) return null;
  let id = ids.get(owner);
  if (id === undefined) {
    ids.set(owner, (id = nextId++));
    dropped.register(owner, id);
  }
  const tokenizerId = id;
  const ready = () => {
    const epoch = h.start();
    let r = registered.get(tokenizerId);
    // As text: a real tokenizer.json (150k tokens, their merges) is cloned three times slower as objects.
    if (r?.epoch !== epoch) registered.set(tokenizerId, (r = { epoch, done: h.call('init', [tokenizerId, JSON.stringify(json), config]) }));
    return r.done;
  };
  return {
    encode: async (text) => (await ready(), h.call<Int32Array>('encode', [tokenizerId, text])),
    sections: async (sections) => (await ready(), h.call<{ ids: Int32Array; lengths: Int32Array }>('sections', [tokenizerId, sections])),
  };
}
