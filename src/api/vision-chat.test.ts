/**
 * Chats with images on the tiny SmolVLM fixture (Llama text model with SmolVLM's tokens and
 * template, and a random vision tower) through the API on the CPU reference, against an oracle
 * that builds the expanded prompt and runs the reference models directly.
 */
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../model/open';
import { ReferenceBackend } from '../reference/backend';
import { ReferenceModel } from '../reference/forward';
import { ReferenceVisionTower } from '../reference/vision';
import { clientFor, appFor } from '../testing/api-rig';
import { ensureFixture } from '../testing/fixtures/shared';
import { makeFixture } from '../testing/fixtures/model';
import { FIXTURE_PROCESSOR, fixtureTower } from '../testing/fixtures/vision';
import { openVisionTower } from '../model/vision-open';
import { imagePromptText, processImage } from '../vision/idefics3';
import { tokensPerTile } from '../vision/tower';
import type OpenAI from 'openai';

/** A w x h PNG whose pixels follow `seed`. */
async function png(w: number, h: number, seed: number): Promise<{ url: string; raw: Uint8Array }> {
  const raw = Uint8Array.from({ length: w * h * 3 }, (_, i) => (i * 37 + seed * 101 + ((i * i) % 251)) % 256);
  const file = await sharp(raw, { raw: { width: w, height: h, channels: 3 } }).png().toBuffer();
  return { url: `data:image/png;base64,${file.toString('base64')}`, raw };
}

const image = (url: string) => ({ type: 'image_url' as const, image_url: { url } });

