/**
 * The LoRA adapter panel: load an adapter (a PEFT folder or a llama.cpp GGUF LoRA, by repo id, URL
 * or picked files) into the loaded engine, choose which one the chat runs with (the request's
 * `model` becomes "<model>:<adapter>"), and unload them. Shown once a model is loaded.
 */
import type { EngineHandle, LoraSpec } from '../../src/index';

export class AdapterPanel {
  private engine: EngineHandle | null = null;
  private picked: LoraSpec | null = null;
  private readonly form: HTMLFormElement;
  private readonly name: HTMLInputElement;
  private readonly source: HTMLInputElement;
  private readonly use: HTMLSelectElement;
  private readonly list: HTMLUListElement;
  private readonly loadButton: HTMLButtonElement;
  private readonly note: HTMLElement;

  constructor(
    private readonly root: HTMLElement,
    /** The chosen adapter changed (the code panel shows it). */
    private readonly onChange: () => void,
    private readonly onError: (e: unknown) => void,
  ) {
    const $ = <T extends HTMLElement>(sel: string) => root.querySelector<T>(sel)!;
    this.form = $('#adapter-form');
    this.name = $('#adapter-name');
    this.source = $('#adapter-source');
    this.use = $('#adapter-use');
    this.list = $('#adapter-list');
    this.loadButton = $('#adapter-load');
    this.note = $('#adapter-note');
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.load();
    });
    this.source.addEventListener('input', () => (this.picked = null));
    $<HTMLInputElement>('#adapter-file').addEventListener('change', (ev) => {
      const file = (ev.target as HTMLInputElement).files?.[0];
      if (file) this.pick(file, file.name);
    });
    $<HTMLInputElement>('#adapter-folder').addEventListener('change', (ev) => {
      const files = (ev.target as HTMLInputElement).files;
      if (files?.length) this.pick(Array.from(files), files[0]!.webkitRelativePath.split('/')[0] ?? 'folder');
    });
    this.use.addEventListener('change', () => this.onChange());
  }

  /** A model was loaded (or unloaded: null). `suggested` prefills the adapter field (the bundled model's adapter). */
  attach(engine: EngineHandle | null, suggested?: string): void {
    this.engine = engine;
    this.root.hidden = !engine;
    this.picked = null;
    this.source.value = suggested ?? '';
    this.note.textContent = suggested ? 'A random-weight adapter for the bundled model is filled in: load it, then chat with it.' : '';
    void this.refresh();
  }

  /** The `model` of a chat request: the base id, or "<id>:<adapter>" when one is chosen. */
  modelId(base: string): string {
    return this.use.value ? `${base}:${this.use.value}` : base;
  }

  private pick(source: LoraSpec, label: string): void {
    this.picked = source;
    this.source.value = label;
    if (!this.name.value) this.name.value = label.replace(/\.gguf$/i, '').replace(/[^\w.-]+/g, '-');
  }

  private async load(): Promise<void> {
    const engine = this.engine;
    const name = this.name.value.trim();
    const source = this.picked ?? this.source.value.trim();
    if (!engine || !name || !source) {
      this.note.textContent = 'Give the adapter a name and a source (a repo id, a URL, or picked files).';
      return;
    }
    this.loadButton.disabled = true;
    this.note.textContent = `Loading ${name}…`;
    try {
      const info = await engine.loadLora(name, source);
      this.note.textContent = `Loaded ${info.name}: rank ${info.rank}, adapts ${info.targets.join(', ')}.`;
      await this.refresh(info.name);
    } catch (e) {
      this.note.textContent = '';
      this.onError(e);
    } finally {
      this.loadButton.disabled = false;
    }
  }

  /** Redraws the chooser and the list; `choose` selects that adapter. */
  private async refresh(choose?: string): Promise<void> {
    const engine = this.engine;
    const loras = engine ? await engine.loras().catch(() => []) : [];
    const keep = choose ?? this.use.value;
    const base = document.createElement('option');
    base.value = '';
    base.textContent = 'the base model';
    this.use.replaceChildren(
      base,
      ...loras.map((l) => {
        const o = document.createElement('option');
        o.value = l.name;
        o.textContent = `${l.name} (LoRA, rank ${l.rank})`;
        return o;
      }),
    );
    this.use.value = loras.some((l) => l.name === keep) ? keep : '';
    this.list.replaceChildren(
      ...loras.map((l) => {
        const li = document.createElement('li');
        li.className = 'adapter-item';
        const text = document.createElement('div');
        const title = document.createElement('span');
        title.className = 'cache-name';
        title.textContent = l.name;
        title.title = l.source;
        const meta = document.createElement('span');
        meta.className = 'cache-meta';
        meta.textContent = `rank ${l.rank} · ${l.targets.join('/')} · ${l.format.toUpperCase()}`;
        text.append(title, meta);
        const unload = document.createElement('button');
        unload.type = 'button';
        unload.className = 'icon danger';
        unload.textContent = 'Unload';
        unload.setAttribute('aria-label', `Unload the adapter ${l.name}`);
        unload.addEventListener('click', async () => {
          unload.disabled = true;
          try {
            await engine!.unloadLora(l.name);
          } catch (e) {
            this.onError(e);
          }
          await this.refresh();
        });
        li.append(text, unload);
        return li;
      }),
    );
    this.onChange();
  }
}
