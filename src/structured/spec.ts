/**
 * The vocabulary of structured output, at the bottom of the folder: what a request asks the output
 * to follow (`ConstraintSpec`), and the compiled grammar and per-choice matcher the backends consult
 * (./grammar.ts makes them; ./compile.ts and ./tool-tags.ts turn a spec into a grammar).
 */
import type { ToolCallFormat } from '../text/tool-calls';

/** What a request asked the output to follow. `param` is the request field it came from (for errors). */
export type ConstraintSpec =
  | { kind: 'json_object'; param?: string }
  | { kind: 'json_schema'; schema: unknown; param?: string }
  | { kind: 'regex'; pattern: string; param?: string }
  | { kind: 'ebnf'; grammar: string; param?: string }
  /** Forced tool calls (tool_choice required / named) in the chat template's call format; `multiple`: one or more calls. */
  | { kind: 'tool_calls'; format: ToolCallFormat; tools: ForcedTool[]; multiple: boolean; param?: string }
  /**
   * Strict tools under tool_choice `auto`: free text until the model opens a call in the format,
   * then the call (name and arguments) must follow one of `tools`; free text again after it.
   */
  | { kind: 'tool_calls_auto'; format: ToolCallFormat; tools: ForcedTool[]; param?: string };

export interface ForcedTool {
  name: string;
  /** The function's parameters schema (absent: any JSON object). */
  parameters?: unknown;
}

export interface CompileOptions {
  /**
   * How long a new grammar may take to compile, in ms (default GRAMMAR_LIMITS.compileTimeMs);
   * past it the request is refused with a StructuredOutputError naming the limit.
   */
  timeLimitMs?: number;
}

/** One choice's grammar state. Not shareable between choices: make one per choice. */
export interface Constraint {
  /** Words of the bitmask (`ceil(vocabSize / 32)`; bit set = allowed). */
  readonly words: number;
  /** The request field the grammar came from, for errors (`ebnf`, `response_format`, `tools`). */
  readonly param?: string;
  /** Writes the allowed-token bitmask for the next token into `out` (words past the tokenizer's vocabulary are 0). */
  mask(out: Uint32Array): Promise<void>;
  /**
   * Whether the grammar forces some text next (xgrammar's jump-forward string is not empty): a
   * cheap look that tells jump-forward decoding when a mask allowing one token is likely.
   */
  forcesText?(): boolean;
  /** Advances past the sampled token; false when the grammar did not allow it. */
  accept(id: number): boolean;
  /**
   * Undoes the last `tokens` accepted tokens (speculative decoding advances the grammar through a
   * proposal to mask each of its rows, then goes back). Absent: such a request does not speculate.
   */
  rollBack?(tokens: number): void;
  /** The grammar is complete (its stop token was accepted): generation should end with 'stop'. */
  isTerminated(): boolean;
  dispose(): void;
}

/** A compiled grammar; `start()` gives a fresh matcher per choice. */
export interface CompiledConstraint {
  readonly spec: ConstraintSpec;
  start(): Promise<Constraint>;
}
