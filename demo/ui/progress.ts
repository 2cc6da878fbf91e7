/**
 * The load progress bar, driven only by the engine's typed events: one bar for the phase at work
 * (its bytes over every file known so far), chips for the phases, and a line with the file,
 * bytes, rate and time left. The bar's `aria-valuenow` is the real percentage, never forced.
 */
import type { LoadPhase, LoadProgress } from '../../src/loader/progress';
import { formatBytes, formatDuration, formatRate, shortName } from './format';

const VERB: Record<LoadPhase, string> = {
  download: 'Downloading',
  cache: 'Reading from cache',
  upload: 'Uploading weights to the GPU',
  compile: 'Compiling kernels',
};
const ORDER: readonly LoadPhase[] = ['download', 'cache', 'upload', 'compile'];

export type LoadState = 'idle' | 'loading' | 'loaded' | 'error';

export class ProgressView {
  private readonly bar: HTMLElement;
  private readonly fill: HTMLElement;
  private readonly label: HTMLElement;
  private readonly detail: HTMLElement;
  private current: LoadPhase | null = null;
  private readonly seen = new Set<LoadPhase>();

  constructor(private readonly root: HTMLElement) {
    this.bar = root.querySelector('[role="progressbar"]')!;
    this.fill = this.bar.querySelector('.fill')!;
    this.label = root.querySelector('.progress-label')!;
    this.detail = root.querySelector('.progress-detail')!;
  }

  reset(what: string): void {
    this.current = null;
    this.seen.clear();
    this.root.hidden = false;
    this.setState('loading');
    this.setPercent(0);
    this.label.textContent = `Opening ${what}…`;
    this.detail.textContent = '';
    for (const chip of this.chips()) chip.dataset.state = 'pending';
  }

  update(p: LoadProgress): void {
    if (p.phase !== this.current) {
      // A phase that is no longer reported has finished (phases may also interleave: a folder's
      // shards download while earlier ones upload, so a chip can go back to active).
      if (this.current) this.chip(this.current)!.dataset.state = 'done';
      this.current = p.phase;
      this.seen.add(p.phase);
      this.chip(p.phase)!.dataset.state = 'active';
      this.root.dataset.phase = p.phase;
    }
    const pct = p.totalBytes > 0 ? (100 * p.totalBytesDone) / p.totalBytes : 0;
    this.setPercent(pct);
    this.label.textContent = `${VERB[p.phase]} ${p.phase === 'compile' || p.phase === 'upload' ? '' : shortName(p.file)}`.trim();
    this.detail.textContent = detailLine(p);
  }

  /** The load finished: every phase we saw is done. The bar stays where the events left it. */
  finish(summary: string): void {
    for (const phase of this.seen) this.chip(phase)!.dataset.state = 'done';
    for (const chip of this.chips()) if (chip.dataset.state === 'pending') chip.dataset.state = 'skipped';
    this.setState('loaded');
    this.label.textContent = 'Ready';
    this.detail.textContent = summary;
  }

  fail(message: string): void {
    if (this.current) this.chip(this.current)!.dataset.state = 'failed';
    this.setState('error');
    this.label.textContent = 'Loading failed';
    this.detail.textContent = message;
  }

  private setState(s: LoadState): void {
    this.root.dataset.state = s;
  }

  private setPercent(pct: number): void {
    const v = Math.max(0, Math.min(100, pct));
    this.bar.setAttribute('aria-valuenow', String(Math.round(v)));
    this.fill.style.transform = `scaleX(${v / 100})`;
  }

  private chips(): HTMLElement[] {
    return [...this.root.querySelectorAll<HTMLElement>('[data-phase-chip]')];
  }

  private chip(phase: LoadPhase): HTMLElement | undefined {
    return this.chips().find((c) => c.dataset.phaseChip === phase);
  }
}

function detailLine(p: LoadProgress): string {
  if (p.phase === 'compile') return `${p.totalBytesDone} of ${p.totalBytes} layers ready`;
  const parts = [p.totalBytes > 0 ? `${formatBytes(p.totalBytesDone)} of ${formatBytes(p.totalBytes)}` : formatBytes(p.totalBytesDone)];
  const rate = formatRate(p.rateBytesPerSec);
  if (rate) parts.push(rate);
  if (p.etaSec !== undefined && p.totalBytesDone < p.totalBytes) parts.push(`${formatDuration(p.etaSec)} left`);
  return parts.join(' · ');
}

export { ORDER as PHASES };
