/**
 * The ragged batch of one forward step, laid out as the kernels read it (docs/ARCHITECTURE.md,
 * "Ragged batch"). One CPU array and one GPU buffer are allocated once for the maximum sizes;
 * `write` fills them for a step and uploads them with one `writeBuffer` (each queue write costs a
 * browser an IPC message and a staging copy, so a step makes one, not ten).
 */
import { createBuffer, STORAGE, UNIFORM } from '../gpu/buffers';
import { NO_ADAPTER } from '../kernels/lora';
import { ContextLengthError } from './errors';
import type { KvPages } from './kv-pages';

/** One sequence's part of a step: `tokens` continue it from its current KV length. */
export interface SeqWork {
  seq: number;
  tokens: readonly number[];
  /** The LoRA pool id of the row's adapter (./lora-pool.ts); absent: the base model alone. */
  adapter?: number;
  /**
   * A verify row of speculative decoding: another row of the same sequence (`seq`) before it in
   * the step fed the tokens its one token follows. Its draw goes to its own word (`drawSlot`),
   * not the slot's, which the sequence's first row writes.
   */
  verifies?: boolean;
}

export interface StepLimits {
  maxTokens: number;
  maxSeqs: number;
  maxPagesPerSeq: number;
  /** u32 words of sampler parameters per row (src/kernels/sample.ts); the region is unused without it. */
  samplingWords?: number;
}

/** The regions of the packed step buffer, in order (the block table last: a step writes only its rows). */
const REGIONS = ['counts', 'seqCount', 'tokens', 'positions', 'tokenSeq', 'slotMapping', 'seqLens', 'lastToken', 'rowSlot', 'drawSlot', 'seqAdapter', 'sampling', 'blockTable'] as const;
type Region = (typeof REGIONS)[number];

/**
 * A step's metadata, packed into one buffer and written with one `writeBuffer`: each kernel binds
 * its region (offsets aligned as bindings require). Uniform regions are 16 bytes.
 */
export class StepBuffers {
  readonly buffer: GPUBuffer;
  /** Uniform `{ T, S, pad, pad }`: this step's token and sequence counts. */
  readonly counts: GPUBufferBinding;
  /** Uniform `{ S, pad, pad, pad }`: the row count of the per-sequence (last-token) matmul. */
  readonly seqCount: GPUBufferBinding;
  readonly tokens: GPUBufferBinding; // [maxTokens] u32 token ids (FEED: the row's last sampled token, src/kernels/feed.ts)
  readonly positions: GPUBufferBinding; // [maxTokens] u32 absolute position in its sequence
  readonly tokenSeq: GPUBufferBinding; // [maxTokens] u32 row of the step (0..S-1)
  readonly slotMapping: GPUBufferBinding; // [maxTokens] u32 page × pageSize + offset of each new token
  readonly seqLens: GPUBufferBinding; // [maxSeqs] u32 context length after this step
  readonly lastToken: GPUBufferBinding; // [maxSeqs] u32 index (in the step) of each row's last token
  readonly rowSlot: GPUBufferBinding; // [maxSeqs] u32 the sequence slot (KV id) of each row: where per-sequence state lives
  readonly drawSlot: GPUBufferBinding; // [maxSeqs] u32 where the sampler writes each row's token: its slot, or maxSeqs + row for a verify row
  readonly seqAdapter: GPUBufferBinding; // [maxSeqs] u32 each row's LoRA adapter id, or NO_ADAPTER (src/kernels/lora.ts)
  readonly sampling: GPUBufferBinding; // [maxSeqs × samplingWords] the sampler's per-row parameters
  readonly blockTable: GPUBufferBinding; // [maxSeqs × maxPagesPerSeq] u32 page ids

  private readonly cpu: Uint32Array<ArrayBuffer>;
  /** Word offset of each region in `cpu` (and, ×4, byte offset in `buffer`). */
  private readonly at: Record<Region, number>;
  private readonly view: Record<Region, Uint32Array<ArrayBuffer>>;

