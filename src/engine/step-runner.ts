/**
 * The step executor (the engine's BatchRunner): places sequences in slots, records and submits
 * each step the scheduler hands it (the forward pass, the grammar masks, the penalties and the
 * sampler), and reads the step's outputs back over one table of readback channels (READBACK: the
 * sampled tokens and logprobs, the logits of rows sampled on the CPU, the final hidden states, the
 * routed experts), each row saying its buffer's size, its copies after the pass and how a row's
 * value is unpacked. A new per-row output is one row there.
 */
import { lostSoon, type GPUContext } from '../gpu/device';
import { createBuffer, READBACK } from '../gpu/buffers';
import type { ApplyMaskOp } from '../kernels/apply-mask';
import { maskWords } from '../kernels/mask-ref';
import type { Op, StepShape } from '../kernels/op';
import { needsPenalties, type PenaltiesOp } from '../kernels/penalties';
import { LOGPROB_WORDS, packSamplingParams, SAMPLE_PARAM_WORDS, unpackSampled, type SeqSampling } from '../kernels/sample';
import { SPLICE_NONE } from '../kernels/splice-rows';
import type { ModelConfig } from '../model/config';
import { nextTask } from './backend-util';
import type { GpuForward, ImageSplice } from './forward/forward';
import type { KvPages } from './kv-pages';
import type { LayerCaches } from './layer-cache';
import type { BatchItem, BatchRunner, StepCompletion } from './scheduler';
import type { Sequence } from './sequence';
import type { StateSnapshots } from './state-snapshots';
import type { StepBuffers } from './step';
import type { GeneratedToken, SamplingParams } from './types';

/**
 * Bench hook (src/bench/profiler.ts): stands in for a step's compute pass, e.g. to give each
 * dispatch its own timed pass. Set `GpuEngine.profiler` only while profiling. A step under a
 * grammar records into two command buffers: `begin` is called once per buffer (`resume` on the
 * second), `end` once, in the last buffer.
 */
export interface StepProfiler {
  /**
   * The pass the step records into (called instead of `encoder.beginComputePass()`); `resume`: the
   * same step, in a later command buffer; `shape`: the step's tokens, sequences and their keys, for
   * the dispatches' byte counts (src/kernels/op.ts).
   */
  begin(encoder: GPUCommandEncoder, resume: boolean, shape: StepShape): GPUComputePassEncoder;
  /** After the step's last pass ended, before `encoder.finish()`: e.g. resolve the step's queries. */
  end(encoder: GPUCommandEncoder): void;
}

/**
 * Whether a step reads the logits back and samples on the CPU. logit_bias, the min_tokens ban and
 * the repetition/frequency/presence penalties run on the GPU (`penalized`: the penalties op,
 * src/kernels/penalties.ts), so only these stay here: DRY, which matches the history's suffix
 * against every earlier position (a scan over the whole history, not an elementwise op);
 * mirostat, whose cut depends on a running mu updated by each draw (v2 could become a GPU
 * threshold later); and penalties with logprobs, since OpenAI's logprobs are the log-softmax of
 * the raw logits, which the penalties op overwrites in place.
 */
function needsCpuSampling(p: SamplingParams, penalized: boolean): boolean {
  return p.dry.multiplier !== 0 || p.mirostat.mode !== 0 || (penalized && p.logprobs);
}

/** Whether this step of `seq` samples on the CPU: its settings need it, or it is teacher-forced. */
function sampledOnCpu(seq: Sequence): boolean {
  return seq.wantsLogits || needsCpuSampling(seq.sampling, needsPenalties(seq.sampling, seq.banned().length > 0));
}

/** Penalty settings that make a slot's penalties a no-op (a sequence that does not use them). */
const NO_PENALTIES = { logitBias: {}, repetitionPenalty: 1, frequencyPenalty: 0, presencePenalty: 0 } as const;

/** The sampler's ops and buffers (made at load, GpuEngine.load). */
export interface Sampler {
  op: Op;
  params: GPUBufferBinding;
  tokens: GPUBuffer; // u32 [2 × maxSeqs] the token drawn for each slot, then each verify row's (StepBuffers.drawSlot)
  logprobs: GPUBuffer; // u32 [maxSeqs, LOGPROB_WORDS] by row
  /** Absent on a draft model's runner (`drawsOnly`): its greedy draws use no penalties. */
  penalties?: PenaltiesOp;
  mask: ApplyMaskOp;
}

