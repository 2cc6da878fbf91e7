/**
 * The model-output side of a chat turn: reasoning first, then tool calls in what remains.
 * Feed text deltas (from the streaming detokenizer) to `push`, call `finish` at the end; the
 * events map one to one onto OpenAI chat-completion chunk deltas.
 */
import { ReasoningParser, type ReasoningOptions } from './reasoning';
import { pushEvent, type OutputEvent, type ToolCallDelta } from './stream-text';
import { ToolCallParser, type ToolCallFormat } from './tool-calls';

export interface ChatOutputParserOptions {
  /** null/undefined: no reasoning split. */
  reasoning?: ReasoningOptions | null;
  /** null/undefined: no tool-call parsing (e.g. no tools in the request or tool_choice "none"). */
  toolCallFormat?: ToolCallFormat | null;
  newToolCallId?: () => string;
}

export class ChatOutputParser {
  private readonly reasoning: ReasoningParser | null;
  private readonly tools: ToolCallParser | null;

  constructor(opts: ChatOutputParserOptions = {}) {
    this.reasoning = opts.reasoning ? new ReasoningParser(opts.reasoning) : null;
    this.tools = opts.toolCallFormat ? new ToolCallParser({ format: opts.toolCallFormat, newId: opts.newToolCallId }) : null;
  }

  /** True once a tool call was emitted: the API then sets `finish_reason: "tool_calls"`. */
  get hasToolCalls(): boolean {
    return this.tools?.hasToolCalls ?? false;
  }

  push(delta: string): OutputEvent[] {
    return this.route(this.reasoning ? this.reasoning.push(delta) : [{ type: 'content', text: delta }], false);
  }

  finish(): OutputEvent[] {
    return this.route(this.reasoning ? this.reasoning.finish() : [], true);
  }

  private route(events: OutputEvent[], final: boolean): OutputEvent[] {
    if (!this.tools) return events.filter((e) => e.type === 'tool_call' || e.text !== '');
    const out: OutputEvent[] = [];
    for (const e of events) {
      if (e.type === 'content') for (const x of this.tools.push(e.text)) pushEvent(out, x);
      else pushEvent(out, e);
    }
    if (final) for (const x of this.tools.finish()) pushEvent(out, x);
    return out;
  }
}

/** The non-streamed result: the events folded into one message. */
export interface FoldedOutput {
  content: string;
  reasoning_content: string;
  tool_calls: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
}

export function foldEvents(events: Iterable<OutputEvent>): FoldedOutput {
  const folded: FoldedOutput = { content: '', reasoning_content: '', tool_calls: [] };
  for (const e of events) {
    if (e.type === 'content') folded.content += e.text;
    else if (e.type === 'reasoning') folded.reasoning_content += e.text;
    else foldToolDelta(folded.tool_calls, e.delta);
  }
  return folded;
}

function foldToolDelta(calls: FoldedOutput['tool_calls'], d: ToolCallDelta): void {
  const call = (calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
  if (d.id) call.id = d.id;
  if (d.function.name) call.function.name += d.function.name;
  if (d.function.arguments) call.function.arguments += d.function.arguments;
}
