/**
 * Python's `datetime.strftime` for the directives chat templates use (`%d %b %Y`, `%Y-%m-%d`,
 * ...), in the C locale and local time, as `datetime.now().strftime()` does in transformers.
 * Written here rather than taken from @huggingface/jinja, whose version follows the host
 * locale (`Intl`) and so would not match Python's English month names everywhere.
 */

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = [
  'January', 'February', 'March', 'April', 'May', 'June',
  'July', 'August', 'September', 'October', 'November', 'December',
];

const pad = (n: number, width = 2, fill = '0') => String(n).padStart(width, fill);

function dayOfYear(d: Date): number {
  const start = new Date(d.getFullYear(), 0, 1);
  return Math.round((new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime() - start.getTime()) / 86_400_000) + 1;
}

export function strftime(date: Date, format: string): string {
  // `%-d` (no padding) is glibc's extension, which Python on Linux passes through.
  return format.replace(/%(-?)([a-zA-Z%])/g, (whole, noPad: string, c: string) => {
    const p = (n: number, w = 2) => (noPad ? String(n) : pad(n, w));
    const h12 = date.getHours() % 12 || 12;
    switch (c) {
      case 'a': return DAYS[date.getDay()].slice(0, 3);
      case 'A': return DAYS[date.getDay()];
      case 'b': case 'h': return MONTHS[date.getMonth()].slice(0, 3);
      case 'B': return MONTHS[date.getMonth()];
      case 'd': return p(date.getDate());
      case 'e': return pad(date.getDate(), 2, ' ');
      case 'm': return p(date.getMonth() + 1);
      case 'y': return p(date.getFullYear() % 100);
      case 'Y': return String(date.getFullYear());
      case 'H': return p(date.getHours());
      case 'I': return p(h12);
      case 'M': return p(date.getMinutes());
      case 'S': return p(date.getSeconds());
      case 'p': return date.getHours() < 12 ? 'AM' : 'PM';
      case 'j': return p(dayOfYear(date), 3);
      case 'w': return String(date.getDay());
      case 'u': return String(date.getDay() || 7);
      case 'F': return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
      case 'T': return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
      case '%': return '%';
      default: return whole;
    }
  });
}
