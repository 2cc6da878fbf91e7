import type { TestProject } from 'vitest/node';

/**
 * Runs in Node before the Chromium tests. Fixture models are served from Node over real HTTP
 * (the browser cannot write files); tests read the base URL with `inject('fixturesURL')`.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { serveDirectory } = await import('./server');
  const { fixtureDir } = await import('./fixtures/shared');
  const server = await serveDirectory(fixtureDir());
  project.provide('fixturesURL', server.url);
  return () => server.close();
}

declare module 'vitest' {
  export interface ProvidedContext {
    fixturesURL: string;
  }
}
