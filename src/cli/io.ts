/** Where a command writes: the process's streams, or buffers in tests. */
export interface CliIO {
  out(text: string): void;
  err(text: string): void;
}

export const processIO: CliIO = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};

/** A command-line mistake: printed with the usage, exit status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
