#!/usr/bin/env python3
"""Renders a table of Python `str` method calls and string filters through jinja2, set up as
render_golden.py sets it up (the environment transformers uses), and writes the results to
py-str-cases.json beside this script. py-str.test.ts renders the same template text with our
renderer and must get the same output, or an error where Python raised one.

Usage (from the repository root): python3 src/text/testdata/py_str_cases.py
Rerun it after changing the receivers or calls below, and commit the JSON.
"""
import json
import os

import jinja2

from render_golden import make_env

HERE = os.path.dirname(os.path.abspath(__file__))

# Receivers chosen where JavaScript and Python differ: spaces vs. newlines, Unicode whitespace
# (\x1c-\x1f and \x85 are Python whitespace, \ufeff is JavaScript's), code points outside the
# BMP (one index in Python, two in JavaScript), title-case digraphs and ß, empty strings.
RECEIVERS = [
    '   Hello!',
    '\n\n  Hello world \n',
    '  a  b\tc\n d  ',
    'a,b,,c,',
    "hello wORLD it's 3rd-time x_y",
    'ǆemal ßtraße ﬁne',
    'Grüße, 日本語 🚀! 🚀x',
    '',
    '\x1c\x85 x \ufeff\u3000',
    'line1\nline2\r\nline3\rline4\x0bline5\x0cline6\x1cline7\x85line8\u2028end\n',
    '12345',
    '²³',
    'ABC DEF',
    'Hello World',
    '<think>\nreason\n</think>\n\nanswer',
]

STRIP_ARGS = [[], [None], ['\n'], [' \n'], [''], ['!H'], ['\n <>'], ['🚀!x']]
SPLIT_ARGS = [[], [None], [None, 1], [None, 0], [','], [',', 1], [',', 0], [',', -1], [' '], [' ', 2], ['</think>'], ['🚀'], ['']]
SPLIT_KWARGS = [{'sep': ',', 'maxsplit': 2}, {'maxsplit': 1}, {'sep': None}]
AFFIX_ARGS = [['Hel'], [['x', '  ']], [['\n', 'a']], [''], ['lo', 3], ['H', 0, 1], ['l', -4], ['!'], ['🚀x'], [['<think>', '</think>']], [['<think>']], [['\n'], 1]]
FIND_ARGS = [['l'], ['l', 3], ['l', 3, 8], ['l', -5], ['zz'], [''], ['', 3], ['🚀'], ['x'], [',']]
METHODS = {
    'strip': STRIP_ARGS,
    'lstrip': STRIP_ARGS,
    'rstrip': STRIP_ARGS,
    'split': SPLIT_ARGS,
    'rsplit': SPLIT_ARGS,
    'splitlines': [[], [True], [False]],
    'startswith': AFFIX_ARGS,
    'endswith': AFFIX_ARGS,
    'replace': [['l', 'L'], ['l', 'L', 1], ['', '-'], ['', '-', 2], ['o', '0', 0], ['🚀', 'R'], ['\n', ' ', -1], ['zz', 'y']],
    'find': FIND_ARGS,
    'rfind': FIND_ARGS,
    'index': FIND_ARGS,
    'rindex': FIND_ARGS,
    'count': FIND_ARGS,
    'partition': [[','], ['zz'], ['🚀']],
    'rpartition': [[','], ['zz'], ['🚀']],
    'removeprefix': [['   '], ['Hel'], ['']],
    'removesuffix': [['\n'], ['!'], ['']],
    'upper': [[]],
    'lower': [[]],
    'title': [[]],
    'capitalize': [[]],
    'swapcase': [[]],
    'casefold': [[]],
    'isdigit': [[]],
    'isdecimal': [[]],
    'isnumeric': [[]],
    'isalpha': [[]],
    'isalnum': [[]],
    'isspace': [[]],
    'isupper': [[]],
    'islower': [[]],
    'istitle': [[]],
    'zfill': [[8], [0]],
    'center': [[20], [21, '*'], [3]],
    'ljust': [[20, '.'], [2]],
    'rjust': [[20, '.'], [2]],
    'expandtabs': [[], [4]],
}
KWARG_CALLS = {
    'split': SPLIT_KWARGS,
    'rsplit': SPLIT_KWARGS,
    'splitlines': [{'keepends': True}],
}
# Receivers of their own: a separator for join, a format string for format.
JOIN_CASES = [(', ', [['a', 'b', 'c']]), ('', [['x', '🚀', 'y']]), ('-', [[]]), ('\n', [['only']]), (', ', [['a', 1]])]
FORMAT_CASES = [
    ('{} and {}', ['a', 'b'], {}),
    ('{0}{1}{0}', ['x', 'y'], {}),
    ('{name}: {0}', ['v'], {'name': 'k'}),
    ('{{literal}} {}', ['z'], {}),
    ('{}', [None], {}),
    ('{} {}', [True, 3], {}),
]
TRAILING_COMMAS = [
    '{{ s.split("l",) | tojson }}',
    '{{ s.replace("l", "L", 1,) | tojson }}',
    '{{ ("a", "b",) | tojson }}',
    '{{ ("a",) | tojson }}',
    '{{ ((1, 2),) | tojson }}',
    '{{ [("x",), ("y", "z",)] | tojson }}',
    '{% for x in ("ab",) %}{{ x }};{% endfor %}',
    '{{ "a" in ("a",) }}',
    '{{ s.strip().endswith(("d", "!",)) }}',
    '{{ (s.strip(),)[0] }}',
]
# jinja2's string filters take str() of other values (Gemma 2 writes `message['content'] | trim`).
OTHER_OPERANDS = [
    '{{ none | trim }}',
    '{{ none | upper }}',
    '{{ none | title }}',
    '{{ none | capitalize }}',
    '{{ none | replace("N", "n") }}',
    '{{ 12 | trim }}',
    '{{ true | lower }}',
    '{{ ["a ", "b"] | trim }}',
    '{{ undefined_name | trim }}|{{ undefined_name | upper }}',
    '{{ none | length }}',
]
# Filters templates apply to strings (`| trim` is in five of the real templates).
FILTER_CALLS = {
    'trim': [[], ['\n'], [' !H']],
    'upper': [[]],
    'lower': [[]],
    'title': [[]],
    'capitalize': [[]],
    'length': [[]],
    'count': [[]],
    'replace': [['l', 'L'], ['l', 'L', 1], ['', '-']],
    'wordcount': [[]],
}


