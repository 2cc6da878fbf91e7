/** Human-readable sizes, rates and durations for the progress bar and the stats lines. */

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '?';
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

export function formatRate(bytesPerSec: number): string {
  return bytesPerSec > 0 ? `${formatBytes(bytesPerSec)}/s` : '';
}

/** `42 s`, `3 min 5 s`, `1 h 2 min`. */
export function formatDuration(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return '';
  if (sec < 1) return '<1 s';
  const s = Math.round(sec);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** Milliseconds as `850 ms` or `1.3 s`. */
export function formatMs(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** The last path segments of a URL or path: enough to recognise a file in a narrow panel. */
export function shortName(url: string, segments = 1): string {
  const clean = url.replace(/[?#].*$/, '').replace(/\/+$/, '');
  const parts = clean.split('/').filter(Boolean);
  return decodeURIComponent(parts.slice(-segments).join('/')) || url;
}

/** A Hugging Face URL as `org/name` plus the file, or the URL's last segments. */
export function modelLabel(url: string): string {
  const m = /huggingface\.co\/([^/]+\/[^/]+)\/resolve\/[^/]+\/?(.*)$/.exec(url);
  if (m) return m[2] ? `${m[1]} · ${decodeURIComponent(m[2])}` : m[1];
  return shortName(url, 2);
}
