import { defineConfig } from '@playwright/test';
import { chromiumArgs, chromiumPath } from './scripts/chromium.mjs';

const PORT = 5179;
const PAGES_PORT = 5180;

export default defineConfig({
  testDir: 'e2e',
  timeout: 120_000,
  retries: 0,
  workers: 1,
  reporter: [['list']],
  outputDir: 'test-results/e2e',
  use: {
    baseURL: `http://localhost:${PORT}`,
    browserName: 'chromium',
    launchOptions: { executablePath: chromiumPath() ?? undefined, args: chromiumArgs },
  },
  webServer: [
    {
      command: `npx vite demo --port ${PORT} --strictPort`,
      url: `http://localhost:${PORT}`,
      reuseExistingServer: !process.env.CI,
      timeout: 60_000,
    },
    // Test pages of e2e/service-worker.spec.ts, on their own origin so that their service worker
    // (scope `/`) never touches the demo. The root config brings the .wgsl plugin the engine needs.
    {
      command: `npx vite e2e/pages --config vite.config.ts --port ${PAGES_PORT} --strictPort`,
      url: `http://localhost:${PAGES_PORT}/host.html`,
      reuseExistingServer: !process.env.CI,
      timeout: 60_000,
    },
  ],
});
