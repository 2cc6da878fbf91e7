/**
 * The bounded compile (issue #19): a grammar the process has not compiled before is first
 * compiled in a worker thread, against the same vocabulary, under a time limit; only a grammar
 * that compiled there in time is compiled on the main thread.
 *
 * Why a probe and not the compile itself in the worker: xgrammar's compiled grammars and matchers
 * live in one wasm instance's memory, and the package can neither share nor serialize them, so
 * the grammar the matchers use must be compiled on the thread that runs them. The same compile
 * of the same grammar takes about as long on either thread, so the probe bounds the main
 * thread's compile by the limit, and a grammar that would hold the event loop for seconds (or
 * for good: `((a{0,999}){0,999}){0,999}` never finishes) is refused with a 400 naming the limit
 * while the server goes on answering. An invalid grammar fails in the probe too, so it never
 * reaches (and aborts) the main thread's instance.
 *
 * Each grammar is probed once per vocabulary (`proven`), and one worker serves every probe, one
 * at a time: it is terminated on a time-out or any failure (its instance may be unsound) and
 * started again by the next probe, which then registers its vocabularies again. Where worker
 * threads do not exist (browsers), grammars compile unprobed; see docs/api.md.
 */
import type { TextTokenizer } from '../text/tokenizer';
import { isNode, OffThread, OffThreadError, OffThreadExit, OffThreadTimeout } from '../platform/off-thread';
import { SCHEMA_EBNF_ARGS, type GrammarOps } from './compile';
import { StructuredOutputError } from './errors';
import { PROBE_WORKER_SOURCE } from './probe-worker';
import { fatalMessage, xgrammarFileInNode } from './xgrammar';

/** Grammar keys proven to compile in time, across vocabularies (the oldest is dropped past this). */
const MAX_PROVEN = 1024;
const proven = new Set<string>();

let host: Promise<OffThread | null> | null = null;
/** The worker's epoch each vocabulary was registered in. */
const registered = new Map<number, number>();
/** One probe at a time, so that a time limit counts only its own probe's work. */
let queue: Promise<unknown> = Promise.resolve();

/** Vocabularies (tokenizer and logit rows) get ids; the worker knows them by these. */
const vocabIds = new WeakMap<TextTokenizer, Map<number, number>>();
let nextVocabId = 1;
// A tokenizer that is gone takes its compiler in the worker with it.
const dropped = new FinalizationRegistry<number>((id) => {
  registered.delete(id);
  void host?.then((h) => h?.call('drop', [id])).catch(() => {});
});

function vocabId(tokenizer: TextTokenizer, vocabSize: number): number {
  let bySize = vocabIds.get(tokenizer);
  if (!bySize) vocabIds.set(tokenizer, (bySize = new Map()));
  let id = bySize.get(vocabSize);
  if (id === undefined) {
    bySize.set(vocabSize, (id = nextVocabId++));
    dropped.register(tokenizer, id);
  }
  return id;
}

/** xgrammar's TokenizerInfo arguments for a vocabulary (the same on both threads). */
export function tokenizerInfoArgs(tokenizer: TextTokenizer, vocabSize: number): [string[], string, boolean, number, number[]] {
  return [[...tokenizer.vocab], tokenizer.vocabType, tokenizer.prependSpace, vocabSize, [...tokenizer.eosIds]];
}

function probeHost(): Promise<OffThread | null> {
  host ??= (async () => (isNode() ? OffThread.create(PROBE_WORKER_SOURCE, { xgrammarFile: await xgrammarFileInNode() }) : null))().catch(() => null);
  return host;
}

/**
 * Compiles through `compile` in the worker within `timeLimitMs`, unless grammar `key` was proven
 * for this vocabulary before. Throws StructuredOutputError naming `param`: for a grammar past the
 * limit, or one xgrammar refuses. Resolves at once where no worker can be had.
 */
export async function probeCompile(
  tokenizer: TextTokenizer,
  vocabSize: number,
  key: string,
  param: string,
  timeLimitMs: number,
  compile: (ops: GrammarOps<void>) => Promise<void>,
): Promise<void> {
  const id = vocabId(tokenizer, vocabSize);
  const provenKey = `${id}\0${key}`;
  if (proven.has(provenKey)) return;
  const h = await probeHost();
  if (!h) return;
  const run = queue.then(() => probeOnce(h, tokenizer, vocabSize, id, param, timeLimitMs, compile));
  queue = run.catch(() => {});
  await run;
  proven.add(provenKey);
  if (proven.size > MAX_PROVEN) proven.delete(proven.values().next().value!);
}

async function probeOnce(
  h: OffThread,
  tokenizer: TextTokenizer,
  vocabSize: number,
  id: number,
  param: string,
  timeLimitMs: number,
  compile: (ops: GrammarOps<void>) => Promise<void>,
): Promise<void> {
  // Registering a vocabulary (xgrammar's TokenizerInfo) is the worker's set-up, not the grammar's cost.
  const epoch = h.start();
  if (registered.get(id) !== epoch) {
    await h.call('init', [id, tokenizerInfoArgs(tokenizer, vocabSize)]);
    registered.set(id, epoch);
  }
  const deadline = performance.now() + timeLimitMs;
  const call = async <T>(op: string, args: unknown[]): Promise<T> => {
    try {
      return await h.call<T>(op, args, deadline - performance.now());
    } catch (e) {
      throw remoteError(e, () => h.terminate(epoch), param, timeLimitMs);
    }
  };
  await compile({
    schemaEbnf: (schema) => call('schemaEbnf', [schema, ...SCHEMA_EBNF_ARGS]),
    normalizeEbnf: (ebnf) => call('normalizeEbnf', [ebnf]),
    grammar: (ebnf) => call('grammar', [id, ebnf]),
    structuralTag: (tag) => call('structuralTag', [id, tag]),
  });
}

/** What a failed call in the worker means for the request; the worker is not used again after one. */
function remoteError(e: unknown, terminate: () => void, param: string, timeLimitMs: number): Error {
  terminate();
  if (e instanceof OffThreadTimeout)
    return new StructuredOutputError(param, `${param}: the grammar did not compile within the time limit of ${timeLimitMs} ms; simplify it`, { cause: e });
  if (e instanceof OffThreadExit) return new StructuredOutputError(param, `${param}: the grammar engine failed compiling it (${e.message})`, { cause: e });
  if (e instanceof OffThreadError) {
    // As withFatalMessage does on the main thread: xgrammar's reason, else the error's message.
    const stderr = (e.detail.stderr as string[] | undefined) ?? [];
    const fatal = stderr.map(fatalMessage).find((m) => m !== null);
    return new Error(fatal ?? e.message, { cause: e });
  }
  return e as Error;
}