/**
 * One row of a step: an item's tokens, or (`verify` ≥ 1, speculative decoding) its proposal
 * `verify` − 1 as a row of its own, right after the item's earlier rows.
 */
interface Row {
  item: BatchItem;
  tokens: readonly number[];
  verify: number;
}

/** An item's rows: its tokens, then one per proposal it verifies. */
function rowsOf(item: BatchItem): Row[] {
  return [{ item, tokens: item.work.tokens, verify: 0 }, ...(item.work.proposed ?? []).map((id, i) => ({ item, tokens: [id], verify: i + 1 }))];
}

/** What a step reads back, decided as it is submitted. */
interface StepOut {
  /** Rows sampled on the GPU (an item that verifies proposals has several, consecutive). */
  gpuRows: Row[];
  cpuRows: BatchItem[];
  /** The GPU rows' sampling settings, in row order. */
  params: SeqSampling[];
  /** The sampling rows (GPU rows, then CPU rows): row r of a per-row readback is sampling[r]. */
  sampling: Row[];
  wantLogprobs: boolean;
  wantHidden: boolean;
  wantRouted: boolean;
}

type ChannelName = 'tokens' | 'logits' | 'hidden' | 'routed';

/** One step's readback buffers (MAP_READ), one per channel. */
type Readback = Record<ChannelName, GPUBuffer>;

/** One per-step output read back to the CPU. */
interface Channel {
  name: ChannelName;
  /** Bytes of its readback buffer. */
  bytes: number;
  /** Its readback buffer's contents at creation, where a step may leave words unwritten. */
  fill?: number;
  /** The step reads it back. */
  wanted(s: StepOut): boolean;
  /** Records its copies into `into` after the step's pass. */
  copy(encoder: GPUCommandEncoder, into: GPUBuffer, s: StepOut): void;
  /** Bytes from 0 the step maps (absent: the whole buffer). */
  mapped?(s: StepOut): number;
}

/** The channels' values of one sampling row, as the row's sequence records them. */
interface RowOut {
  /** The GPU rows' drawn token (and logprobs). */
  token?: Pick<GeneratedToken, 'id' | 'logprob' | 'top'>;
  /** A CPU row's logits. */
  logits?: Float32Array;
  hidden?: Float32Array;
  routedExperts?: number[][];
}

export class StepRunner implements BatchRunner {
  /** Bench hook: while set, steps record through it (more passes; same results). */
  profiler: StepProfiler | null = null;
  /** Test hook: called as each step is submitted and as a sampling step's results reach the CPU. */
  trace: ((event: 'submit' | 'readback') => void) | null = null;
  /** Sampled rows of steps that read the logits back and sampled on the CPU (see needsCpuSampling). */
  cpuSteps = 0;
  /** Prefill chunks run that only filled the KV (no sampling). */
  prefillSteps = 0;
  /** The forward pass's image splice, once enabled (GpuForward.enableImages). */
  images: ImageSplice | null = null;
  /** The vision tower: each tile's image-token embeddings (a model with one; set with `images`). */
  encodeTiles: ((tiles: readonly Float32Array[]) => Promise<Float32Array[]>) | null = null;
  /** Every row's final hidden state (GpuForward.enableRows), once an MTP head is loaded: its proposers take the prompt's rows from it. */
  hiddenRows: GPUBuffer | null = null;
  /** Tiles the tower encoded (tests: an image the prefix cache holds is not encoded again). */
  tilesEncoded = 0;
  /** Speculative decoding: tokens proposed and verified, and those accepted into outputs. */
  readonly speculated = { proposed: 0, accepted: 0 };
  private readonly channels: Channel[];
  /** Readback buffers of the steps in flight: step n's while step n+1 runs. */
  private readonly ring: Readback[];
  private submitted = 0;
  private readonly samplingParams: ArrayBuffer;
  /** An all-allowed grammar mask: the rows of unconstrained sequences in a step where another row has a grammar. */
  private readonly allowAll: Uint32Array;
  /** Whether each slot's sequence uses the GPU penalties op (its settings were written at placement). */
  private readonly slotPenalized: boolean[];
  private readonly caches: LayerCaches;

