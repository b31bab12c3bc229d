// The runtime's only source of time. Production uses the real one; tests inject a manual clock
// so nothing depends on wall-clock windows.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Milliseconds on a clock no wall-clock step moves (NTP, a VM resumed), for durations measured
   * against the timers; a clock without it (a test's manual clock) uses now(), which its timers share.
   */
  monotonic?(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /**
   * Keeps the process alive until the returned function is called. The runtime holds it while any
   * child is live, so a process awaiting `results` does not exit under it; a clock without it
   * (a test's manual clock) keeps nothing alive.
   */
  keepAlive?(): () => void;
}

/** What systemClock.setTimeout handed out (a Node Timeout, or a number where timers are numbers). */
function isTimer(handle: unknown): handle is ReturnType<typeof setTimeout> | number {
  return typeof handle === 'number' || (typeof handle === 'object' && handle !== null && 'hasRef' in handle);
}

/** The longest delay Node's timers honour. */
export const MAX_TIMER_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => {
    // Node fires a delay over 2^31-1 ms after 1 ms instead; cap it (~24.8 days) rather than
    // time a child out, or close a parked session, at once.
    const t = setTimeout(fn, Math.min(ms, MAX_TIMER_MS));
    // A timer alone never keeps the process alive (a parked session's expiry, a timeout of a child
    // whose owner has gone): what does is keepAlive(), held while children are live.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a test's fake timers may hand back a timer without unref
    t.unref?.();
    return t;
  },
  clearTimeout: (handle) => {
    if (isTimer(handle)) clearTimeout(handle);
  },
  keepAlive: () => {
    const t = setInterval(noop, MAX_TIMER_MS);
    return () => clearInterval(t);
  },
};

/**
 * Something that can be stopped, with a plain callback hook. The runtime's own waits use it for
 * a child's stop rather than an 'abort' listener, which costs a child far more (bench/cases/delegation.ts).
 */
export interface StopSource {
  /** Calls `hook` once on stop (at once if already stopped); returns a function that cancels it. */
  onStop(hook: () => void): () => void;
}

export type Stopper = AbortSignal | StopSource | undefined;

function isStopSource(s: AbortSignal | StopSource): s is StopSource {
  return 'onStop' in s && typeof s.onStop === 'function';
}

/** Calls `fn` once when `stopper` stops (at once if it has); returns a function that cancels it. */
export function whenStopped(stopper: AbortSignal | StopSource, fn: () => void): () => void {
  // By shape, not `instanceof AbortSignal`: a runner may pass a signal from another realm or a
  // polyfill, which has `aborted` and `addEventListener` but is no AbortSignal of ours.
  if (isStopSource(stopper)) return stopper.onStop(fn);
  const signal = stopper;
  if (signal.aborted) {
    fn();
    return noop;
  }
  signal.addEventListener('abort', fn, { once: true });
  return () => signal.removeEventListener('abort', fn);
}

/**
 * Calls `fn` once, at the first stop of any of `stoppers` (during this call if one has already
 * stopped), then removes every hook. Returns a function that removes them without calling `fn`.
 */
export function whenAnyStopped(stoppers: readonly Stopper[], fn: () => void): () => void {
  const offs: Array<() => void> = [];
  let over = false;
  const cancel = () => {
    over = true;
    for (const off of offs) off();
  };
  const fire = () => {
    if (over) return;
    cancel();
    fn();
  };
  for (const s of stoppers) {
    if (s === undefined) continue;
    // One already stopped fires now (its own hook was never left behind); stop registering.
    offs.push(whenStopped(s, fire));
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- whenStopped may fire at once and set it
    if (over) break;
  }
  return cancel;
}

/**
 * Resolves after `ms` on `clock`, or at once when any of `stoppers` stops (resolving, not
 * rejecting: for a child, being stopped is an outcome, not an exception). Whichever way it ends,
 * it leaves no timer and no hook behind.
 */
export function sleep(clock: Clock, ms: number, ...stoppers: Stopper[]): Promise<void> {
  return new Promise((resolve) => {
    const handle = clock.setTimeout(
      () => {
        cancel();
        resolve();
      },
      Math.max(0, ms),
    );
    const cancel = whenAnyStopped(stoppers, () => {
      clock.clearTimeout(handle);
      resolve();
    });
  });
}

function noop(): void {}