describe('chat with images on the tiny SmolVLM (CPU reference)', () => {
  let client: OpenAI;
  let backend: ReferenceBackend;
  let oracle: ReferenceModel;
  let tower: ReferenceVisionTower;
  let a: { url: string; raw: Uint8Array };
  let b: { url: string; raw: Uint8Array };

  beforeAll(async () => {
    // The backend reads the text GGUF and the mmproj GGUF the fixture writer wrote; the oracle's
    // tower is the generator's own weights (so the file's round trip is checked too).
    const paths = await ensureFixture({ arch: 'llama', preset: 'tiny', vision: true }, { hf: [], gguf: ['F32'] });
    const opened = await openModel(paths.gguf.F32!);
    const mmproj = await openVisionTower(paths.mmproj!);
    expect(mmproj.processor).toEqual(FIXTURE_PROCESSOR);
    backend = await ReferenceBackend.create(opened, { id: 'smolvlm-tiny', vision: { processor: mmproj.processor, tower: await ReferenceVisionTower.load(mmproj) } });
    const generated = fixtureTower(makeFixture({ arch: 'llama', preset: 'tiny', vision: true }));
    tower = ReferenceVisionTower.fromWeights(generated.config, generated.weights);
    oracle = await ReferenceModel.load(opened);
    client = clientFor(appFor([backend]));
    [a, b] = await Promise.all([png(40, 30, 1), png(40, 30, 2)]);
  }, 120_000);

  /** Greedy tokens of the oracle for a prompt whose `<image>`s are the given images, expanded. */
  function greedy(prompt: string, images: Array<{ raw: Uint8Array; w: number; h: number }>, n: number): string {
    const tok = backend.tokenizer;
    const processed = images.map((im) => processImage({ width: im.w, height: im.h, data: im.raw }, FIXTURE_PROCESSOR));
    const parts = prompt.split('<image>');
    const text = parts.map((p, i) => p + (i < processed.length ? imagePromptText(processed[i]!.rows, processed[i]!.cols, FIXTURE_PROCESSOR.imageSeqLen) : '')).join('');
    const ids = tok.encode(text, { addSpecialTokens: false });
    const imageId = tok.tokenToId('<image>')!;
    const rows = processed.flatMap((p) => p.tiles.map((t) => tower.embedTile(t)));
    const per = tokensPerTile(tower.config);
    const dim = tower.config.projectionDim;
    oracle.reset();
    let k = 0;
    let logits: Float32Array = new Float32Array(0);
    ids.forEach((id, pos) => {
      const e = id === imageId ? rows[Math.floor(k / per)]!.subarray((k % per) * dim, (k++ % per + 1) * dim) : undefined;
      logits = oracle.forward(id, pos, e);
    });
    expect(k).toBe(rows.length * per);
    const out: number[] = [];
    for (let pos = ids.length; out.length < n; pos++) {
      const next = logits.indexOf(Math.max(...logits));
      out.push(next);
      logits = oracle.forward(next, pos);
    }
    return tok.decode(out, { skipSpecialTokens: true });
  }

  it('answers an image chat as the oracle does, its tiles (3 x 4 + global) in the prompt', async () => {
    const r = await client.chat.completions.create({
      model: 'smolvlm-tiny',
      messages: [{ role: 'user', content: [image(a.url), { type: 'text', text: 'What is this?' }] }],
      max_tokens: 6,
      temperature: 0,
    });
    expect(r.choices[0]!.message.content).toBe(greedy('<|im_start|>User:<image>What is this?<end_of_utterance>\nAssistant:', [{ raw: a.raw, w: 40, h: 30 }], 6));
    // 40 x 30 -> 128 x 96 -> 3 rows x 4 tiles and the global image, 4 tokens each.
    expect(r.usage!.prompt_tokens).toBeGreaterThan(13 * 4);
  });

  it('gives another image with the same text its own answer, and the same image again the same (no stale prefix)', async () => {
    const ask = (url: string) =>
      client.chat.completions.create({
        model: 'smolvlm-tiny',
        messages: [{ role: 'user', content: [image(url), { type: 'text', text: 'Describe.' }] }],
        max_tokens: 1,
        temperature: 0,
        logprobs: true,
        top_logprobs: 3,
      });
    const first = await ask(a.url);
    const other = await ask(b.url);
    const again = await ask(a.url);
    const top = (r: typeof first) => r.choices[0]!.logprobs!.content![0]!.top_logprobs.map((t) => t.logprob);
    expect(top(other)).not.toEqual(top(first));
    expect(top(again)).toEqual(top(first));
  });

  it('takes two images in one message, an image in an earlier turn, and text only', async () => {
    const two = await client.chat.completions.create({
      model: 'smolvlm-tiny',
      messages: [
        { role: 'user', content: [image(a.url), { type: 'text', text: 'and' }, image(b.url)] },
        { role: 'assistant', content: 'Two.' },
        { role: 'user', content: 'Colours?' },
      ],
      max_tokens: 4,
      temperature: 0,
    });
    const images = [{ raw: a.raw, w: 40, h: 30 }, { raw: b.raw, w: 40, h: 30 }];
    expect(two.choices[0]!.message.content).toBe(
      greedy('<|im_start|>User:<image>and<image><end_of_utterance>\nAssistant: Two.<end_of_utterance>\nUser: Colours?<end_of_utterance>\nAssistant:', images, 4),
    );
    const text = await client.chat.completions.create({ model: 'smolvlm-tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0 });
    expect(text.choices[0]!.message.content).toBe(greedy('<|im_start|>User: Hello<end_of_utterance>\nAssistant:', [], 4));
  });

  it('takes /v1/responses input_image parts as image_url parts: the same answer as the chat, file_id refused by name', async () => {
    const r = await client.responses.create({
      model: 'smolvlm-tiny',
      input: [{ role: 'user', content: [{ type: 'input_image', image_url: a.url, detail: 'auto' }, { type: 'input_text', text: 'What is this?' }] }],
      max_output_tokens: 3,
      temperature: 0,
      store: false,
    });
    expect(r.output_text).toBe(greedy('<|im_start|>User:<image>What is this?<end_of_utterance>\nAssistant:', [{ raw: a.raw, w: 40, h: 30 }], 3));
    expect(r.usage!.input_tokens).toBeGreaterThan(13 * 4);
    const e = await client.responses
      .create({ model: 'smolvlm-tiny', input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-1', detail: 'auto' }] }], store: false })
      .then(() => null, (x: unknown) => x as { status: number; param: string });
    expect([e?.status, e?.param]).toEqual([400, 'input[0].content[0].file_id']);
  });

  it('says in /v1/models that the model takes images', async () => {
    const cards = (await client.models.list()).data as unknown as Array<{ id: string; input_modalities?: string[] }>;
    expect(cards.find((c) => c.id === 'smolvlm-tiny')?.input_modalities).toEqual(['text', 'image']);
  });

  it('keeps an <image> the user types as text, and refuses a prompt whose images do not fit the context', async () => {
    const r = await client.chat.completions.create({
      model: 'smolvlm-tiny',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'see <image> here' }, image(a.url)] }],
      max_tokens: 2,
      temperature: 0,
    });
    expect(r.choices[0]!.message.content).toBeTypeOf('string');
    const e = await client.chat.completions
      .create({ model: 'smolvlm-tiny', messages: [{ role: 'user', content: [image(a.url)] }], max_tokens: backend.contextLength - 20 })
      .then(() => null, (x: unknown) => x as { status: number; code: string });
    expect([e?.status, e?.code]).toEqual([400, 'context_length_exceeded']);
  });
});
