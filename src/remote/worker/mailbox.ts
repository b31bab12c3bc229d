// A child's steer mailbox as its worker reads it: the child's durable pull consumer, consumed in
// the background into a local buffer (fetched, not acked) so the runner's delivery points, which
// are synchronous, find what has arrived. A steer is acked only when it is delivered; anything
// fetched and never delivered stays unacked and the control plane lists it as missed.
import type { Consumer, ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { Steer } from '../../types.ts';
import { consumerName, STEER_STREAM, steerSchema, tryParse } from '../wire.ts';
import { mailboxConsumer } from '../nats.ts';

export class Mailbox {
  readonly #queued: Array<{ steer: Steer; msg: JsMsg }> = [];
  readonly #taken = new Map<string, JsMsg>();
  #waiters = new Set<() => void>();
  #messages: ConsumerMessages | undefined;
  #closed = false;

  /** Starts consuming the child's mailbox; resolves once the consumer is bound. */
  async open(js: JetStreamClient, jsm: JetStreamManager, child: string): Promise<void> {
    // Made again if the server reaped it while the child waited for a worker (same config: a no-op otherwise).
    await jsm.consumers.add(STEER_STREAM, mailboxConsumer(child));
    const consumer: Consumer = await js.consumers.get(STEER_STREAM, consumerName(child));
    if (this.#closed) return;
    const messages = await consumer.consume({ max_messages: 64 });
    this.#messages = messages;
    if (this.#closed) {
      void messages.close();
      return;
    }
    void (async () => {
      for await (const msg of messages) {
        const steer = tryParse(steerSchema, msg.data);
        if (!steer) {
          msg.term();
          continue;
        }
        // A redelivery of one already here (fetched again after a reconnect) is not a second steer.
        if (this.#taken.has(steer.steer_id) || this.#queued.some((q) => q.steer.steer_id === steer.steer_id)) continue;
        this.#queued.push({ steer, msg });
        const waiters = this.#waiters;
        this.#waiters = new Set();
        for (const w of waiters) w();
      }
    })().catch(() => undefined);
  }

  /** Everything fetched so far, in acceptance order; moved to taken (still unacked). */
  take(): Steer[] {
    const out = this.#queued.splice(0).sort((a, b) => a.steer.seq - b.steer.seq);
    for (const { steer, msg } of out) this.#taken.set(steer.steer_id, msg);
    return out.map((q) => q.steer);
  }

  /** Acks taken steers (delivered); returns those newly acked. */
  ack(steers: readonly Steer[]): Steer[] {
    const out: Steer[] = [];
    for (const s of steers) {
      const msg = this.#taken.get(s.steer_id);
      if (!msg) continue;
      this.#taken.delete(s.steer_id);
      msg.ack();
      out.push(s);
    }
    return out;
  }

  arrived(signal: AbortSignal, cancel?: AbortSignal): Promise<void> {
    if (this.#queued.length > 0 || signal.aborted || cancel?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.#waiters.delete(done);
        signal.removeEventListener('abort', done);
        cancel?.removeEventListener('abort', done);
        resolve();
      };
      this.#waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
      cancel?.addEventListener('abort', done, { once: true });
    });
  }

  close(): void {
    this.#closed = true;
    void this.#messages?.close();
    for (const w of [...this.#waiters]) w();
  }
}
