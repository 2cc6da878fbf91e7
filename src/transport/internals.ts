/**
 * What transports know about an EngineHandle beyond its public face, kept off the public type:
 * whether it still answers, the in-process host (Node's server builds its own app over it), and
 * a way for tests to lose the device.
 */
import type { EngineHost } from './host';
import type { EngineHandle } from './types';

export interface EngineInternals {
  isOpen(): boolean;
  /** Present when the engine runs in this thread. */
  host?: EngineHost;
  /** Destroys the GPU device as a driver reset would. */
  loseDevice(): Promise<void>;
}

const internals = new WeakMap<EngineHandle, EngineInternals>();

export function setInternals(engine: EngineHandle, i: EngineInternals): void {
  internals.set(engine, i);
}

export function internalsOf(engine: EngineHandle): EngineInternals | undefined {
  return internals.get(engine);
}

/** Tests: make the engine's GPU device lost (as a driver reset would). */
export function simulateDeviceLoss(engine: EngineHandle): Promise<void> {
  const i = internals.get(engine);
  if (!i) throw new TypeError('simulateDeviceLoss: not an engine from createEngine()');
  return i.loseDevice();
}