  constructor(
    private readonly gpu: GPUContext,
    private readonly config: ModelConfig,
    /** `maxSeqs` rows per step (`slots` sequences, default maxSeqs, and verify rows); the sampler's `tokens` hold 2 × maxSeqs words (by slot, then a verify row's by row). */
    private readonly limits: { maxSeqs: number; slots?: number },
    private readonly forward: GpuForward,
    private readonly sampler: Sampler,
    private readonly stepBuffers: StepBuffers,
    private readonly kv: KvPages,
    /** A hybrid model's state snapshots (BatchItem.loadState / saveState), null without. */
    private readonly snapshots: StateSnapshots | null = null,
    /** A draft model's runner (./draft-engine.ts): greedy draws on the GPU only, so only the drawn ids are read back (no logits, hidden-state or routed-expert buffers). */
    drawsOnly = false,
  ) {
    const { maxSeqs } = limits;
    this.caches = forward.caches;
    this.channels = readbackChannels(config, limits, forward, sampler).filter((c) => !drawsOnly || c.name === 'tokens');
    this.ring = [0, 1].map((i) => readback(gpu.device, this.channels, i));
    this.samplingParams = new ArrayBuffer(maxSeqs * SAMPLE_PARAM_WORDS * 4);
    this.allowAll = new Uint32Array(maskWords(config.vocabSize)).fill(0xffffffff);
    this.slotPenalized = new Array<boolean>(maxSeqs).fill(false);
  }

  /** Bytes of the readback buffers. */
  get readbackBytes(): number {
    return this.ring.reduce((n, r) => n + Object.values(r).reduce((m, b) => m + b.size, 0), 0);
  }

  /** Bytes of the state snapshot pool. */
  get snapshotBytes(): number {
    return this.snapshots?.bytes ?? 0;
  }

  /**
   * A sequence takes a slot (BatchRunner): the penalties op's per-slot state. That state then
   * follows the sampled tokens on the GPU; a sequence placed again after preemption brings its
   * output's counts. The min_tokens ban can only end during a request, so if any step of the
   * sequence uses the op, its first one does.
   */
  place(seq: Sequence, slot: number): void {
    const banned = seq.banned();
    const penalized = needsPenalties(seq.sampling, banned.length > 0);
    const gpu = penalized && !sampledOnCpu(seq);
    this.slotPenalized[slot] = gpu;
    // A draft's runner has no penalties op: its sequences are greedy (never `gpu` here).
    if (gpu) this.sampler.penalties!.reset(slot, seq.sampling, seq.promptIds, banned, seq.tokens.slice(seq.promptIds.length));
    else this.sampler.penalties?.reset(slot, NO_PENALTIES, [], []);
    this.caches.resetSlot(slot);
  }

