// Page A of the service worker e2e test: loads the engine (in its Worker) and hosts it for the
// origin through the service worker. `?model=URL` names the model.
import { createEngine, registerServiceWorker } from '../../src/index';

const status = document.querySelector<HTMLParagraphElement>('#status')!;
try {
  const model = new URL(location.href).searchParams.get('model');
  if (!model) throw new Error('host.html needs ?model=URL');
  const engine = await createEngine({ model, cache: false });
  // Under Vite's dev server the script is a module that imports src/service-worker.ts.
  const host = await registerServiceWorker(engine, { url: '/sw.ts', type: 'module' });
  await navigator.serviceWorker.ready;
  Object.assign(window, { stopHosting: () => host.stop() });
  status.dataset.state = 'ready';
  status.textContent = `hosting ${engine.info.model}`;
} catch (e) {
  status.dataset.state = 'error';
  status.textContent = String(e);
}
