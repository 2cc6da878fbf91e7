import { stat } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { BUNDLED_MODEL_PATH } from '../demo/ui/models';
import { fileSource, readGGUF } from '../src/formats/index';
import { DEMO_MODEL_PATH, demoModelFile } from './bundle-demo-model';

describe('the demo model', () => {
  it('is a Qwen3 GGUF in Q8_0, small enough to generate at every start', async () => {
    expect((await stat(demoModelFile)).size).toBeLessThan(3 * 1024 * 1024);
    const gguf = await readGGUF(fileSource(demoModelFile));
    expect(gguf.metadata.get('general.architecture')).toBe('qwen3');
    expect(gguf.metadata.get('tokenizer.chat_template')).toEqual(expect.stringContaining('<think>'));
    const matrices = gguf.tensors.filter((t) => t.shape.length === 2);
    expect(matrices.length).toBeGreaterThan(0);
    expect(new Set(matrices.map((t) => t.dtype))).toEqual(new Set(['Q8_0']));
  });

  it('is written where the page looks for it', () => {
    expect(BUNDLED_MODEL_PATH).toBe(`/${DEMO_MODEL_PATH}`);
    expect(demoModelFile.replace(/\\/g, '/').endsWith(`demo/public/${DEMO_MODEL_PATH}`)).toBe(true);
  });
});
