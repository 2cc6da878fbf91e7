/**
 * Test rig for the API: the tiny qwen3 (HF folder) and llama (GGUF) fixtures served over real
 * HTTP, opened with openModel, wrapped in ReferenceBackends, and an `openai` client whose fetch is
 * the app's `handle` (no server in between).
 */
import OpenAI from 'openai';
import { openModel, type OpenedModel } from '../model/open';
import { ReferenceBackend } from '../reference/backend';
import { ReferenceModel } from '../reference/forward';
import { ensureFixture } from './fixtures/shared';
import { serveDirectory, type StaticServer } from './server';
import type { Backend, GenerateRequest, GeneratedToken, GenerationResult } from '../engine/types';
import { createApp, type App, type AppOptions } from '../api/app';

export interface TestModel {
  backend: ReferenceBackend;
  opened: OpenedModel;
  /** A separate reference model for oracle runs (`greedy`), so the backend's cache is untouched. */
  oracle: () => Promise<ReferenceModel>;
}

export interface Rig {
  qwen: TestModel;
  llama: TestModel;
  server: StaticServer;
  close(): Promise<void>;
}

export async function loadRig(): Promise<Rig> {
  const [q, l] = await Promise.all([
    ensureFixture({ arch: 'qwen3', preset: 'tiny' }, { hf: ['F32'], gguf: [] }),
    ensureFixture({ arch: 'llama', preset: 'tiny' }, { hf: [], gguf: ['F32'] }),
  ]);
  // One server over the fixture cache: both fixtures are below it.
  const root = q.root.slice(0, q.root.lastIndexOf('/'));
  const server = await serveDirectory(root);
  const rel = (p: string) => `${server.url}/${p.slice(root.length + 1)}`;
  const qUrl = rel(q.hf.F32!);
  const qOpened = await openModel(qUrl);
  const generationConfig = await (await fetch(`${qUrl}/generation_config.json`)).json();
  const lOpened = await openModel(rel(l.gguf.F32!));
  const model = async (opened: OpenedModel, id: string, gen?: object): Promise<TestModel> => ({
    backend: await ReferenceBackend.create(opened, { id, generationConfig: gen }),
    opened,
    oracle: () => ReferenceModel.load(opened),
  });
  return {
    qwen: await model(qOpened, 'qwen3-tiny', generationConfig),
    llama: await model(lOpened, 'llama-tiny'),
    server,
    close: () => server.close(),
  };
}

export function clientFor(app: App, apiKey = 'x'): OpenAI {
  return new OpenAI({
    baseURL: 'http://localhost/v1',
    apiKey,
    fetch: (url, init) => app.handle(new Request(url as string, init as RequestInit)),
    maxRetries: 0,
  });
}

export function appFor(backends: Backend[], opts: Partial<AppOptions> = {}): App {
  return createApp({ backends, ...opts });
}

/** A backend that delegates to another and records (or breaks) what it generates. */
export class SpyBackend implements Backend {
  tokens = 0;
  finished: GenerationResult | 'returned' | null = null;
  constructor(
    readonly inner: Backend,
    private readonly failAfter = Infinity,
  ) {}
  get id() {
    return this.inner.id;
  }
  get config() {
    return this.inner.config;
  }
  get tokenizer() {
    return this.inner.tokenizer;
  }
  get chatTemplate() {
    return this.inner.chatTemplate;
  }
  get contextLength() {
    return this.inner.contextLength;
  }
  async *generate(request: GenerateRequest): AsyncGenerator<GeneratedToken, GenerationResult, void> {
    this.finished = null;
    const gen = this.inner.generate(request);
    let done = false;
    try {
      for (;;) {
        const r = await gen.next();
        if (r.done) {
          done = true;
          this.finished = r.value;
          return r.value;
        }
        if (++this.tokens > this.failAfter) throw new Error('simulated device failure');
        yield r.value;
      }
    } finally {
      if (!done) {
        this.finished ??= 'returned';
        await gen.return(undefined as never);
      }
    }
  }
  dispose() {
    return this.inner.dispose();
  }
}
