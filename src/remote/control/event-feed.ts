// The workers' events as the control plane reads them: every `sr.ev.<child>` message lands in a
// JetStream stream (a worker's plain publish is stored by the server), read through one durable
// consumer and acked only once what it caused is written. So a control plane that stops, for any
// reason, misses nothing its workers sent meanwhile: the next one reads on from the last ack.
import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../../log.ts';
import { describe, type NatsLink } from '../nats.ts';
import { subjects } from '../wire.ts';
import { Latch } from '../wait.ts';

export const EVENT_STREAM = 'SUBRUN_EVENTS';
/** The control plane's durable consumer of the event stream (one plane per NATS: its lease says so). */
const CONSUMER = 'control_plane';
/** Events are dropped after a day (a control plane gone that long has settled its children)... */
const EVENTS_MAX_AGE_NS = 24 * 3_600_000_000_000;
/** ...or, oldest first, past 1 GiB. */
const EVENTS_MAX_BYTES = 1024 * 1024 * 1024;

export interface EventFeedOptions {
  readonly link: NatsLink;
  readonly logger: Logger;
  /** One worker event, in the stream's order. */
  readonly onEvent: (subject: string, data: Uint8Array) => void;
  /** Commits what the events so far caused (the store's group commit); called before their ack. */
  readonly flush?: () => void;
  /** Resolves once what was committed is durable (a JetStream store's log); undefined: it is. */
  readonly settled?: () => Promise<void> | undefined;
  /**
   * Where the last event handled is kept, in the same commit as what it caused: a restart reads on
   * after it, so an event is applied once even when the process died before its ack went out.
   */
  readonly cursor?: { get(): number | undefined; set(seq: number): void };
}

export class EventFeed {
  readonly #o: EventFeedOptions;
  readonly #messages: ConsumerMessages;
  /** Read, not yet acked: acked together once the turn's writes are committed. */
  #unacked: JsMsg[] = [];
  #ackDue = false;
  /** The stream sequence of the last event handled. */
  #through = 0;
  #waiters: Array<{ seq: number; latch: Latch }> = [];

  private constructor(o: EventFeedOptions, messages: ConsumerMessages, through: number) {
    this.#o = o;
    this.#messages = messages;
    this.#through = through;
    void (async () => {
      for await (const m of messages) this.#handle(m);
    })().catch((err: unknown) => o.logger.warn({ err: describe(err) }, 'the worker event feed stopped'));
  }

  /** Makes the stream and the consumer (alike on every start) and starts reading. */
  static async open(o: EventFeedOptions): Promise<EventFeed> {
    const { jsm, js } = o.link;
    const config = {
      name: EVENT_STREAM,
      subjects: [subjects.allEvents],
      // Kept by limits, not removed by acks: one cumulative ack a turn (AckAll) is what a
      // work-queue stream does not allow, and the consumer below starts where the last one's acks end.
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      max_age: EVENTS_MAX_AGE_NS,
      max_bytes: EVENTS_MAX_BYTES,
      discard: DiscardPolicy.Old,
    };
    await jsm.streams.info(EVENT_STREAM).catch(() => jsm.streams.add(config));
    // Made anew at every start, from just past the last process's acks: what it was handed and
    // never acked (it stopped) comes again now, in order, ahead of what came since (a consumer
    // kept would hold those back until their ack wait ran out, and hand newer events over first).
    const last = await jsm.consumers.info(EVENT_STREAM, CONSUMER).catch(() => undefined);
    if (last) await jsm.consumers.delete(EVENT_STREAM, CONSUMER);
    const applied = Math.max(last?.ack_floor.stream_seq ?? 0, o.cursor?.get() ?? 0);
    const from = last || applied > 0 ? applied + 1 : undefined;
    await jsm.consumers.add(EVENT_STREAM, {
      durable_name: CONSUMER,
      ack_policy: AckPolicy.All,
      ...(from === undefined ? { deliver_policy: DeliverPolicy.New } : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from }),
      // Acked within a turn of being read; a long wait only guards a stalled process.
      ack_wait: 300_000_000_000,
      max_ack_pending: 20_000,
    });
    const consumer = await js.consumers.get(EVENT_STREAM, CONSUMER);
    // Everything before where it starts counts as handled (caughtUp must not wait for it).
    const start = (await jsm.consumers.info(EVENT_STREAM, CONSUMER)).delivered.stream_seq;
    return new EventFeed(o, await consumer.consume({ max_messages: 1024 }), start);
  }

  #handle(m: JsMsg): void {
    try {
      this.#o.onEvent(m.subject, m.data);
    } catch (err) {
      this.#o.logger.error({ err, subject: m.subject }, 'a worker event handler failed; the event was dropped');
    }
    this.#through = m.seq;
    this.#o.cursor?.set(m.seq);
    this.#unacked.push(m);
    if (!this.#ackDue) {
      this.#ackDue = true;
      setImmediate(() => this.#ack());
    }
    if (this.#waiters.length > 0) {
      const due = this.#waiters.filter((w) => w.seq <= m.seq);
      this.#waiters = this.#waiters.filter((w) => w.seq > m.seq);
      for (const w of due) w.latch.open();
    }
  }

  /** After the turn's group commit: what the events caused is written, so they may go. */
  #ack(): void {
    this.#ackDue = false;
    try {
      this.#o.flush?.();
    } catch (err) {
      // Not written: not acked either; the store retries, and these are acked after a later commit.
      this.#o.logger.warn({ err: describe(err) }, 'worker events not yet written; their ack waits');
      this.#ackDue = true;
      setTimeout(() => this.#ack(), 1000).unref();
      return;
    }
    // Cumulative: the last one read acks every one before it.
    const last = this.#unacked[this.#unacked.length - 1];
    this.#unacked = [];
    this.#ackWhenStored(last);
  }

  /**
   * Acks once what the events caused is stored: a restart meanwhile reads them again (the cursor,
   * stored with what they caused, skips the ones already applied). A store that cannot write is
   * asked again every second, so no event waits for its ack wait to run out (and comes twice).
   */
  #ackWhenStored(last: JsMsg | undefined): void {
    const stored = this.#o.settled?.();
    if (stored === undefined) last?.ack();
    else
      stored.then(
        () => last?.ack(),
        () => setTimeout(() => this.#ackWhenStored(last), 1000).unref(),
      );
  }

  /**
   * Resolves once every event the stream holds for this consumer by now has been handled (a
   * child's finish, sent before a question about it, is read before the question is answered).
   */
  async caughtUp(): Promise<void> {
    const { jsm } = this.#o.link;
    for (;;) {
      const info = await jsm.consumers.info(EVENT_STREAM, CONSUMER);
      if (info.num_pending === 0 && this.#through >= info.delivered.stream_seq) return;
      // Delivered to this process but not read yet, or not delivered yet: a moment.
      const seq = Math.max(info.delivered.stream_seq, this.#through + 1);
      const latch = new Latch();
      this.#waiters.push({ seq, latch });
      await latch.promise;
    }
  }

  close(): void {
    void this.#messages.close();
  }
}