  /**
   * Records and submits one step (BatchRunner). Rows are ordered: sequences sampled on the GPU,
   * then those sampled on the CPU (their logits are read back), then prefill chunks that sample
   * nothing; the sampler, penalties and mask run over the sampling rows only. Unmasked, the step
   * is one command buffer; with a grammar in any row it is two: the forward pass is submitted
   * first, the CPU computes the grammars' bitmasks while the GPU runs it, and a second small
   * buffer applies the masks, the penalties and the sampler and copies the results out, into
   * this step's readback buffers of the ring (two: the scheduler completes step n after it
   * submitted step n+1, never later). A token drawn on the GPU without a grammar stays there for
   * the next step to feed (FEED).
   */
  async submit(items: BatchItem[]): Promise<StepCompletion> {
    const { device } = this.gpu;
    const gpuRows: Row[] = [];
    const cpuRows: BatchItem[] = [];
    const rest: BatchItem[] = [];
    for (const item of items) {
      const { seq, slot, work } = item;
      if (!work.samples) {
        rest.push(item);
        continue;
      }
      // A sequence that verifies proposals is sampled on the GPU (Sequence's canSpeculate).
      if (sampledOnCpu(seq)) cpuRows.push(item);
      else gpuRows.push(...rowsOf(item));
      // min_tokens reached: the bias row goes back to logit_bias alone (one write per request).
      if (this.slotPenalized[slot] && seq.minTokens > 0 && seq.drawCount === seq.minTokens) this.sampler.penalties!.setBias(slot, seq.sampling, []);
    }
    const rows: Row[] = [...gpuRows, ...[...cpuRows, ...rest].map((item) => ({ item, tokens: item.work.tokens, verify: 0 }))];
    const sampling = gpuRows.length + cpuRows.length;
    // A verify row draws with the sampler's counter at the output's length it would draw at unspeculated.
    const params = gpuRows.map((r) => {
      const p = r.item.seq.gpuSampling();
      return r.verify ? { ...p, step: p.step + r.verify } : p;
    });
    if (params.length) packSamplingParams(params, this.samplingParams);
    await this.encodeImages(rows);
    const { tokens, seqs, adapted } = this.stepBuffers.write(
      rows.map((r) => ({ seq: r.item.slot, tokens: r.tokens, adapter: r.item.seq.adapter?.id, verifies: r.verify > 0 })),
      this.kv,
      params.length ? new Uint32Array(this.samplingParams, 0, params.length * SAMPLE_PARAM_WORDS) : undefined,
    );
    const spliced = this.writeImageRows(rows, tokens);
    const ring = this.ring[this.submitted++ % this.ring.length]!;
    let encoder = device.createCommandEncoder();
    // A cached prefix's recurrent states into the slots they resume in, before the pass reads them.
    for (const item of items) if (item.loadState !== undefined) this.snapshots!.load(encoder, item.loadState, item.slot);
    // Each sequence's keys after this step: the longest decides attention's splits; a profiled
    // step reports them all.
    const keys = rows.map((r) => this.kv.length(r.item.slot));
    const shape = this.profiler ? { tokens, seqs, keys } : undefined;
    let pass = this.profiler ? this.profiler.begin(encoder, false, shape!) : encoder.beginComputePass();
    // return_hidden_states: the sampling rows' final hidden states are copied out after the pass.
    const wantHidden = rows.slice(0, sampling).some((r) => r.item.seq.readsHidden);
    // An MTP head's rows whose next token is known (a prompt's): every row is normed for the head to copy after the step.
    const known = this.hiddenRows ? rows.map((r) => (r.verify === 0 ? r.item.seq.knownRows(r.item.work) : null)) : [];
    const wantRows = known.some((k) => k);
    this.forward.encode(pass, this.forward.plan({ tokens, seqs, adapted, hidden: wantHidden, maxKeys: Math.max(...keys), images: spliced, rows: wantRows }));
    const masked = rows.slice(0, sampling).some((r) => r.item.seq.constraint);
    if (masked) {
      pass.end();
      device.queue.submit([encoder.finish()]);
      // A browser may hand submitted work to its GPU process only once the microtask queue drains
      // (Blink flushes at the end of a microtask checkpoint), and xgrammar's mask is synchronous
      // wasm behind a promise: yield a task so the forward pass runs while the masks are computed.
      // Queue writes land in order between submits, so the second buffer reads this step's masks.
      await nextTask();
      // A verify step's rows (consecutive, from its verify 0 on) each get the grammar's mask after the proposals before it.
      let verifyMasks: readonly Uint32Array[] = [];
      for (let row = 0; row < sampling; row++) {
        const { item, verify } = rows[row]!;
        const seq = item.seq;
        if (seq.constraint && item.work.proposed && verify === 0) verifyMasks = await seq.rowMasks(item.work.proposed);
        else if (seq.constraint && !item.work.proposed) await seq.nextMask();
        this.sampler.mask.write(row, !seq.constraint ? this.allowAll : item.work.proposed ? verifyMasks[verify]! : seq.maskBits!);
      }
      encoder = device.createCommandEncoder();
      pass = this.profiler ? this.profiler.begin(encoder, true, shape!) : encoder.beginComputePass();
      this.sampler.mask.encode(pass, sampling);
    }
    if (gpuRows.length) {
      // The op runs over every sampling row; rows whose slot does not use it are left as they are.
      if (gpuRows.some((r) => this.slotPenalized[r.item.slot])) this.sampler.penalties!.encode(pass, gpuRows.length);
      this.sampler.op.encode(pass, gpuRows.length);
      // Verify rows past a rejected proposal leave no recurrent state (their K/V is truncated after the readback).
      if (gpuRows.some((r) => r.verify > 0)) this.forward.rollBack(pass, seqs);
    }
    pass.end();
    // The states at a page boundary the step ended on, for the prefix cache.
    for (const item of items) if (item.saveState !== undefined) this.snapshots!.save(encoder, item.slot, item.saveState);
    this.profiler?.end(encoder);
    // The step's outputs into this step's readback buffers (READBACK: one row per channel).
    const out: StepOut = { gpuRows, cpuRows, params, sampling: rows.slice(0, sampling), wantLogprobs: params.some((p) => p.logprobs), wantHidden, wantRouted: rows.slice(0, sampling).some((r) => r.item.seq.wantsRouted) };
    const wanted = this.channels.filter((c) => c.wanted(out));
    for (const c of wanted) c.copy(encoder, ring[c.name], out);
    device.queue.submit([encoder.finish()]);
    this.trace?.('submit');
    // The head's runs over them are submitted now, before the next step writes the rows again.
    if (wantRows) {
      let at = 0;
      rows.forEach((r, i) => {
        if (known[i]) r.item.seq.observeRows(this.hiddenRows!, at, known[i]);
        at += r.tokens.length;
      });
    }
    rows.forEach((r, i) => r.verify === 0 && r.item.seq.advance(r.item.work, i < gpuRows.length && !r.item.seq.constraint));
    this.prefillSteps += rest.length;

    if (!sampling) {
      const done = this.untilLost(device.queue.onSubmittedWorkDone());
      done.catch(() => {}); // awaited by the scheduler a step later; a loss must not count as unhandled meanwhile
      return () => done;
    }
    return () => this.collect(ring, out, wanted);
  }

