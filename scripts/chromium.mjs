// Where the system Chromium is, and the flags that give it WebGPU without a GPU and keep it
// off the network. Shared by vitest's browser project, Playwright and the bench.
import { existsSync } from 'node:fs';

export const chromiumArgs = [
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--no-sandbox',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** CHROME_PATH, then Debian's and other usual places; null when none is installed. */
export function chromiumPath() {
  const candidates = [
    process.env.CHROME_PATH,
    '/usr/bin/chromium',
    '/usr/bin/chromium-browser',
    '/usr/bin/google-chrome',
    '/usr/bin/google-chrome-stable',
  ].filter(Boolean);
  return candidates.find((p) => existsSync(p)) ?? null;
}
