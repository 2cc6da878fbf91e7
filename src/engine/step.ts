/**
 * The ragged batch of one forward step, laid out as the kernels read it (docs/ARCHITECTURE.md,
 * "Ragged batch"). CPU arrays and GPU buffers are allocated once for the maximum sizes; `write`
 * fills them for a step and uploads only the used prefix.
 */
import { createBuffer, STORAGE, UNIFORM } from '../gpu/buffers';
import { ContextLengthError } from './errors';
import type { KvPages } from './kv-pages';

/** One sequence's part of a step: `tokens` continue it from its current KV length. */
export interface SeqWork {
  seq: number;
  tokens: readonly number[];
}

export interface StepLimits {
  maxTokens: number;
  maxSeqs: number;
  maxPagesPerSeq: number;
}

export class StepBuffers {
  readonly tokens: GPUBuffer; // [maxTokens] u32 token ids
  readonly positions: GPUBuffer; // [maxTokens] u32 absolute position in its sequence
  readonly tokenSeq: GPUBuffer; // [maxTokens] u32 sequence slot of the step (0..S-1)
  readonly seqLens: GPUBuffer; // [maxSeqs] u32 context length after this step
  readonly blockTable: GPUBuffer; // [maxSeqs × maxPagesPerSeq] u32 page ids
  readonly slotMapping: GPUBuffer; // [maxTokens] u32 page × pageSize + offset of each new token
  readonly lastToken: GPUBuffer; // [maxSeqs] u32 index (in the step) of each sequence's last token
  readonly rowSlot: GPUBuffer; // [maxSeqs] u32 the sequence slot (KV id) of each row: where per-sequence state lives
  /** Uniform `{ T: u32, S: u32, pad, pad }`: this step's token and sequence counts. */
  readonly counts: GPUBuffer;

  private readonly cpu: {
    tokens: Uint32Array<ArrayBuffer>;
    positions: Uint32Array<ArrayBuffer>;
    tokenSeq: Uint32Array<ArrayBuffer>;
    seqLens: Uint32Array<ArrayBuffer>;
    blockTable: Uint32Array<ArrayBuffer>;
    slotMapping: Uint32Array<ArrayBuffer>;
    lastToken: Uint32Array<ArrayBuffer>;
    rowSlot: Uint32Array<ArrayBuffer>;
    counts: Uint32Array<ArrayBuffer>;
  };

  constructor(
    private readonly device: GPUDevice,
    readonly limits: StepLimits,
  ) {
    const { maxTokens, maxSeqs, maxPagesPerSeq } = limits;
    this.cpu = {
      tokens: new Uint32Array(maxTokens),
      positions: new Uint32Array(maxTokens),
      tokenSeq: new Uint32Array(maxTokens),
      seqLens: new Uint32Array(maxSeqs),
      blockTable: new Uint32Array(maxSeqs * maxPagesPerSeq),
      slotMapping: new Uint32Array(maxTokens),
      lastToken: new Uint32Array(maxSeqs),
      rowSlot: new Uint32Array(maxSeqs),
      counts: new Uint32Array(4),
    };
    const make = (name: keyof StepBuffers['cpu'], usage = STORAGE) =>
      createBuffer(device, this.cpu[name].byteLength, usage, `step.${name}`);
    this.tokens = make('tokens');
    this.positions = make('positions');
    this.tokenSeq = make('tokenSeq');
    this.seqLens = make('seqLens');
    this.blockTable = make('blockTable');
    this.slotMapping = make('slotMapping');
    this.lastToken = make('lastToken');
    this.rowSlot = make('rowSlot');
    this.counts = make('counts', UNIFORM);
  }

  /**
   * Reserves KV slots for every sequence's new tokens and uploads the step. Returns the token
   * count T. Throws (leaving the KV state as it was) if the step does not fit.
   */
  write(work: readonly SeqWork[], kv: KvPages): { tokens: number; seqs: number } {
    const { maxTokens, maxSeqs, maxPagesPerSeq } = this.limits;
    const T = work.reduce((n, w) => n + w.tokens.length, 0);
    if (T === 0 || T > maxTokens) throw new RangeError(`a step takes 1..${maxTokens} tokens, got ${T}`);
    if (work.length > maxSeqs) throw new RangeError(`a step takes at most ${maxSeqs} sequences, got ${work.length}`);
    const c = this.cpu;
    const reserved: Array<[number, number]> = [];
    try {
      let t = 0;
      work.forEach((w, s) => {
        const start = kv.length(w.seq);
        if (kv.pagesNeeded(w.seq, w.tokens.length) + kv.table(w.seq).length > maxPagesPerSeq) {
          throw new ContextLengthError(`sequence ${w.seq} would exceed ${maxPagesPerSeq * kv.pageSize} tokens of context`);
        }
        const slots = kv.append(w.seq, w.tokens.length);
        reserved.push([w.seq, start]);
        for (let i = 0; i < w.tokens.length; i++, t++) {
          c.tokens[t] = w.tokens[i]!;
          c.positions[t] = start + i;
          c.tokenSeq[t] = s;
          c.slotMapping[t] = slots[i]!;
        }
        c.lastToken[s] = t - 1;
        c.rowSlot[s] = w.seq;
        c.seqLens[s] = start + w.tokens.length;
        const table = kv.table(w.seq);
        c.blockTable.fill(0, s * maxPagesPerSeq, (s + 1) * maxPagesPerSeq);
        c.blockTable.set(table, s * maxPagesPerSeq);
      });
    } catch (e) {
      for (const [seq, start] of reserved) kv.truncate(seq, start);
      throw e;
    }
    const S = work.length;
    c.counts[0] = T;
    c.counts[1] = S;
    const q = this.device.queue;
    q.writeBuffer(this.tokens, 0, c.tokens, 0, T);
    q.writeBuffer(this.positions, 0, c.positions, 0, T);
    q.writeBuffer(this.tokenSeq, 0, c.tokenSeq, 0, T);
    q.writeBuffer(this.slotMapping, 0, c.slotMapping, 0, T);
    q.writeBuffer(this.seqLens, 0, c.seqLens, 0, S);
    q.writeBuffer(this.lastToken, 0, c.lastToken, 0, S);
    q.writeBuffer(this.rowSlot, 0, c.rowSlot, 0, S);
    q.writeBuffer(this.blockTable, 0, c.blockTable, 0, S * maxPagesPerSeq);
    q.writeBuffer(this.counts, 0, c.counts);
    return { tokens: T, seqs: S };
  }

  destroy(): void {
    for (const b of [this.tokens, this.positions, this.tokenSeq, this.seqLens, this.blockTable, this.slotMapping, this.lastToken, this.rowSlot, this.counts]) b.destroy();
  }
}
