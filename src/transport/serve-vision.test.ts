/**
 * The tiny SmolVLM in Node through the CLI, asked by the real `openai` client with a base64 PNG:
 * `webgpu-llm serve --model TEXT.gguf --mmproj MMPROJ.gguf` over HTTP (the GGUF pair; serve runs
 * Node's createEngine). Greedy answer and prompt size equal the CPU reference's. The HF folder form
 * is covered by engine-vision.test.ts (GpuEngine) and vision.browser.test.ts (createEngine in a
 * page): one engine here keeps the file's load cost to one.
 */
import OpenAI from 'openai';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveCommand } from '../cli/serve';
import { openModel } from '../model/open';
import { openVisionTower } from '../model/vision-open';
import { ReferenceBackend } from '../reference/backend';
import { ReferenceVisionTower } from '../reference/vision';
import { appFor, clientFor } from '../testing/api-rig';
import { ensureFixture } from '../testing/fixtures/shared';
import type { Server } from './node-server';

let server: Server;
let refClient: OpenAI;
let image: string;

beforeAll(async () => {
  const paths = await ensureFixture({ arch: 'llama', preset: 'tiny', vision: true }, { hf: [], gguf: ['F32'] });
  const common = ['--precision', 'f32', '--context-length', '256', '--no-cache'];
  server = (await serveCommand(['--model', paths.gguf.F32!, '--mmproj', paths.mmproj!, '--port', '0', ...common], () => {}))!;
  const mmproj = await openVisionTower(paths.mmproj!);
  const reference = await ReferenceBackend.create(await openModel(paths.gguf.F32!), { vision: { processor: mmproj.processor, tower: await ReferenceVisionTower.load(mmproj) } });
  refClient = clientFor(appFor([reference]));
  // 40 x 30: resized and cut into 3 x 4 tiles plus the global image at the fixture's 32-px tiles.
  const raw = Uint8Array.from({ length: 40 * 30 * 3 }, (_, i) => (i * 53 + ((i * i) % 241)) % 256);
  image = `data:image/png;base64,${(await sharp(raw, { raw: { width: 40, height: 30, channels: 3 } }).png().toBuffer()).toString('base64')}`;
}, 300_000);
afterAll(() => server?.close());

const ask = (client: OpenAI) =>
  client.chat.completions.create({
    model: 'default',
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }, { type: 'text', text: 'What is this?' }] }],
    max_tokens: 4,
    temperature: 0,
  });

describe('an image chat in Node through the openai client', () => {
  it('serve --model TEXT.gguf --mmproj MMPROJ.gguf answers over HTTP as the reference does', async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const models = await client.models.list();
    expect((models.data[0] as unknown as { input_modalities: string[] }).input_modalities).toEqual(['text', 'image']);
    const [gpu, ref] = [await ask(client), await ask(refClient)];
    expect(gpu.usage!.prompt_tokens).toBe(ref.usage!.prompt_tokens);
    expect(gpu.usage!.prompt_tokens).toBeGreaterThan(52); // the 13 tiles' image tokens
    expect(gpu.choices[0]!.message.content).toBe(ref.choices[0]!.message.content);
  }, 300_000);
});