def tuple_literal(items):
    return '(' + ', '.join(json.dumps(x) for x in items) + (',)' if len(items) == 1 else ')')


def render(env, text, variables):
    try:
        return {'output': env.from_string(text).render(**variables)}
    except Exception as e:  # Python raised: our renderer must raise too
        return {'error': f'{type(e).__name__}: {e}'}


def main():
    env = make_env()
    cases = []
    templates = []

    def add(group, text, variables):
        # `s` is written as its index in `receivers` when it is one of them (a smaller file).
        stored = dict(variables)
        if variables['s'] in RECEIVERS:
            stored['s'] = RECEIVERS.index(variables['s'])
        # Likewise the template, as an index into `templates`.
        if text not in templates:
            templates.append(text)
        cases.append({'group': group, 'template': templates.index(text), 'vars': stored, **render(env, text, variables)})

    # Arguments travel as variables and are spread into the call, so each case is one template.
    call = '{{ s.%s(*args, **kwargs) | tojson }}'
    for name, arg_sets in METHODS.items():
        for s in RECEIVERS:
            for args in arg_sets:
                # Tuples (the only form startswith/endswith take) are written as literals, the
                # one-element ones as Python writes them: `("<think>",)`.
                if any(isinstance(a, list) for a in args) and name in ('startswith', 'endswith'):
                    lit = ', '.join(tuple_literal(a) if isinstance(a, list) else json.dumps(a) for a in args)
                    add(name, '{{ s.%s(%s) | tojson }}' % (name, lit), {'s': s})
                else:
                    add(name, call % name, {'s': s, 'args': args, 'kwargs': {}})
            for kwargs in KWARG_CALLS.get(name, []):
                add(name, call % name, {'s': s, 'args': [], 'kwargs': kwargs})
    for s, args in JOIN_CASES:
        add('join', call % 'join', {'s': s, 'args': args, 'kwargs': {}})
    for s, args, kwargs in FORMAT_CASES:
        add('format', call % 'format', {'s': s, 'args': args, 'kwargs': kwargs})
    # jinja2 syntax around these calls: trailing commas in calls and tuples, one-element tuples.
    for text in TRAILING_COMMAS:
        add('trailing commas', text, {'s': RECEIVERS[1]})
    for text in OTHER_OPERANDS:
        add('filters on other values', text, {'s': RECEIVERS[0]})
    for name, arg_sets in FILTER_CALLS.items():
        for s in RECEIVERS:
            for args in arg_sets:
                add('|' + name, '{{ s | %s(*args) | tojson }}' % name, {'s': s, 'args': args})

    out = {
        'comment': 'Generated by py_str_cases.py (Python jinja2); do not edit by hand. template is an index into templates; a number as vars.s is an index into receivers.',
        'jinja2': jinja2.__version__,
        'cases': cases,
    }
    # One case a line: diffs of a regeneration stay readable.
    with open(os.path.join(HERE, 'py-str-cases.json'), 'w', encoding='utf-8') as f:
        f.write('{\n"comment": %s,\n"jinja2": %s,\n' % (json.dumps(out['comment']), json.dumps(out['jinja2'])))
        f.write('"receivers": %s,\n' % json.dumps(RECEIVERS))
        f.write('"templates": [\n%s\n],\n"cases": [\n' % ',\n'.join(json.dumps(t) for t in templates))
        f.write(',\n'.join(json.dumps(c) for c in cases))
        f.write('\n]}\n')
    print(f'{len(cases)} cases, {sum(1 for c in cases if "error" in c)} raised')


if __name__ == '__main__':
    main()
