/**
 * `webgpu-llm serve --model PATH_OR_URL [--port 8080] [--host 127.0.0.1] [--api-key KEY]`:
 * loads the model on this machine's GPU (Dawn) and serves the OpenAI API over HTTP.
 */
import type { LoadProgress } from '../loader/progress';
import { serve, type Server } from '../transport/node-server';
import { MTP_MAX_GUESSES } from '../engine/mtp-proposer';
import { UsageError } from './io';

export const SERVE_USAGE = `Usage: webgpu-llm serve --model PATH_OR_URL [options]

Serves the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models, ...) for one model.

  --model, -m PATH_OR_URL  a .gguf file, a Hugging Face folder, a URL or a repo id (org/name[:Q4_K_M])
  --mmproj PATH_OR_URL     the model's vision tower (llama.cpp's mmproj GGUF; SmolVLM): chats may carry images
  --port, -p N             port to listen on (default 8080; 0 picks a free one)
  --host ADDR              address to bind (default 127.0.0.1: this machine only)
  --api-key KEY            require "Authorization: Bearer KEY" (also read from WEBGPU_LLM_API_KEY)
  --id NAME                the model's id in the API (default: its architecture)
  --precision P            auto (default), f32 or f16
  --context-length N       tokens per sequence, prompt and completion
  --max-body-size BYTES    largest request body (default 33554432, 32 MiB; larger ones get a 413)
  --grammar-time-limit MS  how long a new structured-output grammar may compile (default 3000; past it a 400)
  --allow-image-urls       fetch http(s) image URLs in chat image parts (default off: data: URLs only)
  --lora NAME=PATH         load a LoRA adapter (a PEFT folder or a GGUF LoRA; path, URL or repo id) that
                           requests pick with "model": "<id>:NAME" or "lora_path": "NAME" (repeatable)
  --max-lora-rank N        the largest rank an adapter loaded later may have (default 64)
  --integer-dot            one-token decode steps by int8 dot products where the GPU has them (default off)
  --speculative-ngram N,K  n-gram speculative decoding for requests that ask for none: propose up to K tokens
                           that followed the last N tokens earlier in the prompt and output (default off)
  --speculative-mtp        the model's multi-token-prediction head guesses tokens for requests that ask for none
                           (Qwen3.5 files with the head; a model without one fails the load)
  --speculative-mtp-tokens K
                           tokens the MTP head guesses per step, each chained on its own output (1 to 8;
                           default 1; implies --speculative-mtp)
  --mtp                    load the model's multi-token-prediction head so that requests may ask for
                           "speculative": {"type": "mtp"} (default: only with --speculative-mtp; it takes GPU memory)
  --draft-model PATH       a draft model for speculative decoding: a smaller model with the same tokenizer
                           (file, folder, URL or repo id) guesses tokens the model verifies (default none)
  --draft-tokens K         tokens the draft model guesses per step (1 to 32; default 8)
  --no-cache               read remote models without keeping a copy
  --kv-cache-dir DIR       keep full KV pages of prompt prefixes in DIR, so after a restart a known prefix is
                           read back instead of computed (default off)
  --kv-cache-budget BYTES  bytes the KV pages in DIR may take (default 4294967296, 4 GiB; oldest used go first)
  --device-recovery N,S    recover from up to N GPU device losses within S seconds (default 3,60; 0 turns
                           recovery off: a loss ends the engine)
  --fault-injection        POST /debug/fault {"kind": "device_lost"} loses the GPU device as a driver reset
                           would, to watch the engine recover (loopback clients only; default off)
  --help, -h               this text`;


export interface ServeArgs {
  model: string;
  port: number;
  host: string;
  apiKey?: string;
  id?: string;
  precision: 'auto' | 'f32' | 'f16';
  contextLength?: number;
  /** `--integer-dot`: EngineOptions.integerDot. */
  integerDot?: boolean;
  /** `--speculative-ngram N,K` or `--speculative-mtp` (`--speculative-mtp-tokens K`): EngineOptions.speculative. */
  speculative?: { type: 'ngram'; n: number; k: number } | { type: 'mtp'; k?: number };
  /** `--mtp`: EngineOptions.mtp. */
  mtp?: boolean;
  /** `--draft-model F --draft-tokens K`: CreateEngineOptions.draft. */
  draft?: { model: string; tokens?: number };
  cache: boolean;
  maxBodyBytes?: number;
  grammarCompileMs?: number;
  /** `--mmproj`: CreateEngineOptions.mmproj. */
  mmproj?: string;
  /** `--allow-image-urls`: ServeOptions.allowImageUrls. */
  allowImageUrls?: boolean;
  /** LoRA adapters by name (from `--lora NAME=PATH`, in order). */
  lora: Record<string, string>;
  maxLoraRank?: number;
  /** `--fault-injection`: ServeOptions.faultInjection. */
  faultInjection?: boolean;
  /** `--kv-cache-dir`, `--kv-cache-budget`: CreateEngineOptions.persistKv. */
  persistKv?: { dir: string; budgetBytes?: number };
  /** `--device-recovery N,S`: CreateEngineOptions.deviceRecovery. */
  deviceRecovery?: { maxLosses: number; windowMs: number } | false;
}

