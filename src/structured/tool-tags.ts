/**
 * Tool calls as xgrammar structural tags, written exactly as each chat template teaches its model
 * (and as src/text/tool-calls.ts parses them back):
 *
 * - `hermes`:  `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, calls separated by `\n`;
 * - `llama3`:  `{"name": "f", "parameters": {...}}`, one call per reply (Llama 3.1's template
 *   renders a single call per message and refuses more, so a second call could not go back into
 *   the history; the parser's `; ` separator is for other servers' output);
 * - `mistral`: `[TOOL_CALLS][{"name": "f", "arguments": {...}}, {...}]`: one list holds every call;
 *   `granite` the same list after `<|tool_call|>`, `phi4` that list closed by `<|/tool_call|>`.
 *
 * Every call is one tag per tool: its begin names the tool, its content is the tool's parameters
 * grammar, its end closes the call. So a call can only name a listed tool, and its arguments
 * follow that tool's schema.
 *
 * Special tokens (`<tool_call>` in Qwen, `[TOOL_CALLS]` in Mistral): xgrammar (0.1.27) treats a
 * vocabulary entry as text unless its decoded text is empty, and we hand it each token's own text
 * (added tokens included, see TextTokenizer.vocab), so the control token `[TOOL_CALLS]` is simply
 * a token whose text is "[TOOL_CALLS]". A tag that begins with that text can start with the one
 * special token (what the model was trained to emit) or with the same characters spelled out; the
 * detokenized text is the same either way (chat keeps `[TOOL_CALLS]` in the text for the parser),
 * so both parse into the same calls. No token-level trigger is needed, and the engine does not
 * have to insert the token itself.
 */
import type { ToolCallFormat } from '../text/tool-calls';
import type { ForcedTool } from './spec';

/** xgrammar's structural-tag `tag` item. */
interface Tag {
  type: 'tag';
  begin: string;
  content: object;
  end: string;
}

interface CallShape {
  /** Key of the arguments in the call object. */
  argsKey: 'arguments' | 'parameters';
  /** Wraps each call's JSON. */
  open: string;
  close: string;
  /** Between two calls. */
  separator: string;
  /** More than one call per reply can be written (and rendered back by the template). */
  parallel: boolean;
  /** Wraps the whole list of calls (mistral, granite); absent when each call stands alone. */
  list?: { begin: string; end: string };
  /** What opens a call (or the list) in free text under tool_choice `auto`; a prefix of every begin. */
  trigger: string;
}

const SHAPES: Record<ToolCallFormat, CallShape> = {
  hermes: { argsKey: 'arguments', open: '<tool_call>\n', close: '\n</tool_call>', separator: '\n', parallel: true, trigger: '<tool_call>' },
  llama3: { argsKey: 'parameters', open: '', close: '', separator: '; ', parallel: false, trigger: '{"name": ' },
  mistral: { argsKey: 'arguments', open: '', close: '', separator: ', ', parallel: true, list: { begin: '[TOOL_CALLS][', end: ']' }, trigger: '[TOOL_CALLS]' },
  // Granite 3.x: the list after <|tool_call|>, as its template's default system prompt asks.
  granite: { argsKey: 'arguments', open: '', close: '', separator: ', ', parallel: true, list: { begin: '<|tool_call|>[', end: ']' }, trigger: '<|tool_call|>' },
  // Phi-4-mini: Granite's list, closed by <|/tool_call|>.
  phi4: { argsKey: 'arguments', open: '', close: '', separator: ', ', parallel: true, list: { begin: '<|tool_call|>[', end: ']<|/tool_call|>' }, trigger: '<|tool_call|>' },
};

/** Turns a parameters schema (JSON text) into EBNF with root rule `root` (grammar.ts's JSON-correct conversion). */
export type ArgsEbnf = (schema: string) => Promise<string>;

/** Each tool's parameters grammar, as a structural-tag content. */
function argsContents(tools: ForcedTool[], argsEbnf: ArgsEbnf): Promise<object[]> {
  return Promise.all(tools.map(async (t) => ({ type: 'grammar', grammar: await argsEbnf(JSON.stringify(t.parameters ?? { type: 'object' })) })));
}

/** One tag per tool; `open` goes before the call's JSON. */
function callTags(shape: CallShape, tools: ForcedTool[], contents: object[], open = shape.open): Tag[] {
  return tools.map((t, i) => ({
    type: 'tag',
    // The template's spacing (`"name": `, `, "arguments": `): what the model saw in training.
    begin: `${open}{"name": ${JSON.stringify(t.name)}, "${shape.argsKey}": `,
    content: contents[i]!,
    end: `}${shape.close}`,
  }));
}

/** One or more calls (`multiple`, where the format has parallel calls), or exactly one, separated as the format separates them. */
function callList(shape: CallShape, tags: Tag[], multiple: boolean): object {
  const calls = { type: 'tags_with_separator', tags, separator: shape.separator, at_least_one: true, stop_after_first: !(multiple && shape.parallel) };
  // xgrammar's tags_with_separator must end its sequence (it cannot be followed by a const
  // string), so mistral's list brackets are a tag around it: the tag's end closes the list.
  return shape.list ? { type: 'tag', begin: shape.list.begin, content: calls, end: shape.list.end } : calls;
}

/** Forced tool calls (tool_choice `required` / named): the reply is the calls and nothing else. */
export async function forcedToolCallsTag(format: ToolCallFormat, tools: ForcedTool[], multiple: boolean, argsEbnf: ArgsEbnf): Promise<object> {
  const shape = SHAPES[format];
  const tags = callTags(shape, tools, await argsContents(tools, argsEbnf));
  return { type: 'structural_tag', format: callList(shape, tags, multiple) };
}

const PYTHON_TAG = '<|python_tag|>';

/**
 * Strict tools under tool_choice `auto`: any text until the format's trigger, then calls that
 * must follow the tags.
 */
export async function autoToolCallsTag(format: ToolCallFormat, tools: ForcedTool[], argsEbnf: ArgsEbnf): Promise<object> {
  const shape = SHAPES[format];
  const contents = await argsContents(tools, argsEbnf);
  const tags = callTags(shape, tools, contents);
  const triggered = (triggers: string[], items: object[], stopAfterFirst = false) => ({ type: 'triggered_tags', triggers, tags: items, stop_after_first: stopAfterFirst });
  switch (format) {
    case 'hermes':
      // Calls anywhere in the text, free text between and after them.
      return { type: 'structural_tag', format: triggered([shape.trigger], tags) };
    case 'mistral':
    case 'granite':
    case 'phi4':
      // The trigger opens the whole list; free text again after its `]`.
      return { type: 'structural_tag', format: triggered([shape.trigger], [callList(shape, tags, true)]) };
    case 'llama3': {
      // The parser reads a reply as a call only when the reply begins with one (or with
      // <|python_tag|>, which Llama 3.1 writes before calls) and is nothing else: so a call, once
      // opened, must be valid and ends the reply (stop_after_first: only end of turn after it).
      const afterTag = callTags(shape, tools, contents, PYTHON_TAG);
      return { type: 'structural_tag', format: triggered([shape.trigger, PYTHON_TAG], [...tags, ...afterTag], true) };
    }
  }
}
