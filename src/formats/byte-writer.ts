/** A growable little-endian byte buffer for building file headers, plus chunk helpers. */

const utf8 = new TextEncoder();

export class ByteWriter {
  private buf = new Uint8Array(4096);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): number {
    const at = this.length;
    if (at + n > this.buf.length) {
      let cap = this.buf.length * 2;
      while (cap < at + n) cap *= 2;
      const next = new Uint8Array(cap);
      next.set(this.buf.subarray(0, at));
      this.buf = next;
      this.view = new DataView(next.buffer);
    }
    this.length += n;
    return at;
  }

  // reserve() first: it may replace this.buf and this.view.
  u8(v: number): void { const at = this.reserve(1); this.view.setUint8(at, v); }
  i8(v: number): void { const at = this.reserve(1); this.view.setInt8(at, v); }
  u16(v: number): void { const at = this.reserve(2); this.view.setUint16(at, v, true); }
  i16(v: number): void { const at = this.reserve(2); this.view.setInt16(at, v, true); }
  u32(v: number): void { const at = this.reserve(4); this.view.setUint32(at, v, true); }
  i32(v: number): void { const at = this.reserve(4); this.view.setInt32(at, v, true); }
  f32(v: number): void { const at = this.reserve(4); this.view.setFloat32(at, v, true); }
  f64(v: number): void { const at = this.reserve(8); this.view.setFloat64(at, v, true); }
  u64(v: number | bigint): void { const at = this.reserve(8); this.view.setBigUint64(at, BigInt(v), true); }
  i64(v: number | bigint): void { const at = this.reserve(8); this.view.setBigInt64(at, BigInt(v), true); }

  bytes(b: Uint8Array): void {
    const at = this.reserve(b.length); // first: reserve() may replace this.buf
    this.buf.set(b, at);
  }

  /** GGUF string: u64 byte length, then UTF-8 bytes. */
  string(s: string): void {
    const b = utf8.encode(s);
    this.u64(b.length);
    this.bytes(b);
  }

  /** Zero bytes up to the next multiple of `alignment` (counted from `base`, the buffer's file offset). */
  padTo(alignment: number, base = 0): void {
    const pad = (alignment - ((base + this.length) % alignment)) % alignment;
    this.reserve(pad); // new capacity is zero-filled, and reserved bytes were never written
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

/** Joins chunks into one array: for small files (tests, fixtures) only. */
export function concatChunks(chunks: Iterable<Uint8Array>): Uint8Array {
  const w = new ByteWriter();
  for (const c of chunks) w.bytes(c); // copied as it arrives, so a producer may reuse its buffers
  return w.finish();
}