/** Parses the flags after `serve` (`--flag value` or `--flag=value`); null for --help. */
export function parseServeArgs(args: string[], env: Record<string, string | undefined> = {}): ServeArgs | null {
  const out: Partial<ServeArgs> & { cache: boolean; precision: ServeArgs['precision']; lora: Record<string, string> } = { cache: true, precision: 'auto', lora: {} };
  const alias: Record<string, string> = { '-m': '--model', '-p': '--port', '-h': '--help' };
  for (let i = 0; i < args.length; i++) {
    let [flag, value] = args[i].includes('=') && args[i].startsWith('--') ? [args[i].slice(0, args[i].indexOf('=')), args[i].slice(args[i].indexOf('=') + 1)] : [args[i], undefined];
    flag = alias[flag] ?? flag;
    if (flag === '--help') return null;
    if (flag === '--no-cache') {
      out.cache = false;
      continue;
    }
    if (flag === '--integer-dot') {
      out.integerDot = true;
      continue;
    }
    if (flag === '--mtp') {
      out.mtp = true;
      continue;
    }
    if (flag === '--speculative-mtp') {
      if (out.speculative?.type === 'ngram') throw new UsageError('--speculative-mtp and --speculative-ngram: choose one');
      out.speculative = { type: 'mtp', ...out.speculative };
      continue;
    }
    if (flag === '--fault-injection') {
      out.faultInjection = true;
      continue;
    }
    const need = (): string => {
      const v = value ?? args[++i];
      if (v === undefined || (value === undefined && v.startsWith('--'))) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    const int = (min: number, max: number): number => {
      const v = need();
      const n = Number(v);
      if (!/^\d+$/.test(v) || n < min || n > max) throw new UsageError(`${flag} must be an integer from ${min} to ${max}, got "${v}"`);
      return n;
    };
    switch (flag) {
      case '--model':
        out.model = need();
        break;
      case '--port':
        out.port = int(0, 65535);
        break;
      case '--host':
        out.host = need();
        break;
      case '--api-key':
        out.apiKey = need();
        break;
      case '--id':
        out.id = need();
        break;
      case '--context-length':
        out.contextLength = int(1, 1 << 24);
        break;
      case '--max-body-size':
        out.maxBodyBytes = int(1024, 2 ** 40);
        break;
      case '--grammar-time-limit':
        out.grammarCompileMs = int(1, 3_600_000);
        break;
      case '--mmproj':
        out.mmproj = need();
        break;
      case '--allow-image-urls':
        out.allowImageUrls = true;
        break;
      case '--lora': {
        const v = need();
        const eq = v.indexOf('=');
        if (eq <= 0 || eq === v.length - 1) throw new UsageError(`--lora wants NAME=PATH (a name, "=", then the adapter's folder, file, URL or repo id), got "${v}"`);
        const name = v.slice(0, eq);
        if (name.includes(':')) throw new UsageError(`--lora ${v}: the adapter's name must not contain ":" (requests name it as "<model>:${name}")`);
        if (name in out.lora) throw new UsageError(`--lora ${name} is given twice`);
        out.lora[name] = v.slice(eq + 1);
        break;
      }
      case '--kv-cache-dir':
        out.persistKv = { ...out.persistKv, dir: need() };
        break;
      case '--kv-cache-budget':
        out.persistKv = { dir: '', ...out.persistKv, budgetBytes: int(1, 2 ** 50) };
        break;
      case '--device-recovery': {
        const v = need();
        const m = /^(\d+),(\d+)$/.exec(v);
        if (v === '0') out.deviceRecovery = false;
        else if (m && Number(m[1]) >= 1 && Number(m[1]) <= 1000 && Number(m[2]) >= 1 && Number(m[2]) <= 86400) out.deviceRecovery = { maxLosses: Number(m[1]), windowMs: Number(m[2]) * 1000 };
        else throw new UsageError(`--device-recovery wants N,S: up to N losses (1 to 1000) within S seconds (1 to 86400), or 0 for none, got "${v}"`);
        break;
      }
      case '--speculative-ngram': {
        const m = /^(\d+),(\d+)$/.exec(need());
        const [n, k] = m ? [Number(m[1]), Number(m[2])] : [0, 0];
        if (!(n >= 1 && n <= 8 && k >= 1 && k <= 16)) throw new UsageError('--speculative-ngram wants N,K: N from 1 to 8 tokens matched, K from 1 to 16 proposed (e.g. 3,8)');
        if (out.speculative) throw new UsageError('--speculative-mtp and --speculative-ngram: choose one');
        out.speculative = { type: 'ngram', n, k };
        break;
      }
      case '--speculative-mtp-tokens': {
        const k = int(1, MTP_MAX_GUESSES);
        if (out.speculative?.type === 'ngram') throw new UsageError('--speculative-mtp and --speculative-ngram: choose one');
        out.speculative = { type: 'mtp', k };
        break;
      }
      case '--draft-model':
        out.draft = { ...out.draft, model: need() };
        break;
      case '--draft-tokens':
        out.draft = { model: '', ...out.draft, tokens: int(1, 32) };
        break;
      case '--max-lora-rank':
        out.maxLoraRank = int(1, 1024);
        break;
      case '--precision': {
        const p = need();
        if (p !== 'auto' && p !== 'f32' && p !== 'f16') throw new UsageError(`--precision must be auto, f32 or f16, got "${p}"`);
        out.precision = p;
        break;
      }
      default:
        throw new UsageError(`unknown option ${args[i]} (see --help)`);
    }
  }
  if (out.draft && !out.draft.model) throw new UsageError('--draft-tokens needs --draft-model: the draft model that guesses them');
  if (out.persistKv && !out.persistKv.dir) throw new UsageError('--kv-cache-budget needs --kv-cache-dir DIR');
  if (!out.model) throw new UsageError('--model is required: a .gguf file, a model folder, a URL or a Hugging Face repo id');
  return { port: 8080, host: '127.0.0.1', apiKey: env.WEBGPU_LLM_API_KEY || undefined, ...out, model: out.model } as ServeArgs;
}

function progressLine(p: LoadProgress): string {
  const mb = (n: number) => (n / 1e6).toFixed(1);
  const pct = p.totalBytes > 0 ? ` ${Math.floor((100 * p.totalBytesDone) / p.totalBytes)}%` : '';
  return p.phase === 'compile' ? `compile${pct}` : `${p.phase}${pct} (${mb(p.totalBytesDone)} / ${mb(p.totalBytes)} MB)`;
}

/**
 * Runs `serve` with command-line arguments: prints progress and the address to stderr, stops on
 * SIGINT/SIGTERM. Resolves once listening (null after --help); rejects with a UsageError, a
 * LoadError or a WebGPUError, each saying what to fix.
 */
export async function serveCommand(args: string[], log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<Server | null> {
  const a = parseServeArgs(args, process.env);
  if (!a) {
    log(SERVE_USAGE);
    return null;
  }
  let last = '';
  const server = await serve({
    model: a.model,
    port: a.port,
    host: a.host,
    apiKey: a.apiKey,
    id: a.id,
    precision: a.precision,
    contextLength: a.contextLength,
    ...(a.integerDot ? { integerDot: true } : {}),
    ...(a.speculative ? { speculative: a.speculative } : {}),
    ...(a.mtp ? { mtp: true } : {}),
    ...(a.draft ? { draft: a.draft } : {}),
    ...(a.faultInjection ? { faultInjection: true } : {}),
    ...(a.persistKv ? { persistKv: a.persistKv } : {}),
    ...(a.deviceRecovery !== undefined ? { deviceRecovery: a.deviceRecovery } : {}),
    maxBodyBytes: a.maxBodyBytes,
    grammarCompileMs: a.grammarCompileMs,
    ...(a.allowImageUrls ? { allowImageUrls: true } : {}),
    ...(a.mmproj ? { mmproj: a.mmproj } : {}),
    cache: a.cache,
    lora: a.lora,
    ...(a.maxLoraRank !== undefined ? { loraPool: { maxRank: a.maxLoraRank } } : {}),
    onProgress: (p) => {
      const line = progressLine(p);
      if (line !== last) log((last = line));
    },
  });
  const { info } = server.engine;
  for (const w of info.warnings) log(`warning: ${w}`);
  log(`model "${info.model}" on ${info.gpu.description || info.gpu.vendor || 'GPU'} (${info.precision}, context ${info.contextLength})`);
  for (const l of await server.engine.loras()) log(`LoRA adapter "${info.model}:${l.name}" (rank ${l.rank}, ${l.targets.join('/')}) from ${l.source}`);
  log(`listening on ${server.url}/v1${a.apiKey ? ' (API key required)' : ''}`);
  const stop = () => {
    log('stopping');
    void server.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return {
    ...server,
    close() {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      return server.close();
    },
  };
}
