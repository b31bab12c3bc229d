// A child's steer mailbox as its worker reads it: the child's durable pull consumer, consumed in the
// background into the child's SteerInbox, so that a steer is acked only when the runner delivers it.
import type { Consumer, ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { SteerInbox } from '../../child/steering.ts';
import type { Steer } from '../../types.ts';
import { mailboxConsumer } from '../nats.ts';
import { consumerName, STEER_STREAM, steerSchema, tryParse } from '../wire.ts';

export class Mailbox {
  /** Fetched (queued), handed to the runner (taken), delivered, and the wait for a steer: the inbox's. */
  readonly #inbox = new SteerInbox();
  /**
   * What the inbox does not keep, by steer_id, until the steer is delivered: its NATS message (the
   * ack is the delivery) and the control plane's steer (whose seq is the child's acceptance order).
   */
  readonly #fetched = new Map<string, { readonly steer: Steer; readonly msg: JsMsg }>();
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
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- close() may run during the await
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
        if (this.#fetched.has(steer.steer_id)) continue;
        this.#fetched.set(steer.steer_id, { steer, msg });
        if (this.#inbox.push(steer.steer_id, steer.text) === null) this.#fetched.delete(steer.steer_id);
      }
    })().catch(() => undefined);
  }

  /** Everything fetched so far, in acceptance order; moved to taken (still unacked). */
  take(): Steer[] {
    return this.#inbox
      .take()
      .flatMap((s) => this.#fetched.get(s.steer_id)?.steer ?? [])
      .sort((a, b) => a.seq - b.seq);
  }

  /** Acks taken steers (delivered); returns those newly acked. */
  ack(steers: readonly Steer[]): Steer[] {
    const acked = this.#inbox.confirm(steers);
    for (const s of acked) {
      this.#fetched.get(s.steer_id)?.msg.ack();
      this.#fetched.delete(s.steer_id);
    }
    return acked;
  }

  /** Resolves when a steer is fetched (at once if one waits), on close, or when a signal aborts. */
  arrived(signal: AbortSignal, cancel?: AbortSignal): Promise<void> {
    return this.#inbox.waitForSteer(signal, cancel);
  }

  close(): void {
    this.#closed = true;
    void this.#messages?.close();
    this.#inbox.seal();
  }
}
