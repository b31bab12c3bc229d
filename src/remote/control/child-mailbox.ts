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
/** How long the loss accounting may spend reading the mailbox before the receipts alone decide. */
const ACCOUNTING_MS = 1500;

export class ChildMailbox {
  readonly #p: Pick<PlacementPort, 'link' | 'logger' | 'clock' | 'publish_ms'>;
  readonly #child: string;
  /** Publishes not yet settled, by steer_id. */
  readonly #inflight = new Map<string, Promise<SteerCommit>>();
  /** Steers whose publish was acknowledged: in the mailbox (or already taken from it). */
  readonly #published = new Set<string>();

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
        // Not acknowledged in time: perhaps in the mailbox, perhaps not (never counted as acked).
        return nc.isClosed() || isNoResponders(err) ? 'refused' : 'unknown';
      },
    );
    this.#inflight.set(steer.steer_id, commit);
    void commit.finally(() => this.#inflight.delete(steer.steer_id));
  }

  committed(steer_id: string): Promise<SteerCommit> | undefined {
    return this.#inflight.get(steer_id);
  }

  /** Resolves once every publish in flight has settled, or after the publish bound. */
  async settled(): Promise<void> {
    if (this.#inflight.size === 0) return;
    await within(this.#p.clock, this.#p.publish_ms, Promise.allSettled([...this.#inflight.values()]));
  }

  /**
   * Of `ids` (steers with a taken receipt), those the worker acked: stored by their publish, and
   * gone from the mailbox (only the worker's ack, after delivery, removes one). The consumer goes
   * first, so a worker that comes back can fetch nothing more. Unreadable in time (NATS down):
   * none is known acked, and the receipts alone decide (maybe delivered).
   */
  async acked(ids: readonly string[]): Promise<ReadonlySet<string>> {
    const read = await within(
      this.#p.clock,
      ACCOUNTING_MS,
      this.#left().catch(() => undefined),
    );
    if (!read) return new Set();
    return new Set(ids.filter((id) => this.#published.has(id) && !read.has(id)));
  }

  /** The steer ids still in the child's mailbox. */
  async #left(): Promise<ReadonlySet<string>> {
    const { jsm } = this.#p.link;
    await jsm.consumers.delete(STEER_STREAM, consumerName(this.#child)).catch(() => undefined);
    const left = new Set<string>();
    for (let seq = 1; ;) {
      const m = await jsm.direct.getMessage(STEER_STREAM, { next_by_subj: subjects.steer(this.#child), seq });
      if (!m) break;
      const steer = tryParse(steerSchema, m.data);
      if (steer) left.add(steer.steer_id);
      seq = m.seq + 1;
    }
    return left;
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
        // Once per child, not per try: after a loss many children fail together, and a line each
        // try would flood the log.
        if (attempt === 1) logger.warn({ subagent_id, err: describe(err) }, 'could not remove the mailbox of a finished child; will retry');
        // Backing off (1 s, 2 s, 4 s, ... at most a minute): a JetStream that refuses is not hammered.
        await sleep(clock, Math.min(60_000, 1000 * 2 ** (attempt - 1)));
      }
    }
    if (!link.nc.isClosed()) logger.warn({ subagent_id }, 'left the mailbox of a finished child to the server to reap');
  }
}
