// The scratch app of e2e/apps/bundlers.e2e.ts, written as a user of the installed package writes
// it: the README's createEngine (the engine in the library's Worker), the service worker, the
// engine in the page (`worker: false`) and the custom-worker recipe, each answering one chat.
// `?model=URL` names the model.
import { createEngine, registerServiceWorker } from 'webgpu-llm';
import { startWorker } from './custom-worker.js';

const model = new URL(location.href).searchParams.get('model');
const request = { model: 'tiny', messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 4, temperature: 0 };

async function chat(fetchFn, url, extra = {}) {
  const body = JSON.stringify({ ...request, ...extra });
  const response = await fetchFn(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const answer = await response.json();
  return { status: response.status, object: answer.object ?? null, content: answer.choices?.[0]?.message?.content ?? null, error: answer.error ?? null };
}

const load = (options = {}) => createEngine({ model, id: 'tiny', cache: false, ...options });
let engine;

// In this order: the service worker relays to the engine of the first scenario (one load fewer).
window.scenarios = {
  async defaultWorker() {
    engine = await load();
    return chat(engine.fetch, 'http://localhost/v1/chat/completions');
  },
  // The grammar engine (xgrammar) is a lazy chunk of the Worker, loaded on the first constrained request.
  structured: () => chat(engine.fetch, 'http://localhost/v1/chat/completions', { response_format: { type: 'json_object' } }),
  async serviceWorker() {
    // The script is the library's dist/service-worker.js, copied to /webgpu-llm-sw.js (the default URL).
    const host = await registerServiceWorker(engine);
    try {
      await navigator.serviceWorker.ready;
      if (!navigator.serviceWorker.controller) {
        await new Promise((ok) => navigator.serviceWorker.addEventListener('controllerchange', ok, { once: true }));
      }
      return await chat(fetch, '/v1/chat/completions');
    } finally {
      host.stop();
      await engine.unload();
    }
  },
  async inPage() {
    // worker: false: the engine comes into the page as a dynamic import.
    const local = await load({ worker: false });
    try {
      return await chat(local.fetch, 'http://localhost/v1/chat/completions');
    } finally {
      await local.unload();
    }
  },
  async customWorker() {
    const custom = await load({ worker: startWorker() });
    try {
      return await chat(custom.fetch, 'http://localhost/v1/chat/completions');
    } finally {
      await custom.unload();
    }
  },
};
document.querySelector('#status').dataset.state = 'ready';
