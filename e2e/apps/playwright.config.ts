// The packed library in scratch apps (bundlers.e2e.ts): `npx playwright test -c e2e/apps`.
// Apart from the root config, whose web servers (the demo, the service-worker pages) these
// tests do not use; the `.e2e.ts` suffix keeps the root config from running them too.
import { defineConfig } from '@playwright/test';
import { chromiumArgs, chromiumPath } from '../../scripts/chromium.mjs';

export default defineConfig({
  testDir: '.',
  testMatch: '*.e2e.ts',
  timeout: 300_000,
  retries: 0,
  workers: 1,
  reporter: [['list']],
  outputDir: '../../test-results/apps',
  use: {
    browserName: 'chromium',
    launchOptions: { executablePath: chromiumPath() ?? undefined, args: chromiumArgs },
  },
});
