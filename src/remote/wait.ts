// How remote/ waits, on both sides: a Latch is a promise opened once when its moment comes, and
// `within` and `every` put every bound and period on the injected Clock.
import type { Clock } from '../clock.ts';

/** A promise whose resolution is held outside it; the first `open` wins. */
export class Latch<T = void> {
  readonly promise: Promise<T>;
  #resolve: ((value: T) => void) | undefined;

  constructor() {
    this.promise = new Promise<T>((resolve) => {
      this.#resolve = resolve;
    });
  }

  get opened(): boolean {
    return this.#resolve === undefined;
  }

  open(value: T): void {
    const resolve = this.#resolve;
    this.#resolve = undefined;
    resolve?.(value);
  }
}

/** `p`'s value, or undefined if `ms` pass on `clock` first; the timer goes either way. */
export function within<T>(clock: Clock, ms: number, p: Promise<T>): Promise<T | undefined> {
  return new Promise<T | undefined>((resolve, reject) => {
    const timer = clock.setTimeout(() => resolve(undefined), ms);
    p.then(
      (value) => {
        clock.clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clock.clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** Calls `fn` every `ms` on `clock` until the returned function is called. */
export function every(clock: Clock, ms: number, fn: () => void): () => void {
  let stopped = false;
  let timer: unknown;
  const tick = () => {
    if (stopped) return;
    // Armed before `fn` runs, as an interval is: a throw in `fn` does not end the period.
    timer = clock.setTimeout(tick, ms);
    fn();
  };
  timer = clock.setTimeout(tick, ms);
  return () => {
    stopped = true;
    clock.clearTimeout(timer);
  };
}
