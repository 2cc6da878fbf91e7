import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTemplate, renderParsed } from './jinja-env';
import { TemplateError } from './errors';

// Expected values come from Python itself: testdata/py_str_cases.py renders every case with
// jinja2 and writes testdata/py-str-cases.json. To regenerate (after editing the receivers or
// calls there): `python3 src/text/testdata/py_str_cases.py`, then commit the JSON.
interface Case {
  group: string;
  template: number;
  vars: { s: number | string; args?: unknown[]; kwargs?: Record<string, unknown> };
  output?: string;
  error?: string;
}
const table: { receivers: string[]; templates: string[]; cases: Case[] } = JSON.parse(
  readFileSync(join(import.meta.dirname, 'testdata', 'py-str-cases.json'), 'utf8'),
);

function ours(c: Case): { output?: string; error?: string } {
  const vars = { ...c.vars, s: typeof c.vars.s === 'number' ? table.receivers[c.vars.s] : c.vars.s };
  try {
    return { output: renderParsed(parseTemplate(table.templates[c.template]), vars) };
  } catch (e) {
    if (!(e instanceof TemplateError)) throw e;
    return { error: e.message };
  }
}

const groups = new Map<string, Case[]>();
for (const c of table.cases) groups.set(c.group, [...(groups.get(c.group) ?? []), c]);

describe('Python str methods and string filters inside templates behave as in Python', () => {
  for (const [group, cases] of groups) {
    const what = group.startsWith('|') ? 'the filter ' + group : group.includes(' ') ? group : 'str.' + group + '()';
    it(`${what} gives Python's result for every case`, () => {
      // All mismatches of a group at once, each with its input, so a failure reads as a table.
      const mismatches = cases.flatMap((c) => {
        const got = ours(c);
        const same = c.error !== undefined ? got.error !== undefined : got.output === c.output;
        const input = { s: typeof c.vars.s === 'number' ? table.receivers[c.vars.s] : c.vars.s, args: c.vars.args, kwargs: c.vars.kwargs, template: table.templates[c.template] };
        return same ? [] : [{ ...input, python: c.error ?? c.output, ours: got.error ?? got.output }];
      });
      expect(mismatches).toEqual([]);
    });
  }
});
