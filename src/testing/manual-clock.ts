// A clock that moves only when a test says so: timeouts, sleeps and grace periods become
// deterministic, and no test waits on wall-clock time.
import type { Clock } from '../clock.ts';

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers = new Map<number, Timer>();

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const seq = ++this.#seq;
    this.#timers.set(seq, { at: this.#now + Math.max(0, ms), seq, fn });
    return seq;
  }

  clearTimeout(handle: unknown): void {
    if (typeof handle === 'number') this.#timers.delete(handle);
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Moves time forward by `ms`, firing due timers in order and letting promises settle between. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      const next = [...this.#timers.values()].filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.#timers.delete(next.seq);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
      await flush();
    }
    this.#now = target;
    await flush();
  }
}

/** Lets every queued promise callback run (several macrotask turns). */
export async function flush(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
