/**
 * Sequential little-endian reads over a ByteSource, fetched in windows: 1 MiB first, doubling
 * (to 64 MiB) each time more is needed, so a header with a multi-MB tokenizer costs a few range
 * requests and the tensor data after it is never touched.
 */
import type { ByteSource } from './source';
import { FormatError } from './types';

const FIRST_WINDOW = 1 << 20;
const MAX_WINDOW = 64 << 20;

const utf8 = new TextDecoder('utf-8');

export class HeaderCursor {
  private buf: Uint8Array = new Uint8Array(0);
  private view = new DataView(this.buf.buffer);
  private bufStart = 0;
  private window = FIRST_WINDOW;
  /** Absolute file position of the next read. */
  pos = 0;

  constructor(
    private readonly src: ByteSource,
    /** File size in bytes. */
    readonly size: number,
    /** What is being read, for truncation errors ("GGUF header"). */
    private readonly what: string,
  ) {}

  get remaining(): number {
    return this.size - this.pos;
  }

  /** Makes the next `n` bytes available; fetches a new window when they are not. */
  async ensure(n: number): Promise<void> {
    const end = this.pos + n;
    if (end <= this.bufStart + this.buf.length) return;
    if (end > this.size) {
      throw new FormatError(
        'truncated',
        this.src.name,
        `the ${this.what} runs past the end of the file (${this.size} bytes): ${n} bytes needed at byte ${this.pos}`,
      );
    }
    const length = Math.min(this.size - this.pos, Math.max(n, this.window));
    this.window = Math.min(this.window * 2, MAX_WINDOW);
    this.buf = await this.src.read(this.pos, length);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    this.bufStart = this.pos;
  }

  private at(n: number): number {
    const i = this.pos - this.bufStart;
    this.pos += n;
    return i;
  }

  // The typed reads below assume ensure() covered them.
  u8(): number {
    return this.view.getUint8(this.at(1));
  }
  i8(): number {
    return this.view.getInt8(this.at(1));
  }
  u16(): number {
    return this.view.getUint16(this.at(2), true);
  }
  i16(): number {
    return this.view.getInt16(this.at(2), true);
  }
  u32(): number {
    return this.view.getUint32(this.at(4), true);
  }
  i32(): number {
    return this.view.getInt32(this.at(4), true);
  }
  f32(): number {
    return this.view.getFloat32(this.at(4), true);
  }
  f64(): number {
    return this.view.getFloat64(this.at(8), true);
  }
  u64(): bigint {
    return this.view.getBigUint64(this.at(8), true);
  }
  i64(): bigint {
    return this.view.getBigInt64(this.at(8), true);
  }

  /** `n` raw bytes (a view into the window). */
  bytes(n: number): Uint8Array {
    const i = this.at(n);
    return this.buf.subarray(i, i + n);
  }

  /** UTF-8 text of `n` bytes; short ASCII strings (most tokens) skip the TextDecoder call. */
  text(n: number): string {
    const i = this.at(n);
    if (n <= 32) {
      let s = '';
      for (let k = i; k < i + n; k++) {
        const c = this.buf[k]!;
        if (c >= 0x80) return utf8.decode(this.buf.subarray(i, i + n));
        s += String.fromCharCode(c);
      }
      return s;
    }
    return utf8.decode(this.buf.subarray(i, i + n));
  }
}
