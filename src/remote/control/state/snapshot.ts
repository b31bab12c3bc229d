// Cutting the state log: now and then the leader stores its whole working copy (taken between two
// appends, so it is exactly the log up to a sequence) as a snapshot, then purges the log up to that
// sequence and the older snapshots. A crash between those steps leaves more than needed, never
// less: a snapshot counts only once all its parts are stored, and the log is cut only after.
import { randomBytes } from 'node:crypto';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../../../log.ts';
import { describe } from '../../nats.ts';
import { LOG_STREAM, partHeaders, partsOf, SNAP_STREAM, SNAP_SUBJECT } from './codec.ts';

/** When the log has grown this much since the last snapshot, the next idle moment takes one. */
export interface SnapshotEvery {
  readonly messages: number;
  readonly bytes: number;
}

export const SNAPSHOT_EVERY: SnapshotEvery = { messages: 4096, bytes: 64 * 1024 * 1024 };

export interface SnapshotterOptions {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly logger: Logger;
  readonly every?: SnapshotEvery;
}

export class Snapshotter {
  readonly #o: SnapshotterOptions;
  readonly #every: SnapshotEvery;
  #messages = 0;
  #bytes = 0;
  #taking = false;

  constructor(o: SnapshotterOptions) {
    this.#o = o;
    this.#every = o.every ?? SNAPSHOT_EVERY;
  }

  /** One part appended to the log. */
  appended(bytes: number): void {
    this.#messages++;
    this.#bytes += bytes;
  }

  due(): boolean {
    return !this.#taking && (this.#messages >= this.#every.messages || this.#bytes >= this.#every.bytes);
  }

  /** Stores `image` (the working copy as of log sequence `upto`), then cuts what it replaces. */
  async take(image: Buffer, upto: number): Promise<void> {
    this.#taking = true;
    const grown = { messages: this.#messages, bytes: this.#bytes };
    this.#messages = 0;
    this.#bytes = 0;
    const { js, jsm } = this.#o;
    try {
      const id = randomBytes(9).toString('base64url');
      const parts = partsOf(image);
      let first: number | undefined;
      for (const [index, part] of parts.entries()) {
        const ack = await js.publish(SNAP_SUBJECT, part, { msgID: `${id}.${index}`, headers: partHeaders({ id, index, count: parts.length, upto }) });
        first ??= ack.seq;
      }
      // Everything up to `upto` is in the snapshot now; older snapshots are replaced by it.
      await jsm.streams.purge(LOG_STREAM, { seq: upto + 1 });
      if (first !== undefined) await jsm.streams.purge(SNAP_STREAM, { seq: first });
      this.#o.logger.debug({ upto, bytes: image.length, parts: parts.length }, 'state snapshot stored; log cut');
    } catch (err) {
      // The log still holds everything: the next idle moment tries again.
      this.#messages += grown.messages;
      this.#bytes += grown.bytes;
      this.#o.logger.warn({ err: describe(err) }, 'state snapshot not stored; the log is kept whole');
    } finally {
      this.#taking = false;
    }
  }
}
