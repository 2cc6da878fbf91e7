/**
 * The WebGPU engine in headless Chromium against the CPU reference: the grid's cases beyond
 * engine.browser.test.ts's first families (split so that the two files run side by side).
 */
import { BROWSER_ENGINE_CASES, describeBrowserEngineCases } from '../testing/browser-engine-cases';

const FIRST = ['llama', 'qwen2'];
describeBrowserEngineCases([...new Set(BROWSER_ENGINE_CASES.map(([a]) => a))].filter((a) => !FIRST.includes(a)));
