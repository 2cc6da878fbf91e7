/**
 * The demo page: pick a model, load it with a real progress bar, and chat with it through the
 * unchanged `openai` SDK. The SDK's requests reach the engine through `installFetchShim`, so
 * the page is its own proof that OpenAI clients work as they are.
 */
import OpenAI from 'openai';
import { createEngine, installFetchShim, type EngineHandle } from '../src/index';
// Test hook only: makes the engine's GPU device lost, as a driver reset would (see window.__demo).
import { simulateDeviceLoss } from '../src/transport/internals';
import { AdapterPanel } from './ui/adapters';
import { CachePanel } from './ui/cache-panel';
import { Chat } from './ui/chat';
import { highlight, snippet, type ModelSource } from './ui/code';
import { ADVICE, explain, isAbort } from './ui/errors';
import { formatBytes } from './ui/format';
import { GpuCheck } from './ui/gpu-check';
import { Attachments } from './ui/attachments';
import { MessageList } from './ui/messages';
import { Notices } from './ui/notices';
import { watchRecovery } from './ui/recovery';
import { ModelPicker, type ModelChoice } from './ui/picker';
import { BUNDLED_LORA_PATH, BUNDLED_MODEL_PATH } from './ui/models';
import { ProgressView } from './ui/progress';
import { SettingsForm } from './ui/settings';

declare global {
  interface Window {
    /** The body of the last request the SDK sent to /v1 (for the e2e test and the curious). */
    __lastRequest?: Record<string, unknown>;
    /** For the e2e test of the device-loss message. */
    __demo?: { loseDevice(): Promise<void> };
  }
}

const $ = <T extends HTMLElement>(sel: string) => document.querySelector<T>(sel)!;

const status = $('#status');
const notices = new Notices($('#notices'));
const progress = new ProgressView($('#progress'));
const modelInfo = $<HTMLDListElement>('#model-info');
const loadButton = $<HTMLButtonElement>('#load');
const prompt = $<HTMLTextAreaElement>('#prompt');
const send = $<HTMLButtonElement>('#send');
const codeEl = $('#code');
const codeWide = $('#code-wide');
const codeDialog = $<HTMLDialogElement>('#code-dialog');

// ---------------------------------------------------------------------------------------------
// State: one engine at a time, its shim, and the OpenAI client created after the shim.

let engine: EngineHandle | null = null;
let client: OpenAI | null = null;
let disconnect: (() => void) | null = null;
let loadAbort: AbortController | null = null;
let loadedSource: ModelSource = { kind: 'none' };

const settings = new SettingsForm($('#settings'), () => updateCode());
const list = new MessageList($('#scroller'), $('#messages'));
const attachments = new Attachments($('#attachments'), $<HTMLButtonElement>('#attach'), $<HTMLInputElement>('#attach-input'), (text) =>
  notices.show({ key: 'image', kind: 'warn', title: 'Image not attached', text }),
);
const cache = new CachePanel($('#cache-list'), $('#cache-summary'), (e) => showError('cache', e));
const picker = new ModelPicker($<HTMLFormElement>('#model-form'), () => updateCode());
const adapters = new AdapterPanel($('#adapters'), () => updateCode(), (e) => showError('adapter', e));

const chat = new Chat({
  list,
  client: () => client,
  model: () => (engine ? adapters.modelId(engine.info.model) : 'default'),
  settings: () => settings.read(),
  onBusy: (busy) => {
    send.dataset.mode = busy ? 'stop' : 'send';
    send.textContent = busy ? 'Stop' : 'Send';
    send.setAttribute('aria-label', busy ? 'Stop the reply (Esc)' : 'Send (Enter)');
    $('#empty').hidden = true;
    if (!busy) {
      updateCode();
      prompt.focus();
    }
  },
  onError: (e) => {
    const x = explain(e);
    if (x.code === 'device_lost' || x.code === 'out_of_memory') showError('gpu', e);
  },
});

