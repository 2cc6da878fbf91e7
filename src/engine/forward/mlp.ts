/**
 * The dense MLP block of one layer: the "ffn input" paragraph and the gate/up/down branch of a
 * layer in `ReferenceModel.forward` (src/reference/forward.ts).
 *   xb        = rmsnorm(x)                     (pre-norm; folded into the matvec steps' gate/up)
 *   gate, up  = W_gate · xb, W_up · xb         (one matrix of interleaved rows where they share a type)
 *   hb        = act(gate) · up                 (SwiGLU or GeGLU; in the joined matvec's epilogue
 *                                               where no LoRA update sits between)
 *   x        += W_down · hb                    (or into xb2, then its post-norm or Granite's scale)
 * It runs on a dense model's layers and on a mixture-of-experts model's dense ones.
 */
import type { OpLabel } from '../../kernels/op';
import { createSwigluOp } from '../../kernels/swiglu';
import type { GpuMatrix } from '../gpu-weights';
import { destroyAll, encodeAll, type Block, type BlockBuilder } from './block';

/** The MLP's buffers, made once and shared by every MLP layer. */
interface MlpScratch {
  gateUp: GPUBuffer; // gate and up below, one buffer: a joined gate/up projection writes both
  gate: GPUBufferBinding; // [maxTokens, intermediate] in gateUp
  up: GPUBufferBinding; // [maxTokens, intermediate] in gateUp (at its own region, like q, k and v)
  upAt: number; // where up starts in gateUp, in elements
  hb: GPUBuffer; // f32 [maxTokens, intermediate] act(gate)·up (f32 at every precision)
}

function mlpScratch(b: BlockBuilder): MlpScratch {
  const T = b.limits.maxTokens;
  const I = b.config.intermediateSize;
  const gateBytes = b.region(T * I);
  const gateUp = b.buffers.make((2 * gateBytes) / b.act, 'gate/up');
  return {
    gateUp,
    gate: { buffer: gateUp, offset: 0, size: gateBytes },
    up: { buffer: gateUp, offset: gateBytes, size: gateBytes },
    upAt: gateBytes / b.act,
    hb: b.buffers.make(T * I, 'hb', 'f32'),
  };
}

export async function createMlpBlock(b: BlockBuilder, l: number): Promise<Block> {
  const s = b.once('mlp', () => mlpScratch(b));
  const { config: c, state } = b;
  const I = c.intermediateSize;
  const w = b.weights.layers[l]!;
  const at = (role: string): OpLabel => ({ role, layer: l });
  const segments = [
    { rows: I, offset: 0 },
    { rows: I, offset: s.upAt },
  ];

  // ffn input: the rmsnormed stream (pre-norm), or the stream itself (post-norm); folded as attention's
  const input = w.ffnNorm ? state.xb : state.x;
  const ffnNorm = w.ffnNorm && (await b.norm({ label: at('ffn_norm'), x: state.x, weight: w.ffnNorm, y: state.xb }));
  const project = { x: input, foldNorm: w.ffnNorm };

  // gate and up matmuls: joined (rows interleaved, stored apart) or two matrices
  const gateUp = w.gateUp && (await b.linear({ ...project, label: at('gate_up'), weight: w.gateUp, y: s.gateUp, segments, pairs: true }));
  const gate = !w.gateUp ? await b.linear({ ...project, label: at('gate'), weight: w.wGate!, y: s.gateUp, segments: [segments[0]!] }) : undefined;
  const up = !w.gateUp ? await b.linear({ ...project, label: at('up'), weight: w.wUp!, y: s.gateUp, segments: [segments[1]!] }) : undefined;
  // act(gate) * up: SwiGLU (silu) or GeGLU (Gemma)
  const swiglu = await createSwigluOp(b.ctx, { gate: s.gateUp, up: s.gateUp, upOffset: s.upAt, out: s.hb, outF32: true, n: I, activation: c.ffnActivation, label: at('swiglu') });
  // The same straight from the joined matrix, in the matvec's epilogue (each (gate, up) row pair must be in one part of a split matrix).
  const glu = w.gateUp && gluFits(w.gateUp) ? await b.linear({ ...project, label: at('gate_up'), weight: w.gateUp, y: s.hb, glu: c.ffnActivation }) : undefined;

  // down matmul into the stream, or into xb2 for its post-norm (OLMo 2, Gemma) or Granite's scale
  const out = b.branchOut(w.postFfnNorm);
  const down = await b.linear({ label: at('down'), weight: w.wDown!, x: s.hb, y: out.y, addInto: out.addInto });
  const end = await b.branchEnd(l, 'ffn', w.postFfnNorm);

  const gateUpIo = { rows: I, cols: c.hiddenSize };
  return {
    lora: { gate: b.loraIo(gateUpIo, input, s.gate), up: b.loraIo(gateUpIo, input, s.up), down: b.loraIo(w.wDown!, s.hb, out.y) },
    encode(pass, plan) {
      const { tokens, lora } = plan;
      if (!plan.foldNorms) ffnNorm?.encode(pass, tokens);
      // An adapter that updates this layer's gate or up must run between them and the activation.
      const adaptsGlu = lora !== null && (lora.adapts(l, 'gate') || lora.adapts(l, 'up'));
      if (glu && plan.matvec && !adaptsGlu) glu.encode(pass, tokens);
      else {
        encodeAll(pass, tokens, [gateUp, gate]);
        lora?.after(pass, tokens, l, 'gate');
        up?.encode(pass, tokens);
        lora?.after(pass, tokens, l, 'up');
        swiglu.encode(pass, tokens);
      }
      down.encode(pass, tokens);
      lora?.after(pass, tokens, l, 'down');
      end?.encode(pass, tokens);
    },
    destroy: () => destroyAll([ffnNorm, gateUp, gate, up, swiglu, glu, down, end]),
  };
}

/** The GLU epilogue needs each (gate, up) row pair in one part of a split matrix. */
function gluFits(m: GpuMatrix): boolean {
  return m.parts.every((p) => p.row0 % 2 === 0);
}