  /**
   * Encodes, in one batch on the tower, the images whose positions this step feeds and that are
   * not encoded yet (an image the prefix cache held is fed by none): image requests take part in
   * the same steps as text ones, their tiles encoded as the step that needs them is recorded.
   */
  private async encodeImages(rows: readonly Row[]): Promise<void> {
    if (!this.encodeTiles) return;
    const pending = rows.flatMap((r) => {
      const from = r.item.seq.kvLength;
      return r.verify === 0 ? (r.item.seq.images?.pending(from, from + r.tokens.length) ?? []) : [];
    });
    if (!pending.length) return;
    const tiles = pending.flatMap((im) => im.tiles);
    const encoded = await this.encodeTiles(tiles);
    this.tilesEncoded += tiles.length;
    let at = 0;
    for (const im of pending) im.rows = encoded.slice(at, (at += im.tiles.length));
  }

  /**
   * The image rows of the step's prompt positions that are image tokens, with each step row's
   * index into them, written for the splice after the embedding; false when the step has none.
   * A row's tokens sit at its sequence's positions from kvLength on (before this step's advance).
   */
  private writeImageRows(rows: readonly Row[], tokens: number): boolean {
    if (!this.images) return false;
    const H = this.config.hiddenSize;
    let index: Uint32Array | null = null;
    const data: Float32Array[] = [];
    let at = 0;
    for (const r of rows) {
      const images = r.verify === 0 ? r.item.seq.images : undefined;
      if (images) {
        const from = r.item.seq.kvLength;
        r.tokens.forEach((_, j) => {
          const e = images.rowAt(from + j);
          if (!e) return;
          index ??= new Uint32Array(tokens).fill(SPLICE_NONE);
          index[at + j] = data.length;
          data.push(e);
        });
      }
      at += r.tokens.length;
    }
    if (!index) return false;
    const packed = new Float32Array(data.length * H);
    data.forEach((e, i) => packed.set(e, i * H));
    this.gpu.device.queue.writeBuffer(this.images.rows, 0, packed);
    this.gpu.device.queue.writeBuffer(this.images.index, 0, index);
    return true;
  }