/** The shim, then a recorder over it (so the page can show what the SDK sent), then the client. */
function connect(e: EngineHandle): () => void {
  const uninstallShim = installFetchShim(e, { baseURL: '/v1' });
  const shimmed = globalThis.fetch;
  const recorder: typeof fetch = (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (new URL(url, location.href).pathname.startsWith('/v1/') && typeof init?.body === 'string') {
      try {
        window.__lastRequest = JSON.parse(init.body) as Record<string, unknown>;
      } catch {
        // Not JSON: nothing to show.
      }
    }
    return shimmed(input, init);
  };
  globalThis.fetch = recorder;
  // Created after the shim: a client captures `fetch` when it is constructed.
  client = new OpenAI({ baseURL: location.origin + '/v1', apiKey: 'not-needed', dangerouslyAllowBrowser: true, maxRetries: 0 });
  return () => {
    if (globalThis.fetch === recorder) globalThis.fetch = shimmed;
    uninstallShim();
    client = null;
  };
}

/** The image button and drops/pastes, when `/v1/models` says the model takes images. */
async function offerImages(e: EngineHandle): Promise<void> {
  const models = await client?.models.list().catch(() => null);
  const takes = models?.data.some((m) => ((m as { input_modalities?: string[] }).input_modalities ?? []).includes('image')) ?? false;
  if (engine === e) attachments.setEnabled(takes);
}

async function unloadCurrent(): Promise<void> {
  chat.stop();
  disconnect?.();
  disconnect = null;
  const e = engine;
  engine = null;
  adapters.attach(null);
  attachments.setEnabled(false);
  setReady(false);
  await e?.unload().catch(() => undefined);
}