  constructor(
    private readonly device: GPUDevice,
    readonly limits: StepLimits,
  ) {
    const { maxTokens, maxSeqs, maxPagesPerSeq } = limits;
    const words: Record<Region, number> = {
      counts: 4,
      seqCount: 4,
      tokens: maxTokens,
      positions: maxTokens,
      tokenSeq: maxTokens,
      slotMapping: maxTokens,
      seqLens: maxSeqs,
      lastToken: maxSeqs,
      rowSlot: maxSeqs,
      drawSlot: maxSeqs,
      seqAdapter: maxSeqs,
      sampling: maxSeqs * Math.max(1, limits.samplingWords ?? 1),
      blockTable: maxSeqs * maxPagesPerSeq,
    };
    const align = Math.max(device.limits.minStorageBufferOffsetAlignment, device.limits.minUniformBufferOffsetAlignment) / 4;
    const at = {} as Record<Region, number>;
    let end = 0;
    for (const r of REGIONS) {
      at[r] = Math.ceil(end / align) * align;
      end = at[r] + words[r];
    }
    this.at = at;
    this.cpu = new Uint32Array(end);
    this.view = Object.fromEntries(REGIONS.map((r) => [r, this.cpu.subarray(at[r], at[r] + words[r])])) as Record<Region, Uint32Array<ArrayBuffer>>;
    this.buffer = createBuffer(device, end * 4, STORAGE | UNIFORM, 'step');
    const region = (r: Region): GPUBufferBinding => ({ buffer: this.buffer, offset: at[r] * 4, size: words[r] * 4 });
    this.counts = region('counts');
    this.seqCount = region('seqCount');
    this.tokens = region('tokens');
    this.positions = region('positions');
    this.tokenSeq = region('tokenSeq');
    this.slotMapping = region('slotMapping');
    this.seqLens = region('seqLens');
    this.lastToken = region('lastToken');
    this.rowSlot = region('rowSlot');
    this.drawSlot = region('drawSlot');
    this.seqAdapter = region('seqAdapter');
    this.sampling = region('sampling');
    this.blockTable = region('blockTable');
  }

  /**
   * Reserves KV slots for every sequence's new tokens and uploads the step, with the sampler's
   * parameters (`sampling`, packed words of the sampling rows) in the same write. Returns the
   * token and row counts, and whether any row runs an adapter. Throws (leaving the KV state as it was) if the step does not fit.
   */
  write(work: readonly SeqWork[], kv: KvPages, sampling?: Uint32Array): { tokens: number; seqs: number; adapted: boolean } {
    const { maxTokens, maxSeqs, maxPagesPerSeq } = this.limits;
    const T = work.reduce((n, w) => n + w.tokens.length, 0);
    if (T === 0 || T > maxTokens) throw new RangeError(`a step takes 1..${maxTokens} tokens, got ${T}`);
    if (work.length > maxSeqs) throw new RangeError(`a step takes at most ${maxSeqs} sequences, got ${work.length}`);
    const c = this.view;
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
        c.drawSlot[s] = w.verifies ? maxSeqs + s : w.seq;
        c.seqAdapter[s] = w.adapter ?? NO_ADAPTER;
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
    c.seqCount[0] = S;
    if (sampling) {
      if (sampling.length > c.sampling.length) throw new RangeError(`${sampling.length} sampling words do not fit the step's ${c.sampling.length}`);
      c.sampling.set(sampling);
    }
    // One write from the start through this step's rows of the block table.
    this.device.queue.writeBuffer(this.buffer, 0, this.cpu, 0, this.at.blockTable + S * maxPagesPerSeq);
    return { tokens: T, seqs: S, adapted: work.some((w) => w.adapter !== undefined) };
  }

  destroy(): void {
    this.buffer.destroy();
  }
}
