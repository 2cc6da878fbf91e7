/**
 * Follows the engine's recovery from a lost GPU device through `stats()`: the library rebuilds on
 * a new device by itself (CreateEngineOptions.deviceRecovery) and says so in `stats().recovering`;
 * the page only shows it. A new count in `stats().recoveries` means it came back; a few polls
 * with neither (the engine gave up: too many losses, or no adapter) mean it did not.
 */
import type { EngineHandle } from '../../src/index';

const POLL_MS = 250;
/** Polls with no recovery under way and none finished before the page says the engine gave up. */
const GIVE_UP_POLLS = 8;

export interface RecoveryView {
  recovering(): void;
  recovered(): void;
  failed(): void;
}

/** Watches one loss of `engine`'s device; `isCurrent` false (another model loaded) stops it quietly. */
export async function watchRecovery(engine: EngineHandle, seen: number, view: RecoveryView, isCurrent: () => boolean): Promise<number> {
  view.recovering();
  let idle = 0;
  while (isCurrent()) {
    const s = await engine.stats().catch(() => null);
    if (!s) break; // unloaded meanwhile
    if (s.recoveries > seen) {
      if (isCurrent()) view.recovered();
      return s.recoveries;
    }
    // The loss is reported before the engine notices it: not recovering yet is not giving up yet.
    idle = s.recovering ? 0 : idle + 1;
    if (idle >= GIVE_UP_POLLS) break;
    await new Promise((ok) => setTimeout(ok, POLL_MS));
  }
  if (isCurrent()) view.failed();
  return seen;
}
