// A child's steer inbox: FIFO, with the three states a steer can be in (queued, taken by the
// runner, delivered). seal() closes acceptance and hands back everything undelivered in ONE
// synchronous step, so no steer can slip in between "stop accepting" and "take leftovers".
import { whenAnyStopped, type Stopper } from '../clock.ts';
import type { Steer } from '../types.ts';

const NONE_TAKEN: ReadonlySet<string> = new Set();

export class SteerInbox {
  #queued: Steer[] = [];
  /** Taken by the runner, not yet confirmed delivered; keyed by steer_id, insertion = seq order. */
  #taken: Map<string, Steer> | undefined;
  /** What the seal handed back as taken, by id (none for most children). */
  #takenAtSeal: ReadonlySet<string> | undefined;
  #sealed = false;
  #seq = 0;
  /** Made on the first wait: most children never wait for a steer. */
  #waiters: Set<() => void> | undefined;
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
    return this.#queued.length + (this.#taken?.size ?? 0);
  }

  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  /**
   * Queues a steer; null (and nothing changes) once sealed. `veto` sees the steer before it is
   * queued or any waiter is woken; if it throws, nothing changes and the error propagates.
   */
  push(steer_id: string, text: string, veto?: (steer: Steer) => void, requeued_from?: string): Steer | null {
    if (this.#sealed) return null;
    const steer: Steer = requeued_from === undefined ? { steer_id, text, seq: this.#seq + 1 } : { steer_id, text, seq: this.#seq + 1, requeued_from };
    veto?.(steer);
    // The veto may have stopped this very child (a runner's onSteer that interrupts, say): once
    // sealed, a steer queued now would be neither delivered nor in missed_steer.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the veto may have sealed the queue
    if (this.#sealed) return null;
    this.#seq = steer.seq;
    this.#queued.push(steer);
    this.#pendingBytes += Buffer.byteLength(text, 'utf8');
    this.#wakeAll();
    return steer;
  }

  /**
   * Queues a steer again as it was before a restart (an adopted child's), with its own seq, so
   * that acceptance order holds against what a worker was granted before; later steers follow it.
   */
  restore(steer: Steer): void {
    if (this.#sealed) return;
    this.#seq = Math.max(this.#seq, steer.seq);
    this.#queued.push(steer);
    this.#pendingBytes += Buffer.byteLength(steer.text, 'utf8');
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
    const into = (this.#taken ??= new Map());
    for (const s of taken) into.set(s.steer_id, s);
    return taken;
  }

  /**
   * Takes every queued steer and marks it delivered in one step (take + confirm without passing
   * through the taken set): for runners that deliver as they take.
   */
  takeDelivered(): Steer[] {
    if (this.#sealed || this.#queued.length === 0) return [];
    const delivered = this.#queued;
    this.#queued = [];
    for (const s of delivered) this.#pendingBytes -= Buffer.byteLength(s.text, 'utf8');
    return delivered;
  }

  /** Marks taken steers delivered; returns those newly confirmed (none after seal). */
  confirm(steers: readonly Steer[]): Steer[] {
    const taken = this.#taken;
    if (this.#sealed || taken === undefined) return [];
    const confirmed: Steer[] = [];
    for (const s of steers) {
      if (taken.delete(s.steer_id)) {
        confirmed.push(s);
        this.#pendingBytes -= Buffer.byteLength(s.text, 'utf8');
      }
    }
    return confirmed;
  }

  /**
   * Ids of the steers taken and not confirmed (once sealed: those the seal handed back as taken):
   * what a runner that never reports back may have delivered.
   */
  takenIds(): ReadonlySet<string> {
    if (this.#sealed) return this.#takenAtSeal ?? NONE_TAKEN;
    return new Set(this.#taken?.keys());
  }

  /**
   * Closes acceptance and returns every undelivered steer (taken-but-unconfirmed and still
   * queued) in acceptance order. Synchronous by design: see the module header.
   */
  seal(): Steer[] {
    if (this.#sealed) return [];
    this.#sealed = true;
    const taken = this.#taken;
    const queued = this.#queued;
    this.#taken = undefined;
    this.#queued = [];
    this.#pendingBytes = 0;
    this.#wakeAll();
    if (taken === undefined || taken.size === 0) return queued;
    this.#takenAtSeal = new Set(taken.keys());
    return [...taken.values(), ...queued].sort((a, b) => a.seq - b.seq);
  }

  /**
   * Resolves when a steer is queued (at once if one is), the inbox is sealed, or any of
   * `stoppers` stops. A wait that ends leaves nothing behind (no waiter, no hook).
   */
  waitForSteer(...stoppers: Stopper[]): Promise<void> {
    if (this.#queued.length > 0 || this.#sealed) return Promise.resolve();
    return new Promise((resolve) => {
      let stopped = false;
      const wake = () => {
        cancel();
        resolve();
      };
      const cancel = whenAnyStopped(stoppers, () => {
        stopped = true;
        this.#waiters?.delete(wake);
        resolve();
      });
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- whenAnyStopped may call back at once and set it
      if (!stopped) (this.#waiters ??= new Set()).add(wake);
    });
  }

  #wakeAll(): void {
    const waiters = this.#waiters;
    if (waiters === undefined || waiters.size === 0) return;
    this.#waiters = undefined;
    for (const wake of waiters) wake();
  }
}
