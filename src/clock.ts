// The runtime's only source of time. Production uses the real one; tests inject a manual clock
// so nothing depends on wall-clock windows.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The longest delay Node's timers honour. */
export const MAX_TIMER_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    // Node fires a delay over 2^31-1 ms after 1 ms instead; cap it (~24.8 days) rather than
    // time a child out, or close a parked session, at once.
    const t = setTimeout(fn, Math.min(ms, MAX_TIMER_MS));
    // A pending child timeout must never keep a finished process alive.
    t.unref?.();
    return t;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * Resolves after `ms` on `clock`, or at once when any of `signals` aborts (resolving, not
 * rejecting: for a child, being stopped is an outcome, not an exception). Whichever way it ends,
 * it leaves no timer and no listener behind.
 */
export function sleep(clock: Clock, ms: number, ...signals: Array<AbortSignal | undefined>): Promise<void> {
  const live = signals.filter((s): s is AbortSignal => s !== undefined);
  return new Promise((resolve) => {
    if (live.some((s) => s.aborted)) return resolve();
    const finish = () => {
      clock.clearTimeout(handle);
      for (const s of live) s.removeEventListener('abort', finish);
      resolve();
    };
    const handle = clock.setTimeout(finish, Math.max(0, ms));
    for (const s of live) s.addEventListener('abort', finish, { once: true });
  });
}