  /**
   * A step's completion: maps its readback buffers once the GPU finished it and records each
   * row's token. A sequence that ended at the step before (known only now) drew one token too
   * many here: it is dropped, so the output is what an unpipelined loop gives.
   */
  private async collect(ring: Readback, s: StepOut, wanted: Channel[]): Promise<void> {
    try {
      await this.untilLost(Promise.all(wanted.map((c) => ring[c.name].mapAsync(GPUMapMode.READ, 0, c.mapped?.(s)))));
      this.trace?.('readback');
      const rows = this.unpack(ring, s, wanted);
      s.gpuRows.forEach(({ item, verify }, row) => {
        if (item.seq.finish || verify > 0) return;
        const proposed = item.work.proposed;
        if (proposed) {
          this.verify(
            item,
            proposed,
            Array.from({ length: proposed.length + 1 }, (_, i) => {
              const { token, hidden } = rows(s.gpuRows[row + i]!, row + i);
              return { ...token!, ...(hidden ? { hidden } : {}) };
            }),
          );
          return;
        }
        const { token, hidden, routedExperts } = rows(s.gpuRows[row]!, row);
        guard(item, () => item.seq.record({ ...token!, ...(hidden ? { hidden } : {}), ...(routedExperts ? { routedExperts } : {}) }));
      });
      s.cpuRows.forEach((item, i) => {
        if (item.seq.finish) return;
        this.cpuSteps++;
        const { logits, hidden, routedExperts } = rows({ item, tokens: item.work.tokens, verify: 0 }, s.gpuRows.length + i);
        guard(item, () => item.seq.sampleLogits(logits!, hidden, routedExperts));
      });
    } finally {
      for (const b of Object.values(ring)) if (b.mapState === 'mapped') b.unmap();
    }
    // Tokens the grammars force now are fed with this draw at the next step (Sequence.jumpForward).
    for (const item of [...s.gpuRows.filter((r) => r.verify === 0).map((r) => r.item), ...s.cpuRows]) if (item.seq.jumpsForward && item.error === undefined) await item.seq.jumpForward().catch((e: unknown) => (item.error = e));
  }

  /** A verify step's draws (one per row of the item) recorded by its sequence (Sequence.verify; the scheduler rolls its K/V back). */
  private verify(item: BatchItem, proposed: readonly number[], draws: GeneratedToken[]): void {
    const { seq } = item;
    const before = seq.speculation.accepted;
    guard(item, () => seq.verify(draws, proposed));
    this.speculated.proposed += proposed.length;
    this.speculated.accepted += seq.speculation.accepted - before;
  }

  /** Each sampling row's values from the mapped channels (a hidden state or routed experts only for a sequence that asked). */
  private unpack(ring: Readback, s: StepOut, wanted: Channel[]): (row: Row, index: number) => RowOut {
    const range = (name: ChannelName) => (wanted.some((c) => c.name === name) ? ring[name].getMappedRange(0, this.channels.find((c) => c.name === name)!.mapped?.(s)) : null);
    const { maxSeqs } = this.limits;
    const { vocabSize: V, hiddenSize: H } = this.config;
    const tokens = range('tokens');
    const words = tokens && new Uint32Array(tokens);
    const logits = range('logits');
    const all = logits && new Float32Array(logits);
    const hidden = range('hidden');
    const hiddens = hidden && new Float32Array(hidden);
    const routed = range('routed');
    // int32: a dense layer's entries are -1.
    const routedWords = routed && new Int32Array(routed);
    const perRow = routedWordsOf(this.config);
    const k = this.config.moe?.numExpertsUsed ?? 0;
    return ({ item, verify }, row) => {
      const out: RowOut = {};
      if (words && row < s.gpuRows.length) {
        const at = 2 * maxSeqs + row * LOGPROB_WORDS;
        const drawn = verify ? maxSeqs + row : item.slot;
        const [t] = unpackSampled(words.subarray(drawn, drawn + 1), s.wantLogprobs ? words.subarray(at, at + LOGPROB_WORDS) : undefined, [s.params[row]!]);
        out.token = { id: t!.token, ...(t!.logprob !== undefined ? { logprob: t!.logprob, top: t!.top ?? [] } : {}) };
      }
      if (all && row >= s.gpuRows.length) {
        const i = row - s.gpuRows.length;
        out.logits = all.slice(i * V, (i + 1) * V);
      }
      if (hiddens && item.seq.readsHidden) out.hidden = hiddens.slice(row * H, (row + 1) * H);
      if (routedWords && item.seq.wantsRouted) out.routedExperts = this.forward.routedIds.map((_, l) => Array.from(routedWords.subarray(row * perRow + l * k, row * perRow + (l + 1) * k)));
      return out;
    };
  }

  /**
   * `p`, or a rejection with the loss once the device is lost: a lost device may never report
   * work done, and its failed calls (a mapAsync) reject with errors of their own first.
   */
  private async untilLost<T>(p: Promise<T>): Promise<T> {
    try {
      return await Promise.race([p, this.gpu.lost.then((e) => Promise.reject(e))]);
    } catch (e) {
      throw (await lostSoon(this.gpu)) ?? e;
    }
  }

