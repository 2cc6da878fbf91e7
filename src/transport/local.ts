/** An engine in this thread (Node, or a page with `worker: false`). */
import { loadHost, type HostOptions } from './host';
import { fetchOver } from './fetch';
import { setInternals } from './internals';
import type { EngineHandle } from './types';

export async function createLocalEngine(options: HostOptions): Promise<EngineHandle> {
  const host = await loadHost(options);
  const closing = new AbortController();
  const engine: EngineHandle = {
    fetch: fetchOver(host.handle, closing.signal),
    info: host.info,
    stats: async () => host.stats(),
    loadLora: (name, source, opts) => host.loadLora(name, source as never, opts),
    unloadLora: (name) => host.unloadLora(name),
    loras: async () => host.loras(),
    onError: (l) => host.onError(l),
    injectFault: async (fault) => host.injectFault(fault),
    async unload() {
      if (closing.signal.aborted) return;
      closing.abort();
      await host.unload();
    },
  };
  setInternals(engine, { isOpen: () => !closing.signal.aborted, host, loseDevice: async () => host.loseDevice() });
  return engine;
}
