// Page A of the service worker e2e test: loads the engine (in its Worker) and hosts it for the
// origin through the service worker. `?model=URL` names the model; `?kv=DIR` keeps KV pages in that
// OPFS folder (persistKv, read back after a reload); `?fault=1` turns on fault injection.
import { createEngine, registerServiceWorker } from '../../src/index';

const status = document.querySelector<HTMLParagraphElement>('#status')!;
try {
  const params = new URL(location.href).searchParams;
  const model = params.get('model');
  if (!model) throw new Error('host.html needs ?model=URL');
  const kv = params.get('kv');
  const engine = await createEngine({ model, cache: false, faultInjection: params.get('fault') === '1', ...(kv ? { persistKv: { dir: kv } } : {}) });
  // Under Vite's dev server the script is a module that imports src/service-worker.ts.
  const host = await registerServiceWorker(engine, { url: '/sw.ts', type: 'module' });
  await navigator.serviceWorker.ready;
  /** A completion from this page's own engine (not through the service worker), as JSON. */
  const complete = async (request: object) => (await engine.fetch('http://localhost/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'default', ...request }) })).json();
  Object.assign(window, {
    stopHosting: () => host.stop(),
    complete,
    loseDevice: () => engine.injectFault({ kind: 'device_lost' }),
    recoveries: async () => (await engine.stats()).recoveries,
    pageSize: async () => (await engine.stats()).pageSize,
  });
  status.dataset.state = 'ready';
  status.textContent = `hosting ${engine.info.model}`;
} catch (e) {
  status.dataset.state = 'error';
  status.textContent = String(e);
}
