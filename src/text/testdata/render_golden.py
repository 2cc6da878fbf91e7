#!/usr/bin/env python3
"""Renders chat-cases.json through every chat template with Python's jinja2, set up as
transformers sets it up (trim_blocks, lstrip_blocks, loopcontrols, its own tojson,
raise_exception and strftime_now), and writes the results as golden JSON files beside this
script (golden/<template>.json). The TypeScript renderer must reproduce them exactly.

Messages are normalised as chat-messages.ts does. `content: None` is passed as None only to
templates that render NULL_CONTENT_PROBE without raising (the probe ChatTemplate runs once at
load, as llama.cpp does); the others get ''. Each golden records the probe's answer.

Usage: python3 src/text/testdata/render_golden.py [TEMPLATE_DIR ...]
Default directories: ../shared/templates (relative to the repository root) and
src/testing/fixtures/templates when they exist.

The clock is fixed (2026-03-05 12:00:00) so strftime_now output is reproducible; the tests give
the TypeScript side the same date through its injectable clock.
"""
import datetime
import hashlib
import json
import os
import re
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, '..', '..', '..'))
FIXED_NOW = datetime.datetime(2026, 3, 5, 12, 0, 0)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers replaces jinja2's tojson (which HTML-escapes) with plain json.dumps.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=['jinja2.ext.loopcontrols'])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = strftime_now
    return env


# Must match templateWantsContentParts() in chat-messages.ts.
CONTENT_LOOP = re.compile(r"for\s+\w+\s+in\s+\w+(?:\.content|\[\s*['\"]content['\"]\s*\])")
# Must match templateWantsStringArguments() in chat-messages.ts: templates that concatenate
# `arguments` with `+` need the JSON string (DeepSeek-R1); the others get the parsed object.
ARGS_CONCAT = re.compile(r"arguments(?:['\"]\])?\s*\+")


# Must match NULL_CONTENT_PROBE in chat-messages.ts: an assistant tool-call turn with null content.
NULL_CONTENT_PROBE = [
    {'role': 'user', 'content': 'Hi'},
    {
        'role': 'assistant',
        'content': None,
        'tool_calls': [{'id': 'call12345', 'type': 'function', 'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}],
    },
]


def renders_null_content(env, template_text, tokens):
    """The probe ChatTemplate runs once at load: does the template render NULL_CONTENT_PROBE
    with content None? If it raises (None + str, `in None`...), null content is passed as ''."""
    kwargs = {k: v for k, v in tokens.items() if v is not None}
    try:
        env.from_string(template_text).render(
            messages=normalise_messages(NULL_CONTENT_PROBE, template_text, null_content=True),
            tools=None, documents=None, add_generation_prompt=False, **kwargs)
        return True
    except Exception:
        return False


def normalise_messages(messages, template_text, null_content):
    """The same normalisation as normaliseMessages() in chat-messages.ts."""
    keep_parts = CONTENT_LOOP.search(template_text) is not None
    string_args = ARGS_CONCAT.search(template_text) is not None
    out = []
    for m in messages:
        m = dict(m)
        if m['role'] == 'developer':
            m['role'] = 'system'
        elif m['role'] == 'function':
            m['role'] = 'tool'
        if m['role'] == 'assistant' and 'content' not in m:
            m['content'] = None  # OpenAI: an assistant tool-call turn may leave content out
        content = m.get('content')
        if 'content' in m and content is None:
            m['content'] = None if null_content else ''  # '' where the template fails on None
        elif isinstance(content, list) and not keep_parts:
            m['content'] = '\n'.join(p['text'] for p in content if p.get('type') == 'text')
        if 'tool_calls' in m and m['tool_calls'] is not None:
            calls = []
            for c in m['tool_calls']:
                c = dict(c)
                fn = dict(c['function'])
                if isinstance(fn.get('arguments'), str) and not string_args:
                    try:
                        fn['arguments'] = json.loads(fn['arguments'])
                    except json.JSONDecodeError:
                        pass
                c['function'] = fn
                calls.append(c)
            m['tool_calls'] = calls
        out.append(m)
    return out


def continue_final(rendered, final_message):
    """transformers' apply_chat_template(continue_final_message=True) cut."""
    if isinstance(final_message, list):
        texts = [b['text'] for b in final_message if 'text' in b]
        if not texts:
            raise ValueError('continue_final_message is set but the final message has no text')
        final_message = texts[-1]
    if final_message.strip() not in rendered:
        raise ValueError('continue_final_message is set but the final message does not appear in the rendered chat')
    loc = rendered.rindex(final_message.strip())
    if rendered[loc:loc + len(final_message.lstrip())] == final_message:
        return rendered[:loc + len(final_message.lstrip())]
    return rendered[:loc + len(final_message.strip())]


def render_case(env, template_text, case, tokens, tools, null_content):
    template = env.from_string(template_text)
    kwargs = {k: v for k, v in tokens.items() if v is not None}
    kwargs.update(case.get('chat_template_kwargs', {}))
    messages = normalise_messages(case['messages'], template_text, null_content)
    try:
        out = template.render(
            messages=messages,
            tools=tools if case.get('tools') else None,
            documents=None,
            add_generation_prompt=case.get('add_generation_prompt', False),
            **kwargs,
        )
        if case.get('continue_final_message'):
            out = continue_final(out, case['messages'][-1]['content'])
        return {'output': out}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception(): the message is the template's own and must match exactly.
        return {'error': str(e), 'kind': 'raise_exception'}
    except ValueError as e:
        return {'error': str(e), 'kind': 'continue_final_message'}
    except Exception as e:  # a template that cannot handle the input (e.g. None + str)
        return {'error': f'{type(e).__name__}: {e}', 'kind': 'python'}


def main():
    with open(os.path.join(HERE, 'chat-cases.json'), encoding='utf-8') as f:
        spec = json.load(f)
    # (directory, golden-file prefix): fixture templates share names with real ones.
    dirs = [(d, '') for d in sys.argv[1:]] or [
        (os.path.join(REPO, '..', 'shared', 'templates'), ''),
        (os.path.join(REPO, 'src', 'testing', 'fixtures', 'templates'), 'fixture-'),
        (os.path.join(HERE, 'templates'), 'feature-'),
    ]
    out_dir = os.path.join(HERE, 'golden')
    os.makedirs(out_dir, exist_ok=True)
    env = make_env()
    for d, prefix in dirs:
        if not os.path.isdir(d):
            print(f'skipping {d} (absent)')
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith('.jinja'):
                continue
            with open(os.path.join(d, name), encoding='utf-8') as f:
                text = f.read()
            tokens = spec['specialTokens'].get(name, spec['specialTokens']['default'])
            null_content = renders_null_content(env, text, tokens)
            results = {c['name']: render_case(env, text, c, tokens, spec['tools'], null_content) for c in spec['cases']}
            golden = {
                'template': name,
                'null_content': null_content,
                'sha256': hashlib.sha256(text.encode('utf-8')).hexdigest(),
                'jinja2': jinja2.__version__,
                'now': FIXED_NOW.isoformat(),
                'results': results,
            }
            with open(os.path.join(out_dir, prefix + name[:-len('.jinja')] + '.json'), 'w', encoding='utf-8') as f:
                json.dump(golden, f, ensure_ascii=False, indent=1)
                f.write('\n')
            errors = sum(1 for r in results.values() if 'error' in r)
            print(f'{name}: {len(results)} cases, {errors} raised, content None passed as {"None" if null_content else repr("")}')


if __name__ == '__main__':
    main()
