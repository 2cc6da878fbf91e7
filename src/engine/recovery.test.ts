/**
 * The recovery policy (./recovery.ts) on stand-in devices: no GPU, so each rule is checked alone.
 * A loss rebuilds on a new device; a loss during the rebuild starts it again; more losses than the
 * limit within the window, no recovery configured, no adapter, or a rebuild that fails end the
 * engine with the loss; losses outside the window do not count.
 */
import { describe, expect, it, vi } from 'vitest';
import type { GPUContext } from '../gpu/device';
import { WebGPUError } from '../gpu/errors';
import { DeviceRecovery, type RecoveryOptions } from './recovery';

/** A stand-in device whose loss the test triggers. */
function fakeGPU(name: string): GPUContext & { lose(): void; destroyed: boolean } {
  let lose!: (e: WebGPUError) => void;
  const lost = new Promise<WebGPUError>((ok) => (lose = ok));
  const gpu = {
    name,
    destroyed: false,
    lost,
    lose: () => lose(new WebGPUError('device_lost', `${name} was lost`, { reason: 'unknown' })),
    destroy() {
      gpu.destroyed = true;
    },
  };
  return gpu as unknown as GPUContext & { lose(): void; destroyed: boolean };
}

type Fake = ReturnType<typeof fakeGPU>;

function rig(options: Partial<RecoveryOptions> | undefined, rebuild: (gpu: Fake) => Promise<void> = async () => {}) {
  const made: Fake[] = [];
  const first = fakeGPU('gpu0');
  const lost = vi.fn();
  const rebuilt: Fake[] = [];
  const recovery = new DeviceRecovery(
    first,
    options && {
      acquire: async () => {
        const g = fakeGPU(`gpu${made.length + 1}`);
        made.push(g);
        return g;
      },
      ...options,
    },
    {
      lost,
      rebuild: async (gpu) => {
        await rebuild(gpu as Fake);
        rebuilt.push(gpu as Fake);
      },
      disposed: () => false,
    },
  );
  return { recovery, first, made, lost, rebuilt };
}

/** Lets the promise callbacks run. */
const settle = () => new Promise((ok) => setTimeout(ok, 0));

describe('DeviceRecovery', () => {
  it('rebuilds on a new device after a loss, telling the engine at once', async () => {
    const r = rig({});
    r.first.lose();
    await settle();
    expect(r.lost).toHaveBeenCalledTimes(1);
    await r.recovery.recover();
    expect(r.rebuilt.map((g) => (g as unknown as { name: string }).name)).toEqual(['gpu1']);
    expect(r.recovery.gpu).toBe(r.made[0]);
    expect(r.recovery.recoveries).toBe(1);
    expect(r.recovery.active).toBe(false);
    // The new device's loss is watched too.
    r.made[0]!.lose();
    await settle();
    await r.recovery.recover();
    expect(r.recovery.recoveries).toBe(2);
    expect(r.recovery.gpu).toBe(r.made[1]);
  });

  it('starts again when the new device is lost during the rebuild', async () => {
    let n = 0;
    const r = rig({}, async (gpu) => {
      if (n++ === 0) gpu.lose();
    });
    r.first.lose();
    await settle();
    await r.recovery.recover();
    expect(r.made).toHaveLength(2);
    expect(r.recovery.gpu).toBe(r.made[1]);
    expect(r.recovery.recoveries).toBe(1);
  });

  it('gives up past maxLosses within the window: every later call gets the loss', async () => {
    const r = rig({ maxLosses: 2, windowMs: 60_000 });
    r.first.lose();
    await settle();
    await r.recovery.recover();
    r.made[0]!.lose();
    await settle();
    await r.recovery.recover();
    r.made[1]!.lose();
    await settle();
    await expect(r.recovery.recover()).rejects.toMatchObject({ code: 'device_lost', message: /lost 3 times in 60 s/ });
    expect(r.recovery.failure?.code).toBe('device_lost');
    expect(r.made).toHaveLength(2);
    await expect(r.recovery.recover()).rejects.toBe(r.recovery.failure);
  });

  it('counts only the losses within the window', async () => {
    let now = 1_000_000;
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => now);
    try {
      const r = rig({ maxLosses: 1, windowMs: 1000 });
      r.first.lose();
      await settle();
      await r.recovery.recover();
      now += 1001;
      r.made[0]!.lose();
      await settle();
      await r.recovery.recover();
      expect(r.recovery.recoveries).toBe(2);
      now += 10;
      r.made[1]!.lose();
      await settle();
      await expect(r.recovery.recover()).rejects.toMatchObject({ code: 'device_lost' });
    } finally {
      spy.mockRestore();
    }
  });

  it('without recovery options, a loss ends the engine', async () => {
    const r = rig(undefined);
    r.first.lose();
    await settle();
    await expect(r.recovery.recover()).rejects.toMatchObject({ code: 'device_lost', message: 'gpu0 was lost' });
    expect(r.made).toHaveLength(0);
  });

  it('ends the engine with the loss when no adapter is left or the rebuild fails, freeing the new device', async () => {
    const none = rig({ acquire: () => Promise.reject(new WebGPUError('no_adapter', 'no adapter')) });
    none.first.lose();
    await settle();
    await expect(none.recovery.recover()).rejects.toMatchObject({ code: 'device_lost', message: 'gpu0 was lost' });
    const failing = rig({}, () => Promise.reject(new Error('f16 is gone')));
    failing.first.lose();
    await settle();
    await expect(failing.recovery.recover()).rejects.toMatchObject({ code: 'device_lost' });
    expect(failing.made[0]!.destroyed).toBe(true);
  });

  it('resolves at once while the device is not lost', async () => {
    const r = rig({});
    await r.recovery.recover();
    expect(r.made).toHaveLength(0);
    expect(r.lost).not.toHaveBeenCalled();
  });
});
