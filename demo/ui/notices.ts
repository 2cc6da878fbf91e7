/** Banners above the chat: errors, warnings and notes, one per key, each dismissable. */

export type NoticeKind = 'error' | 'warn' | 'info';

export interface NoticeOptions {
  /** One banner per key: showing a key again replaces its banner. */
  key: string;
  kind: NoticeKind;
  title: string;
  text: string;
  /** A button that does the obvious next thing (e.g. reload the model). */
  action?: { label: string; run: () => void };
  /** Quoted in `data-code` for tests and bug reports. */
  code?: string;
}

export class Notices {
  constructor(private readonly root: HTMLElement) {}

  show(n: NoticeOptions): void {
    this.clear(n.key);
    const el = document.createElement('div');
    el.className = `notice ${n.kind}`;
    el.dataset.key = n.key;
    if (n.code) el.dataset.code = n.code;
    el.setAttribute('role', n.kind === 'error' ? 'alert' : 'status');

    const body = document.createElement('div');
    body.className = 'notice-body';
    const title = document.createElement('strong');
    title.textContent = n.title;
    const text = document.createElement('p');
    text.textContent = n.text;
    body.append(title, text);
    el.append(body);

    if (n.action) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'secondary';
      b.textContent = n.action.label;
      b.addEventListener('click', () => {
        this.clear(n.key);
        n.action!.run();
      });
      el.append(b);
    }
    const close = document.createElement('button');
    close.type = 'button';
    close.className = 'icon close';
    close.setAttribute('aria-label', 'Dismiss');
    close.textContent = '×';
    close.addEventListener('click', () => el.remove());
    el.append(close);
    this.root.append(el);
  }

  clear(key: string): void {
    this.root.querySelector(`[data-key="${CSS.escape(key)}"]`)?.remove();
  }
}
