/**
 * Every failure the page can meet, as a title and what to do. Errors may arrive as class
 * instances (WebGPUError, LoadError, the SDK's APIError) or, from a worker, as plain objects that
 * kept their `name` and `code`, so this reads fields, never `instanceof`.
 */

export interface Explained {
  title: string;
  /** What happened and what to do, in a sentence or two. */
  text: string;
  /** A code a test or a bug report can quote. */
  code: string;
}

interface ErrorLike {
  name?: string;
  code?: string | null;
  message?: string;
  status?: number;
  file?: string;
  error?: { code?: string | null; message?: string };
}

const asObj = (e: unknown): ErrorLike => (typeof e === 'object' && e !== null ? (e as ErrorLike) : { message: String(e) });

export const ADVICE = {
  noWebGPU:
    'Use Chrome or Edge 113+ (desktop or Android), Safari 26+, or Firefox 141+ on Windows. On Linux, start Chrome with --enable-unsafe-webgpu. ' +
    'The page must come from https:// or http://localhost.',
  noF16:
    'This GPU does not offer shader-f16, so the engine runs its f32 kernels: every model still works, with twice the activation memory and somewhat lower speed. ' +
    'Nothing to do; chrome://gpu lists the WebGPU features your browser exposes.',
  fallback:
    'The browser gave a software adapter (the GPU runs on the CPU). Expect a few tokens per second: only the tiny test model is practical here.',
  oom:
    'The GPU ran out of memory. Close other GPU-heavy tabs, pick a smaller or more quantised model (Q4_K_M rather than Q8_0 or F16), or lower the context length.',
  deviceLost:
    'The GPU device was lost (a driver reset, the machine slept, or the GPU was needed elsewhere). Load the model again; if it keeps happening, pick a smaller model.',
  recovering:
    'The GPU device was lost (a driver reset, the machine slept, or the GPU was needed elsewhere). The engine is rebuilding on a new one; replies under way continue where they were.',
} as const;

export function explain(e: unknown): Explained {
  const x = asObj(e);
  // The SDK's APIError keeps the server's error object in `error` (and copies `code`).
  const code = x.code ?? x.error?.code ?? '';
  const message = x.message ?? x.error?.message ?? String(e);

  switch (code) {
    case 'webgpu_unavailable':
      return { code, title: 'WebGPU is not available here', text: ADVICE.noWebGPU };
    case 'no_adapter':
      return { code, title: 'No GPU adapter', text: message };
    case 'limits_too_small':
      return { code, title: 'This GPU is too small for the model', text: message };
    case 'out_of_memory':
      return { code, title: 'Out of GPU memory', text: ADVICE.oom };
    case 'device_lost':
      return { code, title: 'The GPU was lost', text: ADVICE.deviceLost };
    case 'network':
      return {
        code,
        title: 'Could not download the model',
        text: `${message}. Check the connection; a server that refuses cross-origin requests cannot be read from a page.`,
      };
    case 'http':
      return { code, title: 'The server refused a model file', text: httpAdvice(x.status, message) };
    case 'not_a_model_file':
      return { code, title: 'That is not a model file', text: `${message}. Give a .gguf file, or a folder with config.json and model.safetensors.` };
    case 'bad_input':
      return { code, title: 'Which model?', text: message };
    case 'aborted':
      return { code, title: 'Loading cancelled', text: 'Pick a model and load it again.' };
  }
  if (x.name === 'LoadError') return { code: code || 'load', title: 'The model could not be loaded', text: message };
  if (x.name === 'WebGPUError') return { code: code || 'gpu', title: 'GPU error', text: message };
  if (typeof x.status === 'number' && x.status >= 400) return { code: code || `http_${x.status}`, title: `The API answered ${x.status}`, text: message };
  return { code: code || 'error', title: 'Something went wrong', text: message };
}

function httpAdvice(status: number | undefined, message: string): string {
  // From a worker the status survives only in the message ("HTTP 404").
  status ??= Number(/\b(?:HTTP|status) (\d{3})\b/.exec(message)?.[1]) || undefined;
  if (status === 401 || status === 403)
    return `${message}. The repository is gated or private: this page sends no Hugging Face token, so download the file and pick it from disk instead.`;
  if (status === 404) return `${message}. Check the repo id and the file name (they are case-sensitive).`;
  return message;
}

/** True for the error a fetch or the SDK throws when we aborted it ourselves. */
export function isAbort(e: unknown): boolean {
  const x = asObj(e);
  return x.name === 'AbortError' || x.name === 'APIUserAbortError' || x.code === 'aborted';
}
