// A child's steer inbox: FIFO, with the three states a steer can be in (queued, taken by the
// runner, delivered). seal() closes acceptance and hands back everything undelivered in ONE
// synchronous step, so no steer can slip in between "stop accepting" and "take leftovers".
import type { Steer } from './types.ts';

export class SteerInbox {
  #queued: Steer[] = [];
  /** Taken by the runner, not yet confirmed delivered; keyed by steer_id, insertion = seq order. */
  #taken = new Map<string, Steer>();
  #sealed = false;
  #seq = 0;
  #waiters = new Set<() => void>();
  /** UTF-8 bytes of every undelivered steer (queued or taken), for the per-child bound. */
  #pendingBytes = 0;

  get accepting(): boolean {
    return !this.#sealed;
  }

  get queuedCount(): number {
    return this.#queued.length;
  }

  /** Steers accepted and not yet delivered (queued or taken). */
  get pendingCount(): number {
    return this.#queued.length + this.#taken.size;
  }

  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  /**
   * Queues a steer; null (and nothing changes) once sealed. `veto` sees the steer before it is
   * queued or any waiter is woken; if it throws, nothing changes and the error propagates.
   */
  push(steer_id: string, text: string, veto?: (steer: Steer) => void): Steer | null {
    if (this.#sealed) return null;
    const steer: Steer = { steer_id, text, seq: this.#seq + 1 };
    veto?.(steer);
    this.#seq = steer.seq;
    this.#queued.push(steer);
    this.#pendingBytes += Buffer.byteLength(text, 'utf8');
    this.#wakeAll();
    return steer;
  }

  /** Removes a just-queued steer again (its acceptance was vetoed); true if it was still queued. */
  withdraw(steer_id: string): boolean {
    const i = this.#queued.findIndex((s) => s.steer_id === steer_id);
    if (i < 0) return false;
    const [gone] = this.#queued.splice(i, 1);
    if (gone) this.#pendingBytes -= Buffer.byteLength(gone.text, 'utf8');
    return true;
  }

  /** Moves every queued steer to "taken" and returns them in acceptance order. */
  take(): Steer[] {
    if (this.#sealed || this.#queued.length === 0) return [];
    const taken = this.#queued;
    this.#queued = [];
    for (const s of taken) this.#taken.set(s.steer_id, s);
    return taken;
  }

  /** Marks taken steers delivered; returns those newly confirmed (none after seal). */
  confirm(steers: readonly Steer[]): Steer[] {
    if (this.#sealed) return [];
    const confirmed: Steer[] = [];
    for (const s of steers) {
      if (this.#taken.delete(s.steer_id)) {
        confirmed.push(s);
        this.#pendingBytes -= Buffer.byteLength(s.text, 'utf8');
      }
    }
    return confirmed;
  }

  /**
   * Closes acceptance and returns every undelivered steer (taken-but-unconfirmed and still
   * queued) in acceptance order. Synchronous by design: see the module header.
   */
  seal(): Steer[] {
    if (this.#sealed) return [];
    this.#sealed = true;
    const leftovers = [...this.#taken.values(), ...this.#queued];
    this.#taken.clear();
    this.#queued = [];
    this.#pendingBytes = 0;
    this.#wakeAll();
    return leftovers.sort((a, b) => a.seq - b.seq);
  }

  /**
   * Resolves when a steer is queued (at once if one is), the inbox is sealed, or any of `signals`
   * aborts. An aborted wait leaves nothing behind (no waiter, no listener).
   */
  waitForSteer(...signals: Array<AbortSignal | undefined>): Promise<void> {
    const live = signals.filter((s): s is AbortSignal => s !== undefined);
    if (this.#queued.length > 0 || this.#sealed || live.some((s) => s.aborted)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.#waiters.delete(done);
        for (const s of live) s.removeEventListener('abort', done);
        resolve();
      };
      this.#waiters.add(done);
      for (const s of live) s.addEventListener('abort', done, { once: true });
    });
  }

  #wakeAll(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wake of waiters) wake();
  }
}
