/**
 * `webgpu-llm/service-worker`: serves `/v1/*` (or `?base=...`) to every page of the origin by
 * relaying each request to a page that hosts an engine (see src/transport/sw-relay.ts for why).
 * Serve it from your origin (e.g. `/webgpu-llm-sw.js`) and call `registerServiceWorker(engine)`
 * in the page that loads the model.
 */
import { installRelay } from './transport/sw-relay';

installRelay(self as unknown as ServiceWorkerGlobalScope);
