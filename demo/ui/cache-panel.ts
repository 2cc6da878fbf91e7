/** The cached-models panel: what the browser keeps (OPFS or the Cache API), with sizes and a delete button. */
import { deleteCachedModel, listCachedModels } from '../../src/index';
import { formatBytes, modelLabel } from './format';

export class CachePanel {
  constructor(
    private readonly list: HTMLElement,
    private readonly summary: HTMLElement,
    private readonly onError: (e: unknown) => void,
  ) {}

  async refresh(): Promise<void> {
    let models: Awaited<ReturnType<typeof listCachedModels>>;
    try {
      models = await listCachedModels();
    } catch (e) {
      this.list.replaceChildren();
      this.summary.textContent = `No model cache here (${(e as Error).message ?? e}).`;
      return;
    }
    models.sort((a, b) => b.storedAt - a.storedAt);
    const total = models.reduce((n, m) => n + m.bytes, 0);
    this.summary.textContent = models.length
      ? `${models.length} model${models.length > 1 ? 's' : ''}, ${formatBytes(total)} in this browser.`
      : 'Nothing cached yet: downloaded models are kept here for the next visit.';
    this.list.replaceChildren(
      ...models.map((m) => {
        const li = document.createElement('li');
        li.className = 'cache-item';
        const name = document.createElement('span');
        name.className = 'cache-name';
        name.textContent = modelLabel(m.url);
        name.title = m.url;
        const meta = document.createElement('span');
        meta.className = 'cache-meta';
        meta.textContent = `${formatBytes(m.bytes)} · ${m.files.length} file${m.files.length === 1 ? '' : 's'} · ${new Date(m.storedAt).toLocaleDateString()}`;
        const del = document.createElement('button');
        del.type = 'button';
        del.className = 'icon danger';
        del.textContent = 'Delete';
        del.setAttribute('aria-label', `Delete ${modelLabel(m.url)} from the cache`);
        del.addEventListener('click', async () => {
          del.disabled = true;
          try {
            await deleteCachedModel(m.modelKey);
          } catch (e) {
            this.onError(e);
          }
          await this.refresh();
        });
        const text = document.createElement('div');
        text.append(name, meta);
        li.append(text, del);
        return li;
      }),
    );
  }
}
