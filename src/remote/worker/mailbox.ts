// A child's steer mailbox as its worker reads it: the child's durable pull consumer, consumed in the
// background; a steer fetched from it is only a notice until the control plane grants its taken
// receipt (right before a delivery point), and is acked only when the runner delivers it.
import type { Consumer, ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { sleep, whenAnyStopped, type Clock } from '../../clock.ts';
import { SteerInbox } from '../../child/steering.ts';
import type { Steer } from '../../types.ts';
import { mailboxConsumer } from '../nats.ts';
import { consumerName, STEER_STREAM, steerSchema, tryParse } from '../wire.ts';

/** What the mailbox needs of its worker: the receipt request and the clock. */
export interface ReceiptPort {
  readonly clock: Clock;
  /** The steers granted for `steer_ids`, in acceptance order; undefined when there is no answer. */
  ask(steer_ids: readonly string[]): Promise<readonly Steer[] | undefined>;
}

/** After a receipt request that granted nothing (no answer, or not yet), the next try waits this long. */
const RETRY_MS = 200;

export class Mailbox {
  readonly #port: ReceiptPort;
  /** Granted steers: ready (queued), handed to the runner (taken), delivered; and the wait: the inbox's. */
  readonly #inbox = new SteerInbox();
  /** The control plane's steer (its seq is the child's acceptance order) of each granted steer. */
  readonly #granted = new Map<string, Steer>();
  /** Fetched and not yet granted, by steer_id: a notice that a steer waits, nothing more. */
  readonly #fetched = new Map<string, Steer>();
  /** The NATS message of each fetched steer until it is acked (the ack says "delivered"). */
  readonly #msgs = new Map<string, JsMsg>();
  /** Delivered (or known delivered): a message of one fetched again or later is acked at once. */
  readonly #done = new Set<string>();
  /** Woken when a steer is fetched. */
  #wake: Set<() => void> | undefined;
  #asking: Promise<void> | undefined;
  #messages: ConsumerMessages | undefined;
  #closed = false;

  constructor(port: ReceiptPort) {
    this.#port = port;
  }

  /** Starts consuming the child's mailbox; resolves once the consumer is bound. */
  async open(js: JetStreamClient, jsm: JetStreamManager, child: string): Promise<void> {
    // Made again if the server reaped it while the child waited for a worker (same config: a no-op otherwise).
    await jsm.consumers.add(STEER_STREAM, mailboxConsumer(child));
    const consumer: Consumer = await js.consumers.get(STEER_STREAM, consumerName(child));
    if (this.#closed) return;
    const messages = await consumer.consume({ max_messages: 64 });
    this.#messages = messages;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- close() may run during the await
    if (this.#closed) {
      void messages.close();
      return;
    }
    void (async () => {
      for await (const msg of messages) this.#fetch(msg);
    })().catch(() => undefined);
  }

  #fetch(msg: JsMsg): void {
    const steer = tryParse(steerSchema, msg.data);
    if (!steer) {
      msg.term();
      return;
    }
    const id = steer.steer_id;
    if (this.#done.has(id)) {
      msg.ack();
      return;
    }
    this.#msgs.set(id, msg);
    // A redelivery (after a reconnect), or one the control plane granted before it arrived here.
    if (this.#granted.has(id) || this.#fetched.has(id)) return;
    this.#fetched.set(id, steer);
    const wake = this.#wake;
    this.#wake = undefined;
    for (const w of wake ?? []) w();
  }

  /** Whether steers wait for a receipt (fetched, not granted). */
  get unreceipted(): boolean {
    return this.#fetched.size > 0;
  }

  /**
   * Asks the control plane for the receipt of every steer fetched by now (one request at a time)
   * and makes the granted ones ready for the next delivery point, in acceptance order. An answer
   * that leaves a fetched steer out says it is no longer undelivered (delivered already): it is
   * acked and forgotten. No answer: they wait for the next try.
   */
  async prepare(): Promise<void> {
    while (this.#asking) await this.#asking;
    if (this.#fetched.size === 0 || this.#closed) return;
    const asked = [...this.#fetched.keys()];
    const asking = (async () => {
      const granted = await this.#port.ask(asked);
      if (!granted || this.#closed) return;
      for (const s of granted) this.#admit(s);
      for (const id of asked) {
        if (!this.#fetched.delete(id)) continue;
        this.#done.add(id);
        this.#ackMessage(id);
      }
    })();
    this.#asking = asking;
    try {
      await asking;
    } finally {
      this.#asking = undefined;
    }
  }

  #admit(s: Steer): void {
    const id = s.steer_id;
    this.#fetched.delete(id);
    if (this.#granted.has(id) || this.#done.has(id)) return;
    this.#granted.set(id, s);
    this.#inbox.push(id, s.text);
  }

  /** Every granted steer not yet taken, in acceptance order; moved to taken (still unacked). */
  take(): Steer[] {
    return this.#inbox
      .take()
      .flatMap((s) => this.#granted.get(s.steer_id) ?? [])
      .sort((a, b) => a.seq - b.seq);
  }

  /** Acks taken steers (delivered); returns those newly acked. */
  ack(steers: readonly Steer[]): Steer[] {
    const acked = this.#inbox.confirm(steers);
    for (const s of acked) {
      this.#done.add(s.steer_id);
      this.#granted.delete(s.steer_id);
      this.#ackMessage(s.steer_id);
    }
    return acked;
  }

  #ackMessage(id: string): void {
    this.#msgs.get(id)?.ack();
    this.#msgs.delete(id);
  }

  /**
   * Resolves when a granted steer is ready (at once if one is), on close, or when a signal aborts.
   * A wait for a steer is a delivery point: what is fetched meanwhile gets its receipt here.
   */
  async arrived(signal: AbortSignal, cancel?: AbortSignal): Promise<void> {
    const stopped = () => signal.aborted || cancel?.aborted === true;
    for (;;) {
      if (this.#inbox.queuedCount > 0 || !this.#inbox.accepting || stopped()) return;
      if (this.#fetched.size > 0) {
        await this.prepare();
        if (this.#inbox.queuedCount > 0) return;
        // No answer (the control plane busy or restarting): again in a moment.
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
      // Sealed while waiting (the child finished): the inbox says so on the next turn.
      if (this.#closed) return;
    }
  }

  close(): void {
    this.#closed = true;
    void this.#messages?.close();
    this.#inbox.seal();
    const wake = this.#wake;
    this.#wake = undefined;
    for (const w of wake ?? []) w();
  }
}
