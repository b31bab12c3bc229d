// A child's steers as its worker holds them: the control plane's notice that steers wait, the taken
// receipt it grants right before a delivery point (no steer reaches a model request without one),
// and what the runner took and delivered. The worker never reads JetStream for them: the receipt
// carries each steer's text, in acceptance order (docs/scale-out.md, "Exact accounting").
import { sleep, whenAnyStopped, type Clock } from '../../clock.ts';
import { SteerInbox } from '../../child/steering.ts';
import type { Steer } from '../../types.ts';

/** What the mailbox needs of its worker: the receipt request and the clock. */
export interface ReceiptPort {
  readonly clock: Clock;
  /** The steers granted (every one waiting, in acceptance order); undefined when there is no answer. */
  ask(): Promise<readonly Steer[] | undefined>;
}

/** After a receipt request with no answer (the control plane busy or restarting), the next try waits this long. */
const RETRY_MS = 200;

export class Mailbox {
  readonly #port: ReceiptPort;
  /** Granted steers: ready (queued), handed to the runner (taken), delivered; and the wait: the inbox's. */
  readonly #inbox = new SteerInbox();
  /** The control plane's steer (its seq is the child's acceptance order) of each granted one. */
  readonly #granted = new Map<string, Steer>();
  /** Delivered: granted again (a receipt whose answer was lost, asked again), it is not a new steer. */
  readonly #done = new Set<string>();
  /** The control plane said steers wait, and no receipt was asked since. */
  #noticed = false;
  /** Woken by a notice, and when a receipt request ends (steers ready, or to ask again). */
  #wake: Set<() => void> | undefined;
  #asking: Promise<void> | undefined;
  #closed = false;

  constructor(port: ReceiptPort) {
    this.#port = port;
  }

  /** The control plane's word that steers wait for this child. */
  notice(): void {
    if (this.#closed) return;
    this.#noticed = true;
    this.#wakeAll();
  }

  #wakeAll(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    for (const w of wake ?? []) w();
  }

  /** Whether steers wait for a receipt. */
  get noticed(): boolean {
    return this.#noticed;
  }

  /**
   * Asks the control plane for the receipt of the steers that wait (one request at a time) and
   * makes the granted ones ready for the next delivery point, in acceptance order. No answer:
   * they wait for the next try.
   */
  async prepare(): Promise<void> {
    while (this.#asking) await this.#asking;
    if (!this.#noticed || this.#closed) return;
    this.#noticed = false;
    const asking = (async () => {
      const granted = await this.#port.ask();
      if (this.#closed) return;
      if (!granted) {
        this.#noticed = true;
        return;
      }
      for (const s of granted) this.#admit(s);
    })().finally(() => {
      // A wait for a steer that began while this was in flight (a runner that did not await it)
      // hears of its outcome: steers ready, or a notice to ask again.
      this.#wakeAll();
    });
    this.#asking = asking;
    try {
      await asking;
    } finally {
      this.#asking = undefined;
    }
  }

  #admit(s: Steer): void {
    const id = s.steer_id;
    if (this.#granted.has(id) || this.#done.has(id)) return;
    this.#granted.set(id, s);
    this.#inbox.push(id, s.text);
  }

  /** Every granted steer not yet taken, in acceptance order; moved to taken. */
  take(): Steer[] {
    return this.#inbox
      .take()
      .flatMap((s) => this.#granted.get(s.steer_id) ?? [])
      .sort((a, b) => a.seq - b.seq);
  }

  /** Marks taken steers delivered; returns those newly delivered. */
  ack(steers: readonly Steer[]): Steer[] {
    const acked = this.#inbox.confirm(steers);
    for (const s of acked) {
      this.#done.add(s.steer_id);
      this.#granted.delete(s.steer_id);
    }
    return acked;
  }

  /**
   * Resolves when a granted steer is ready (at once if one is), on close, or when a signal aborts.
   * A wait for a steer is a delivery point: a notice that comes meanwhile gets its receipt here.
   */
  async arrived(signal: AbortSignal, cancel?: AbortSignal): Promise<void> {
    const stopped = () => signal.aborted || cancel?.aborted === true;
    for (;;) {
      if (this.#inbox.queuedCount > 0 || !this.#inbox.accepting || stopped()) return;
      if (this.#noticed) {
        await this.prepare();
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- prepare() sets it again when there was no answer
        if (this.#inbox.queuedCount > 0 || !this.#noticed) continue;
        // No answer: again in a moment.
        await sleep(this.#port.clock, RETRY_MS, signal, cancel);
        continue;
      }
      await new Promise<void>((resolve) => {
        const wake = () => {
          stop();
          resolve();
        };
        const stop = whenAnyStopped([signal, cancel], () => {
          this.#wake?.delete(wake);
          resolve();
        });
        (this.#wake ??= new Set()).add(wake);
      });
    }
  }

  close(): void {
    this.#closed = true;
    this.#inbox.seal();
    this.#wakeAll();
  }
}
