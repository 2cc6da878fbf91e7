/**
 * "Check this GPU": runs the library's selfCheck() (in its own engine Worker, so no model needs
 * to be loaded) and fills a table as each result comes, then the adapter and the summary.
 * `?selfcheck-only=TEXT` (repeatable) passes `only` through: the e2e test keeps its run short with it.
 */
import { selfCheck, type SelfCheckReport, type SelfCheckResult } from '../../src/index';
import { formatAdapter, formatSummary, num } from '../../src/selfcheck/format';

export class GpuCheck {
  private running: Promise<void> | null = null;
  private readonly rows: HTMLTableSectionElement;
  private readonly adapter: HTMLElement;
  private readonly summary: HTMLElement;

  constructor(private readonly dialog: HTMLDialogElement) {
    this.rows = dialog.querySelector('tbody')!;
    this.adapter = dialog.querySelector('.gpu-check-adapter')!;
    this.summary = dialog.querySelector('.gpu-check-summary')!;
  }

  /** Opens the table; starts a run unless one is going (closing the table does not stop it). */
  open(): void {
    if (!this.dialog.open) this.dialog.showModal();
    if (!this.running) this.running = this.run().finally(() => (this.running = null));
  }

  private async run(): Promise<void> {
    const only = new URLSearchParams(location.search).getAll('selfcheck-only');
    this.rows.replaceChildren();
    this.adapter.textContent = '';
    this.setSummary('running', 'Checking every kernel, then tiny generated models, against the CPU reference…');
    try {
      const report = await selfCheck({ ...(only.length ? { only } : {}), onResult: (r) => this.addRow(r) });
      this.show(report);
    } catch (e) {
      this.setSummary('error', `The check could not run: ${(e as Error).message ?? String(e)}`);
    }
  }

  private addRow(r: SelfCheckResult): void {
    const tr = document.createElement('tr');
    tr.dataset.pass = String(r.pass);
    const cells = [r.group === 'model' ? 'engine' : r.check, r.name, r.precision, num(r.maxError), num(r.tolerance), r.pass ? 'pass' : 'FAIL'];
    tr.replaceChildren(
      ...cells.map((text) => {
        const td = document.createElement('td');
        td.textContent = text;
        return td;
      }),
    );
    if (r.problem) tr.title = r.problem;
    this.rows.append(tr);
    this.setSummary('running', `${this.rows.rows.length} checks so far…`);
  }

  private show(report: SelfCheckReport): void {
    this.adapter.textContent = formatAdapter(report);
    this.setSummary(report.pass ? 'pass' : 'fail', formatSummary(report));
  }

  private setSummary(state: 'running' | 'pass' | 'fail' | 'error', text: string): void {
    this.summary.dataset.state = state;
    this.summary.textContent = text;
  }
}
