/**
 * Images for the next message, on a model that takes them (`/v1/models` lists `input_modalities`
 * with "image"): picked with the composer's button, dropped on the page or pasted into the
 * prompt. Each is read as a data: URL (what an `image_url` part carries, base64) and shown as a
 * thumbnail above the prompt until the message is sent or it is removed.
 */

/** Largest image file taken (the API's own limit, `limits.maxImageBytes`, is 20 MiB). */
const MAX_BYTES = 20 * 2 ** 20;

export class Attachments {
  private urls: string[] = [];
  private enabled = false;

  constructor(
    private readonly tray: HTMLElement,
    private readonly button: HTMLButtonElement,
    private readonly input: HTMLInputElement,
    private readonly onError: (text: string) => void,
  ) {
    button.addEventListener('click', () => input.click());
    input.addEventListener('change', () => {
      void this.add([...(input.files ?? [])]);
      input.value = '';
    });
    this.render();
  }

  /** Whether the loaded model takes images: the button shows, and drops and pastes are taken. */
  setEnabled(on: boolean): void {
    this.enabled = on;
    if (!on) this.urls = [];
    this.render();
  }

  get accepts(): boolean {
    return this.enabled;
  }

  /** Images waiting for the next message. */
  get count(): number {
    return this.urls.length;
  }

  /** Takes the image files among `files` (others are left to the caller); true when any was taken. */
  take(files: readonly File[]): boolean {
    const images = files.filter((f) => f.type.startsWith('image/'));
    if (!this.enabled || !images.length) return false;
    void this.add(images);
    return true;
  }

  /** The images to send with the next message; the tray empties. */
  drain(): string[] {
    const out = this.urls;
    this.urls = [];
    this.render();
    return out;
  }

  private async add(files: readonly File[]): Promise<void> {
    for (const f of files) {
      if (!f.type.startsWith('image/')) continue;
      if (f.size > MAX_BYTES) {
        this.onError(`${f.name} is ${(f.size / 2 ** 20).toFixed(1)} MiB; images up to 20 MiB are taken.`);
        continue;
      }
      this.urls.push(await dataURL(f));
    }
    this.render();
  }

  private render(): void {
    this.button.hidden = !this.enabled;
    this.tray.hidden = this.urls.length === 0;
    this.tray.replaceChildren(
      ...this.urls.map((url, i) => {
        const item = document.createElement('figure');
        item.className = 'attachment';
        const img = document.createElement('img');
        img.src = url;
        img.alt = `image ${i + 1}`;
        const remove = document.createElement('button');
        remove.type = 'button';
        remove.className = 'remove';
        remove.textContent = '×';
        remove.setAttribute('aria-label', `Remove image ${i + 1}`);
        remove.addEventListener('click', () => {
          this.urls.splice(i, 1);
          this.render();
        });
        item.append(img, remove);
        return item;
      }),
    );
  }
}

function dataURL(file: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result as string);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}
