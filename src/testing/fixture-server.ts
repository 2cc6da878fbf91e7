/**
 * A fixture model's files served over real HTTP (Node tests): the URL of every format the
 * generator writes, keyed `hf-F32`, `hf-F16`, `hf-BF16` (folders) and `F32` … `Q4_K_M` (GGUF files).
 */
import { relative } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { Arch } from '../model/arch';
import type { FixtureOptions } from './fixtures/model';
import { ensureFixture } from './fixtures/shared';
import type { WriteOptions } from './fixtures/write';

/** A tiny fixture's options beyond its architecture (other shapes, tying), and which files to write. */
export interface FixtureVariant {
  options?: Omit<FixtureOptions, 'arch' | 'preset'>;
  which?: WriteOptions;
}
import { serveDirectory } from './server';

export interface FixtureServer {
  urls: Record<string, string>;
  close(): Promise<void> | void;
}

export async function serveFixture(arch: Arch, variant: FixtureVariant = {}): Promise<FixtureServer> {
  const paths = await ensureFixture({ ...variant.options, arch, preset: 'tiny' }, variant.which);
  const server = await serveDirectory(paths.root);
  const at = (p: string) => `${server.url}/${relative(paths.root, p).split('\\').join('/')}`;
  const urls: Record<string, string> = {};
  for (const [k, p] of Object.entries(paths.hf)) urls[`hf-${k}`] = at(p as string);
  for (const [k, p] of Object.entries(paths.gguf)) urls[k] = at(p as string);
  return { urls, close: () => server.close() };
}

/**
 * Inside a `describe`: serves `arch`'s fixture for its tests (beforeAll / afterAll) and returns a
 * getter for the URLs, valid once the tests run.
 */
export function useFixtureURLs(arch: Arch, variant?: FixtureVariant): () => Record<string, string> {
  let fixture: FixtureServer | undefined;
  beforeAll(async () => {
    fixture = await serveFixture(arch, variant);
  });
  afterAll(() => fixture?.close());
  return () => fixture!.urls;
}
