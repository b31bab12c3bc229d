// The control plane's workers: who heartbeats, with what capacity and slots in use, and who waits for
// a slot; a worker silent past the loss bound is lost (once), a waiter fails only in a NATS outage.
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Heartbeat } from '../wire.ts';
import { every } from '../wait.ts';
import type { WorkerGauge } from '../../telemetry/metrics.ts';

export interface WorkerState {
  readonly id: string;
  capacity: number;
  lastSeen: number;
  /** Slots the control plane counts as held on it (running children not waiting for their own). */
  slots: number;
  /** Refused an assignment as full: not chosen again before its next heartbeat. */
  full: boolean;
  /** It has heartbeated to this control plane (its capacity is its own word). */
  heard?: boolean;
}

export class NatsUnavailableError extends Error {
  override readonly name = 'NatsUnavailableError';
  constructor() {
    super('NATS unavailable');
  }
}

interface Waiter {
  resolve(worker: WorkerState): void;
  reject(err: Error): void;
  signal: AbortSignal;
  cancel(): void;
}

export interface WorkerTableOptions {
  readonly loss_ms: number;
  readonly outage_ms: number;
  readonly logger: Logger;
  readonly clock: Clock;
  /** When the outage began (undefined while connected). */
  readonly downSince: () => number | undefined;
  readonly onLost: (worker: string) => void;
}

export class WorkerTable {
  readonly #workers = new Map<string, WorkerState>();
  readonly #waiting: Waiter[] = [];
  readonly #options: WorkerTableOptions;
  readonly #stopChecks: () => void;

  constructor(options: WorkerTableOptions) {
    this.#options = options;
    // A quarter of the loss bound: a silent worker is noticed within 1.25x the bound.
    this.#stopChecks = every(options.clock, Math.max(50, Math.min(250, Math.floor(options.loss_ms / 4))), () => this.#check());
  }

  get size(): number {
    return this.#workers.size;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * The live workers, for /metrics (read at scrape time): the capacity each heartbeats, and the
   * children running on it as placement counts them (the slots it schedules by).
   */
  gauges(): WorkerGauge[] {
    const out: WorkerGauge[] = [];
    // One adopted after a restart that has not heartbeated yet has said no capacity: not listed.
    for (const w of this.#workers.values()) if (w.heard) out.push({ worker: w.id, capacity: w.capacity, children: w.slots });
    return out;
  }

  heartbeat(hb: Heartbeat): void {
    let w = this.#workers.get(hb.worker);
    if (!w) {
      w = { id: hb.worker, capacity: hb.capacity, lastSeen: this.#options.clock.now(), slots: 0, full: false };
      this.#workers.set(hb.worker, w);
      this.#options.logger.info({ worker: hb.worker, capacity: hb.capacity }, 'worker joined');
    }
    w.capacity = hb.capacity;
    w.heard = true;
    w.lastSeen = this.#options.clock.now();
    w.full = false;
    this.#pump();
  }

  /**
   * A worker that holds a child adopted after a restart, before its first heartbeat here: it
   * counts as seen now (silent past the loss bound, it is lost, and its children with it) and takes
   * no new child until it heartbeats its capacity.
   */
  expect(worker: string): void {
    let w = this.#workers.get(worker);
    if (!w) this.#workers.set(worker, (w = { id: worker, capacity: 1, lastSeen: this.#options.clock.now(), slots: 0, full: true }));
    w.slots++;
  }

  /** Every worker counts as seen now (the table starts listening: time before that is not silence). */
  listening(): void {
    const now = this.#options.clock.now();
    for (const w of this.#workers.values()) w.lastSeen = now;
  }

  /**
   * A worker with room, chosen by the lowest fraction of its capacity in use. Waits while none
   * has room; rejects with NatsUnavailableError once NATS has been unreachable for the outage
   * bound; resolves undefined if `signal` aborts first. The slot is counted at once.
   */
  acquire(signal: AbortSignal): Promise<WorkerState | undefined> {
    const now = this.#pick();
    if (now) {
      now.slots++;
      return Promise.resolve(now);
    }
    if (signal.aborted) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.#remove(waiter);
        resolve(undefined);
      };
      const waiter: Waiter = { resolve, reject, signal, cancel: () => signal.removeEventListener('abort', onAbort) };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** Gives a slot back (the child finished, or waits for its own children). */
  release(worker: string): void {
    const w = this.#workers.get(worker);
    if (w && w.slots > 0) w.slots--;
    this.#pump();
  }

  /** Takes a slot again (the child's own children are done and it runs on). */
  retake(worker: string): void {
    const w = this.#workers.get(worker);
    if (w) w.slots++;
  }

  /** The worker refused an assignment as full: skip it until it heartbeats again. */
  markFull(worker: string): void {
    const w = this.#workers.get(worker);
    if (w) w.full = true;
  }

  /** Forgets a worker whose heartbeats stopped: the only way a worker is declared lost. */
  lose(worker: string): void {
    if (!this.#workers.delete(worker)) return;
    this.#options.logger.warn({ worker }, 'worker lost');
    this.#options.onLost(worker);
  }

  close(): void {
    this.#stopChecks();
    for (const w of this.#waiting.splice(0)) {
      w.cancel();
      w.reject(new NatsUnavailableError());
    }
  }

  #pick(): WorkerState | undefined {
    let best: WorkerState | undefined;
    for (const w of this.#workers.values()) {
      if (w.full || w.slots >= w.capacity) continue;
      if (!best || w.slots / w.capacity < best.slots / best.capacity) best = w;
    }
    return best;
  }

  #pump(): void {
    while (this.#waiting.length > 0) {
      const w = this.#pick();
      const waiter = w && this.#waiting.shift();
      if (!w || !waiter) return;
      waiter.cancel();
      w.slots++;
      waiter.resolve(w);
    }
  }

  #remove(waiter: Waiter): void {
    const i = this.#waiting.indexOf(waiter);
    if (i >= 0) this.#waiting.splice(i, 1);
  }

  #check(): void {
    const now = this.#options.clock.now();
    const down = this.#options.downSince();
    for (const w of [...this.#workers.values()]) {
      if (now - w.lastSeen > this.#options.loss_ms) this.lose(w.id);
    }
    // Waiting is the norm while workers are busy or absent; only an outage past its bound fails.
    if (down !== undefined && now - down > this.#options.outage_ms) {
      for (const w of this.#waiting.splice(0)) {
        w.cancel();
        w.reject(new NatsUnavailableError());
      }
    }
  }
}
