import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ChatTemplate } from './chat-template';
import { TemplateError } from './errors';
import type { ChatMessage, ChatTool } from './chat-messages';

// Golden renderings come from testdata/render_golden.py (Python jinja2 as transformers sets it up).
const HERE = import.meta.dirname;
const REPO = join(HERE, '..', '..');
const cases = JSON.parse(readFileSync(join(HERE, 'testdata', 'chat-cases.json'), 'utf8'));
const FIXED_NOW = () => new Date(2026, 2, 5, 12, 0, 0); // = render_golden.py's FIXED_NOW

interface Golden {
  template: string;
  /** render_golden.py's answer to the null-content probe: does the template render `content: None`? */
  null_content: boolean;
  results: Record<string, { output?: string; error?: string; kind?: string }>;
}

// The real templates live outside the repository (../shared/templates in CI); skip when absent.
// testdata/published/ holds published templates that folder lacks (Gemma 3's and Phi-4-mini's,
// reconstructed from copies quoted in public code: see its README), golden under their own names.
const dirs: [string, string][] = [
  [join(REPO, '..', 'shared', 'templates'), ''],
  [join(HERE, 'testdata', 'published'), ''],
  [join(REPO, 'src', 'testing', 'fixtures', 'templates'), 'fixture-'],
  [join(HERE, 'testdata', 'templates'), 'feature-'],
];
const files = dirs
  .filter(([d]) => existsSync(d))
  .flatMap(([d, prefix]) => readdirSync(d).filter((f) => f.endsWith('.jinja')).map((f) => ({ file: join(d, f), prefix })));

describe.skipIf(files.length === 0)('chat templates render exactly as Python jinja2 does', () => {
  for (const { file, prefix } of files) {
    const name = file.split('/').pop()!;
    const goldenPath = join(HERE, 'testdata', 'golden', prefix + name.replace(/\.jinja$/, '.json'));
    describe(prefix + name, () => {
      it('has a golden file (run src/text/testdata/render_golden.py)', () => {
        expect(existsSync(goldenPath)).toBe(true);
      });
      if (!existsSync(goldenPath)) return;
      const golden: Golden = JSON.parse(readFileSync(goldenPath, 'utf8'));
      const text = readFileSync(file, 'utf8');
      const tokens = cases.specialTokens[name] ?? cases.specialTokens.default;
      let parsed: ChatTemplate | undefined;
      const tpl = () => (parsed ??= new ChatTemplate(text, { bosToken: tokens.bos_token, eosToken: tokens.eos_token, now: FIXED_NOW }));
      it(`passes content null as ${golden.null_content ? 'null' : "''"}, as the probe in Python decides`, () => {
        expect(tpl().inputRules.nullContent).toBe(golden.null_content);
      });
      for (const c of cases.cases) {
        const want = golden.results[c.name];
        it(`renders ${c.name}${want.error ? ' to the same error' : ''}`, () => {
          const render = () =>
            tpl().render({
              messages: c.messages as ChatMessage[],
              tools: c.tools ? (cases.tools as ChatTool[]) : undefined,
              add_generation_prompt: c.add_generation_prompt,
              continue_final_message: c.continue_final_message,
              chat_template_kwargs: c.chat_template_kwargs,
            });
          if (want.error !== undefined) {
            let err: unknown;
            try {
              render();
            } catch (e) {
              err = e;
            }
            expect(err).toBeInstanceOf(TemplateError);
            if (want.kind === 'raise_exception') {
              expect((err as TemplateError).code).toBe('raise_exception');
              expect((err as TemplateError).message).toBe(want.error);
            }
          } else {
            expect(render().prompt).toBe(want.output);
          }
        });
      }
    });
  }
});
