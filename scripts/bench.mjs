#!/usr/bin/env node
// `npm run bench`: the benchmark in Node (Dawn) and headless Chromium. The work is in
// src/bench/main.ts, run through vite-node so its `.wgsl` imports resolve; arguments pass through
// (`npm run bench -- --preset tiny --target node`). It points Vulkan at SwiftShader when there is no GPU.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { status } = spawnSync('npx', ['vite-node', 'src/bench/main.ts', '--', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
process.exit(status ?? 1);
