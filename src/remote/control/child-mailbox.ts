// A remote child's steer mailbox as the control plane writes it: each steer's durable copy in the
// steer stream (msgID = steer_id), the outcome of its publish, and its removal at the end. What a
// steer's state is (queued, taken, delivered) is the ledger's (steer-ledger.ts), never the stream's.
import { sleep } from '../../clock.ts';
import type { Steer, SteerCommit } from '../../types.ts';
import { describe, isNoResponders } from '../nats.ts';
import { PublishRefusedError } from '../requests.ts';
import { encode, STEER_STREAM, subjects } from '../wire.ts';
import { within } from '../wait.ts';
import type { PlacementPort } from './port.ts';

/** Tries at removing a finished child's mailbox, each after NATS is up again (within the wait). */
const DISPOSE_TRIES = 10;
const DISPOSE_WAIT_MS = 24 * 3_600_000;

export class ChildMailbox {
  readonly #p: Pick<PlacementPort, 'link' | 'logger' | 'clock' | 'publish_ms'>;
  readonly #child: string;
  /** Publishes not yet settled, by steer_id. */
  readonly #inflight = new Map<string, Promise<SteerCommit>>();
  /** Whether anything may be in the stream for this child (most children get no steer: nothing to remove). */
  #used = false;

  constructor(placement: Pick<PlacementPort, 'link' | 'logger' | 'clock' | 'publish_ms'>, child: string) {
    this.#p = placement;
    this.#child = child;
  }

  /**
   * Publishes an accepted steer with msgID = steer_id (a retry is deduplicated). No ack within the
   * bound does not mean it is not stored (a stalled server stores it later): unless the publish
   * surely never left (the connection closed), no stream took it (no responders) or the stream
   * answered that it refused it (a limit, no storage left), its outcome is `unknown`, and the
   * steer is accounted like any other.
   */
  publish(steer: Steer): Promise<SteerCommit> {
    const { link } = this.#p;
    this.#used = true;
    const commit = link.publishAck(subjects.steer(this.#child), encode(steer), { msgID: steer.steer_id, timeout: this.#p.publish_ms }).then(
      (): SteerCommit => 'stored',
      (err: unknown): SteerCommit => (link.nc.isClosed() || isNoResponders(err) || err instanceof PublishRefusedError ? 'refused' : 'unknown'),
    );
    this.#inflight.set(steer.steer_id, commit);
    void commit.finally(() => this.#inflight.delete(steer.steer_id));
    return commit;
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
   * The child's subject is purged once every publish has settled (none is left behind). NATS down:
   * tried again when it is back (the stream's max age is the backstop if this process never sees
   * it back). A child that never got a steer costs no JetStream call at all.
   */
  async dispose(): Promise<void> {
    if (!this.#used) return;
    await Promise.allSettled([...this.#inflight.values()]);
    const { link, logger, clock } = this.#p;
    const subagent_id = this.#child;
    let waited = false;
    for (let attempt = 1; attempt <= DISPOSE_TRIES; attempt++) {
      waited ||= !link.connected;
      if (!(await link.whenUp(DISPOSE_WAIT_MS))) break;
      try {
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
