// A remote child's steer mailbox as the control plane writes it: each publish and its outcome, the
// read that accounts for every steer when the child is lost, and the mailbox's removal at the end.
import { sleep } from '../../clock.ts';
import type { Steer, SteerCommit } from '../../types.ts';
import { describe, isNoResponders, isNotFound, mailboxConsumer } from '../nats.ts';
import { consumerName, encode, STEER_STREAM, steerSchema, subjects, tryParse } from '../wire.ts';
import { within } from '../wait.ts';
import type { PlacementPort } from './port.ts';

/** Tries at removing a finished child's mailbox, each after NATS is up again (within the wait). */
const DISPOSE_TRIES = 10;
const DISPOSE_WAIT_MS = 24 * 3_600_000;
/** How long the loss accounting may spend reading the mailbox before it assumes the worst. */
const ACCOUNTING_MS = 1500;

/** What the loss accounting found: steers the worker acked, and steers it may have delivered. */
export interface MailboxAccount {
  readonly delivered: ReadonlySet<string>;
  readonly maybe: ReadonlySet<string>;
}

export class ChildMailbox {
  readonly #p: Pick<PlacementPort, 'link' | 'logger' | 'clock' | 'publish_ms'>;
  readonly #child: string;
  /** Publishes not yet settled, by steer_id. */
  readonly #inflight = new Map<string, Promise<SteerCommit>>();
  /** Steers whose publish was acknowledged: in the mailbox (or already taken from it). */
  readonly #published = new Set<string>();
  /** Steers whose publish was not acknowledged in time: perhaps in the mailbox, perhaps not. */
  readonly #uncertain = new Set<string>();

  constructor(placement: Pick<PlacementPort, 'link' | 'logger' | 'clock' | 'publish_ms'>, child: string) {
    this.#p = placement;
    this.#child = child;
  }

  /** Makes the child's durable consumer (the worker makes it alike, if the server reaped it). */
  async make(): Promise<void> {
    await this.#p.link.jsm.consumers.add(STEER_STREAM, mailboxConsumer(this.#child));
  }

  /**
   * Publishes an accepted steer with msgID = steer_id. No ack within the bound does not mean it is
   * not stored (a stalled server stores it later and the worker may deliver it): unless the
   * publish surely never left, its outcome is `unknown` and it is accounted like any other.
   */
  publish(steer: Steer): void {
    const { js, nc } = this.#p.link;
    const commit = js.publish(subjects.steer(this.#child), encode(steer), { msgID: steer.steer_id, timeout: this.#p.publish_ms }).then(
      (): SteerCommit => {
        this.#published.add(steer.steer_id);
        return 'stored';
      },
      (err: unknown): SteerCommit => {
        if (nc.isClosed() || isNoResponders(err)) return 'refused';
        this.#uncertain.add(steer.steer_id);
        return 'unknown';
      },
    );
    this.#inflight.set(steer.steer_id, commit);
    void commit.finally(() => this.#inflight.delete(steer.steer_id));
  }

  committed(steer_id: string): Promise<SteerCommit> | undefined {
    return this.#inflight.get(steer_id);
  }

  /**
   * Reads the mailbox for the loss accounting (its consumer is deleted first, so a worker that
   * comes back can take nothing more). Unreadable in time (NATS down): every published steer and
   * every uncertain one may have been taken, so all are `maybe`; honest, not exact.
   */
  async account(): Promise<MailboxAccount> {
    const read = await within(
      this.#p.clock,
      ACCOUNTING_MS,
      this.#read().catch(() => undefined),
    );
    return read ?? { delivered: new Set(), maybe: new Set([...this.#published, ...this.#uncertain]) };
  }

  /**
   * Splits the published steers by what the mailbox says: gone from it = acked by the worker
   * (delivered); still in it at or below the consumer's delivered sequence = fetched, not acked
   * (maybe delivered); above it = never fetched (missed).
   */
  async #read(): Promise<MailboxAccount> {
    await Promise.allSettled([...this.#inflight.values()]);
    // Only steers published by now: one accepted during the walk was never fetchable (the consumer
    // is gone first), so it stays undelivered and is missed.
    const published = [...this.#published];
    const { jsm } = this.#p.link;
    const name = consumerName(this.#child);
    // No consumer (the server reaped an idle one): nothing was fetched since it was made again.
    const info = await jsm.consumers.info(STEER_STREAM, name).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    await jsm.consumers.delete(STEER_STREAM, name).catch(() => undefined);
    const line = info?.delivered.stream_seq ?? 0;
    const left = new Map<string, number>();
    for (let seq = 1; ;) {
      const m = await jsm.direct.getMessage(STEER_STREAM, { next_by_subj: subjects.steer(this.#child), seq });
      if (!m) break;
      const steer = tryParse(steerSchema, m.data);
      if (steer) left.set(steer.steer_id, m.seq);
      seq = m.seq + 1;
    }
    const delivered = new Set<string>();
    const maybe = new Set<string>();
    for (const id of published) {
      const seq = left.get(id);
      if (seq === undefined) delivered.add(id);
      else if (seq <= line) maybe.add(id);
    }
    // Gone from the mailbox, an uncertain steer was either acked or never stored: maybe delivered.
    for (const id of this.#uncertain) {
      const seq = left.get(id);
      if (seq === undefined || seq <= line) maybe.add(id);
    }
    return { delivered, maybe };
  }

  /**
   * The consumer and the subject go once every publish has settled (none is left behind). NATS
   * down: tried again when it is back (the consumer's inactivity threshold and the stream's max
   * age are the backstop if this process never sees it back).
   */
  async dispose(): Promise<void> {
    await Promise.allSettled([...this.#inflight.values()]);
    const { link, logger, clock } = this.#p;
    const subagent_id = this.#child;
    let waited = false;
    for (let attempt = 1; attempt <= DISPOSE_TRIES; attempt++) {
      waited ||= !link.connected;
      if (!(await link.whenUp(DISPOSE_WAIT_MS))) break;
      try {
        await link.jsm.consumers.delete(STEER_STREAM, consumerName(subagent_id)).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
        await link.jsm.streams.purge(STEER_STREAM, { filter: subjects.steer(subagent_id) });
        if (waited || attempt > 1) logger.info({ subagent_id, attempt }, 'removed the mailbox of a finished child');
        return;
      } catch (err) {
        logger.warn({ subagent_id, attempt, err: describe(err) }, 'could not remove the mailbox of a finished child; will retry');
        // Still seen as connected (the outage not noticed yet): a pause before the next try.
        if (link.connected) await sleep(clock, 1000);
      }
    }
    if (!link.nc.isClosed()) logger.warn({ subagent_id }, 'left the mailbox of a finished child to the server to reap');
  }
}
