/**
 * The model picker: the bundled tiny model, a known-good model, anything on Hugging Face (repo id
 * or URL), or a local file / folder picked or dropped onto the page.
 */
import type { ModelSource } from './code';
import { modelLabel } from './format';
import { BUNDLED, KNOWN_MODELS } from './models';

type Source = 'bundled' | 'known' | 'hub' | 'file';

export interface ModelChoice {
  /** What createEngine gets. */
  model: string | File | File[];
  /** A short name for messages. */
  label: string;
  /** How the code panel writes it. */
  snippet: ModelSource;
  /** The bundled model is local already; caching it would only duplicate it. */
  cacheable: boolean;
}

export class ModelPicker {
  private readonly form: HTMLFormElement;
  private readonly known: HTMLSelectElement;
  private readonly hub: HTMLInputElement;
  private readonly fileInput: HTMLInputElement;
  private readonly folderInput: HTMLInputElement;
  private readonly fileName: HTMLElement;
  private picked: File | File[] | null = null;

  constructor(
    form: HTMLFormElement,
    private readonly onPick: () => void,
  ) {
    this.form = form;
    this.known = form.querySelector('#known-model')!;
    this.hub = form.querySelector('#hub-model')!;
    this.fileInput = form.querySelector('#file-model')!;
    this.folderInput = form.querySelector('#folder-model')!;
    this.fileName = form.querySelector('#picked-name')!;

    form.querySelector('#bundled-note')!.textContent = `${BUNDLED.size} · no network · ${BUNDLED.note}`;
    for (const m of KNOWN_MODELS) {
      const o = document.createElement('option');
      o.value = m.model;
      o.textContent = `${m.label} · ${m.size}`;
      if (m.note) o.title = m.note;
      this.known.append(o);
    }
    // Touching a source's control selects that source.
    this.known.addEventListener('change', () => this.select('known'));
    this.hub.addEventListener('input', () => this.select('hub'));
    this.fileInput.addEventListener('change', () => this.takeFiles([...(this.fileInput.files ?? [])], false));
    this.folderInput.addEventListener('change', () => this.takeFiles([...(this.folderInput.files ?? [])], true));
    form.addEventListener('change', () => this.onPick());
  }

  /** Files dropped on the page: one .gguf, or a folder's files. Returns false when none fit. */
  takeFiles(files: File[], folder: boolean): boolean {
    if (files.length === 0) return false;
    if (!folder && files.length === 1) this.picked = files[0];
    else if (folder || files.some((f) => f.name === 'config.json')) this.picked = files;
    else {
      const gguf = files.find((f) => /\.gguf$/i.test(f.name));
      if (!gguf) return false;
      this.picked = gguf;
    }
    const p = this.picked;
    this.fileName.textContent = Array.isArray(p) ? `${folderName(p)} (${p.length} files)` : p.name;
    this.select('file');
    this.onPick();
    return true;
  }

  current(): ModelChoice | null {
    const source = (new FormData(this.form).get('source') as Source | null) ?? 'bundled';
    switch (source) {
      case 'bundled':
        return { model: BUNDLED.model, label: BUNDLED.label, snippet: { kind: 'string', value: BUNDLED.model }, cacheable: false };
      case 'known': {
        const m = KNOWN_MODELS.find((k) => k.model === this.known.value) ?? KNOWN_MODELS[0];
        return { model: m.model, label: m.label, snippet: { kind: 'string', value: m.model }, cacheable: true };
      }
      case 'hub': {
        const v = this.hub.value.trim();
        return v ? { model: v, label: /^https?:/i.test(v) ? modelLabel(v) : v, snippet: { kind: 'string', value: v }, cacheable: true } : null;
      }
      case 'file': {
        const p = this.picked;
        if (!p) return null;
        const name = Array.isArray(p) ? folderName(p) : p.name;
        return { model: p, label: name, snippet: { kind: 'file', name }, cacheable: false };
      }
    }
  }

  private select(source: Source): void {
    const radio = this.form.querySelector<HTMLInputElement>(`input[name="source"][value="${source}"]`);
    if (radio) radio.checked = true;
  }
}

/** The picked folder's name, from the files' relative paths. */
function folderName(files: File[]): string {
  const rel = (files[0] as File & { webkitRelativePath?: string }).webkitRelativePath ?? '';
  return rel.split('/')[0] || 'folder';
}