async function load(choice: ModelChoice): Promise<void> {
  loadAbort?.abort();
  const abort = new AbortController();
  loadAbort = abort;
  notices.clear('load');
  notices.clear('gpu');
  progress.reset(choice.label);
  await unloadCurrent();
  modelInfo.hidden = true;
  loadButton.textContent = 'Cancel';
  loadButton.dataset.mode = 'cancel';
  const t0 = performance.now();
  try {
    const cacheOn = $<HTMLInputElement>('#opt-cache').checked && choice.cacheable;
    const e = await createEngine({
      model: choice.model,
      onProgress: (p) => {
        if (loadAbort === abort) progress.update(p);
      },
      worker: $<HTMLInputElement>('#opt-worker').checked,
      cache: cacheOn,
      signal: abort.signal,
    });
    if (abort.signal.aborted) {
      await e.unload();
      return;
    }
    engine = e;
    disconnect = connect(e);
    let recoveries = 0;
    e.onError((err) => {
      if (engine !== e) return;
      if (err.code !== 'device_lost') return showError('gpu', err);
      // The engine rebuilds on a new device by itself; replies under way wait and go on. Only if it
      // gives up does the page offer to load again.
      void watchRecovery(e, recoveries, {
        recovering: () => notices.show({ key: 'gpu', kind: 'info', code: 'device_recovering', title: 'The GPU was lost: recovering…', text: ADVICE.recovering }),
        recovered: () => notices.clear('gpu'),
        failed: () => {
          showError('gpu', err);
          setReady(false);
        },
      }, () => engine === e).then((n) => (recoveries = n));
    });
    loadedSource = choice.snippet;
    progress.finish(`${choice.label} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    showModelInfo(e, choice);
    // The bundled model comes with a bundled adapter (tools/bundle-demo-model.ts): offered, not loaded.
    adapters.attach(e, choice.model === BUNDLED_MODEL_PATH ? new URL(BUNDLED_LORA_PATH, location.href).href : undefined);
    setReady(true);
    void offerImages(e);
    closeSide();
    prompt.focus();
  } catch (err) {
    if (loadAbort !== abort) return; // a newer load owns the progress bar now
    if (abort.signal.aborted || isAbort(err)) {
      progress.fail('Cancelled.');
    } else {
      progress.fail(explain(err).title);
      showError('load', err);
    }
  } finally {
    if (loadAbort === abort) {
      loadAbort = null;
      loadButton.textContent = 'Load model';
      loadButton.dataset.mode = 'load';
    }
    updateCode();
    void cache.refresh();
  }
}

function showModelInfo(e: EngineHandle, choice: ModelChoice): void {
  const { info } = e;
  const rows: Array<[string, string]> = [
    ['Model', `${info.model} · ${choice.label}`],
    ['Precision', info.precision === 'f16' ? 'f16 activations' : 'f32 activations (no shader-f16)'],
    ['Context', `${info.contextLength.toLocaleString()} tokens`],
    ['GPU', [info.gpu.vendor, info.gpu.architecture, info.gpu.description].filter(Boolean).join(' · ') || 'unnamed adapter'],
  ];
  modelInfo.replaceChildren(
    ...rows.flatMap(([k, v]) => {
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = v;
      return [dt, dd];
    }),
  );
  modelInfo.hidden = false;
  showAdapterNotices(info.gpu.f16, info.gpu.isFallbackAdapter);
  // The engine's own notes on the f16 path and software adapters are said above with advice.
  const others = info.warnings.filter((w) => !/shader-f16|software fallback/i.test(w));
  // The memory warning (src/gpu/memory.ts) gets its own title: it is the one that says what to change.
  for (const [i, w] of others.entries()) notices.show({ key: `warning-${i}`, kind: 'warn', title: /GPU memory/.test(w) ? "Close to the GPU's memory" : 'Note', text: w });
}

function showAdapterNotices(f16: boolean, software: boolean): void {
  if (software) notices.show({ key: 'fallback', kind: 'warn', title: 'Software GPU', text: ADVICE.fallback, code: 'fallback_adapter' });
  if (!f16) notices.show({ key: 'f16', kind: 'info', title: 'No shader-f16: running the f32 path', text: ADVICE.noF16, code: 'no_shader_f16' });
}

function setReady(ready: boolean): void {
  prompt.disabled = !ready;
  send.disabled = !ready;
  prompt.placeholder = ready ? 'Message the model' : 'Load a model first';
  document.body.dataset.model = ready ? 'loaded' : 'none';
}

function showError(key: string, e: unknown): void {
  const x = explain(e);
  const reload = x.code === 'device_lost' || x.code === 'out_of_memory' || x.code === 'engine_unloaded';
  notices.show({
    key,
    kind: 'error',
    title: x.title,
    text: x.text,
    code: x.code,
    action: reload ? { label: 'Load again', run: () => submitLoad() } : undefined,
  });
}

function updateCode(): void {
  const pending = prompt.value.trim();
  const html = highlight(snippet(engine ? loadedSource : (picker.current()?.snippet ?? { kind: 'none' }), chat.request(pending || undefined)));
  codeEl.innerHTML = html;
  codeWide.innerHTML = html;
}

function setStatus(state: 'ready' | 'error', main: string, extra = ''): void {
  status.dataset.state = state;
  status.querySelector('.status-main')!.textContent = main;
  status.querySelector('.status-extra')!.textContent = extra;
}

// ---------------------------------------------------------------------------------------------
// WebGPU check: an adapter (no device) is enough to tell the reader what to expect.

async function probeGPU(): Promise<void> {
  const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
  if (!gpu) {
    setStatus('error', 'No WebGPU');
    notices.show({ key: 'webgpu', kind: 'error', title: 'WebGPU is not available in this browser', text: ADVICE.noWebGPU, code: 'webgpu_unavailable' });
    loadButton.disabled = true;
    return;
  }
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' }).catch(() => null);
  if (!adapter) {
    setStatus('error', 'No GPU adapter');
    showError('webgpu', { code: 'no_adapter', message: 'The browser exposes WebGPU but found no usable GPU. Check chrome://gpu, update the graphics driver, or enable chrome://flags/#enable-unsafe-webgpu.' });
    loadButton.disabled = true;
    return;
  }
  const f16 = adapter.features.has('shader-f16');
  const soft = (adapter as GPUAdapter & { info?: GPUAdapterInfo & { isFallbackAdapter?: boolean } }).info?.isFallbackAdapter === true;
  const name = adapter.info?.description || adapter.info?.vendor || 'GPU';
  setStatus('ready', 'WebGPU ready', ` · ${f16 ? 'f16' : 'f32'}${soft ? ' · software' : ''}`);
  status.title = `${name}; largest buffer binding ${formatBytes(adapter.limits.maxStorageBufferBindingSize)}`;
  showAdapterNotices(f16, soft);
}

// ---------------------------------------------------------------------------------------------
// Events

function submitLoad(): void {
  const choice = picker.current();
  if (!choice) {
    notices.show({ key: 'load', kind: 'warn', title: 'Which model?', text: 'Type a Hugging Face repo id or URL, or pick a file first.' });
    return;
  }
  void load(choice);
}

$<HTMLFormElement>('#model-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (loadAbort) loadAbort.abort();
  else submitLoad();
});

function sendOrStop(): void {
  if (chat.busy) return chat.stop();
  const text = prompt.value.trim();
  if ((!text && !attachments.count) || !client) return;
  prompt.value = '';
  autosize();
  void chat.send(text, attachments.drain());
}

$<HTMLFormElement>('#composer').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sendOrStop();
});

prompt.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    if (!chat.busy) sendOrStop();
  }
});
// An image pasted into the prompt is attached (a model that takes images).
prompt.addEventListener('paste', (ev) => {
  if (attachments.take([...(ev.clipboardData?.files ?? [])])) ev.preventDefault();
});
prompt.addEventListener('input', () => {
  autosize();
  updateCode();
});

document.addEventListener('keydown', (ev) => {
  // Esc closes the code dialog first (the browser does that); otherwise it stops the reply.
  if (ev.key === 'Escape' && chat.busy && !codeDialog.open) {
    ev.preventDefault();
    chat.stop();
  }
});

/** The box grows with its text up to a cap, then scrolls (CSS sets the cap). */
function autosize(): void {
  prompt.style.height = 'auto';
  prompt.style.height = `${prompt.scrollHeight}px`;
}

$('#clear-chat').addEventListener('click', () => {
  chat.clear();
  $('#empty').hidden = false;
  updateCode();
});

async function copyCode(ev: Event): Promise<void> {
  const b = ev.currentTarget as HTMLButtonElement;
  try {
    await navigator.clipboard.writeText(codeEl.textContent ?? '');
    b.textContent = 'copied';
  } catch {
    b.textContent = 'select and copy';
  }
  setTimeout(() => (b.textContent = 'copy'), 1500);
}
$('#copy-code').addEventListener('click', copyCode);
$('#copy-code-2').addEventListener('click', copyCode);
$('#expand-code').addEventListener('click', () => codeDialog.showModal());
$('#close-code').addEventListener('click', () => codeDialog.close());
// A click on the backdrop (the dialog itself, outside its content box) closes it.
codeDialog.addEventListener('click', (ev) => {
  if (ev.target === codeDialog) codeDialog.close();
});

$('#refresh-cache').addEventListener('click', () => void cache.refresh());

const gpuCheckDialog = $<HTMLDialogElement>('#gpu-check-dialog');
const gpuCheck = new GpuCheck(gpuCheckDialog);
$('#check-gpu').addEventListener('click', () => gpuCheck.open());
$('#close-gpu-check').addEventListener('click', () => gpuCheckDialog.close());

// Narrow screens: the side panel is a drawer.
const toggle = $<HTMLButtonElement>('#toggle-side');
function setSide(open: boolean): void {
  document.body.dataset.side = open ? 'open' : 'closed';
  toggle.setAttribute('aria-expanded', String(open));
}
function closeSide(): void {
  if (document.body.dataset.side === 'open') setSide(false);
}
toggle.addEventListener('click', () => setSide(document.body.dataset.side !== 'open'));

// Drop a .gguf (or a folder's files) anywhere on the page.
const drop = $('#drop');
let dragDepth = 0;
window.addEventListener('dragenter', (ev) => {
  if (!ev.dataTransfer?.types.includes('Files')) return;
  dragDepth++;
  drop.querySelector('p')!.textContent = attachments.accepts ? 'Drop an image to attach it, or a .gguf file to load it' : 'Drop a .gguf file to load it';
  drop.hidden = false;
});
window.addEventListener('dragleave', () => {
  if (--dragDepth <= 0) {
    dragDepth = 0;
    drop.hidden = true;
  }
});
window.addEventListener('dragover', (ev) => ev.preventDefault());
window.addEventListener('drop', (ev) => {
  ev.preventDefault();
  dragDepth = 0;
  drop.hidden = true;
  const files = [...(ev.dataTransfer?.files ?? [])];
  // Images go to the next message (a model that takes them); anything else is a model to load.
  if (attachments.take(files)) return;
  if (picker.takeFiles(files, false)) submitLoad();
  else if (files.length) notices.show({ key: 'load', kind: 'warn', title: 'Not a model', text: 'Drop a .gguf file, or a folder’s config.json, tokenizer.json and *.safetensors together.' });
});

window.__demo = { loseDevice: async () => (engine ? simulateDeviceLoss(engine) : undefined) };

setReady(false);
updateCode();
void cache.refresh();
await probeGPU();