  /** Frees the readback buffers. */
  destroy(): void {
    for (const r of this.ring) for (const b of Object.values(r)) b.destroy();
    this.snapshots?.destroy();
  }
}

/** u32 words of one row's routed experts: layers × k (0 without experts). */
function routedWordsOf(config: ModelConfig): number {
  const moe = config.moe;
  return moe ? config.numLayers * moe.numExpertsUsed : 0;
}

/** The readback channels, in copy order. */
function readbackChannels(config: ModelConfig, limits: { maxSeqs: number; slots?: number }, forward: GpuForward, sampler: Sampler): Channel[] {
  const { vocabSize: V, hiddenSize: H } = config;
  const { maxSeqs } = limits;
  const routedWords = routedWordsOf(config);
  return [
    {
      // u32 [2 × maxSeqs] ids by slot, then verify rows' by row (StepBuffers.drawSlot), then [maxSeqs, LOGPROB_WORDS] by row
      name: 'tokens',
      bytes: maxSeqs * (2 + LOGPROB_WORDS) * 4,
      wanted: (s) => s.gpuRows.length > 0,
      copy(encoder, into, s) {
        encoder.copyBufferToBuffer(sampler.tokens, 0, into, 0, 2 * maxSeqs * 4);
        if (s.wantLogprobs) encoder.copyBufferToBuffer(sampler.logprobs, 0, into, 2 * maxSeqs * 4, s.gpuRows.length * LOGPROB_WORDS * 4);
      },
    },
    {
      // f32 [slots, vocab] the logits of the rows sampled on the CPU (one per sequence at most: verify rows are sampled on the GPU)
      name: 'logits',
      bytes: (limits.slots ?? maxSeqs) * V * 4,
      wanted: (s) => s.cpuRows.length > 0,
      copy: (encoder, into, s) => encoder.copyBufferToBuffer(forward.logits, s.gpuRows.length * V * 4, into, 0, s.cpuRows.length * V * 4),
      mapped: (s) => s.cpuRows.length * V * 4,
    },
    {
      // f32 [maxSeqs, hidden] the sampling rows' final hidden states (return_hidden_states: the LM head's input rows)
      name: 'hidden',
      bytes: maxSeqs * H * 4,
      wanted: (s) => s.wantHidden,
      copy: (encoder, into, s) => encoder.copyBufferToBuffer(forward.hidden, 0, into, 0, s.sampling.length * H * 4),
      mapped: (s) => s.sampling.length * H * 4,
    },
    {
      // int32 [maxSeqs, layers, k] each layer's k expert ids of each sampling row's last token
      // (return_routed_experts; copies only when a row asks: a step of S rows makes S · layers of
      // them). A dense layer's k words keep the -1s written at creation (no expert routed).
      name: 'routed',
      bytes: Math.max(4, maxSeqs * routedWords * 4),
      fill: -1,
      wanted: (s) => s.wantRouted,
      copy(encoder, into, s) {
        const k = config.moe!.numExpertsUsed;
        let last = -1;
        s.sampling.forEach((r, row) => {
          last += r.tokens.length;
          forward.routedIds.forEach((ids, l) => ids && encoder.copyBufferToBuffer(ids, last * k * 4, into, (row * routedWords + l * k) * 4, k * 4));
        });
      },
      mapped: (s) => s.sampling.length * routedWords * 4,
    },
  ];
}

/** One step's readback buffers; a channel with a `fill` starts as int32 words of it. */
function readback(device: GPUDevice, channels: readonly Channel[], i: number): Readback {
  const make = (c: Channel) => {
    const label = `${c.name} readback ${i}`;
    if (c.fill === undefined) return createBuffer(device, c.bytes, READBACK, label);
    const buffer = device.createBuffer({ size: c.bytes, usage: READBACK, label, mappedAtCreation: true });
    new Int32Array(buffer.getMappedRange()).fill(c.fill);
    buffer.unmap();
    return buffer;
  };
  return Object.fromEntries(channels.map((c) => [c.name, make(c)])) as Readback;
}

/** Runs one sequence's part of a step's results; its failure (e.g. a grammar refusing the token) is its own. */
function guard(item: BatchItem, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    item.error = e;
  }
}

