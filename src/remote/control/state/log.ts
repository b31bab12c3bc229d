// The writer of the state log: the Durability of the JetStream store (store/commit.ts). Each group
// commit's recorded writes are sealed into one batch; batches go out one run at a time, in order,
// each part expecting the stream's last sequence to be the previous part's. So a commit is durable
// once its last part is acked, and a control plane that lost its lead (another appended since) is
// refused by the server on its next append: it is fenced, and stops (exit 3), never half-applied.
// A lost ack is retried with the same message ids (deduplicated); after an outage longer than the
// duplicate window, the stream's last message is read to tell "ours, stored" from "another's".
import { randomBytes } from 'node:crypto';
import { JetStreamApiError, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../../../log.ts';
import type { Durability } from '../../../store/commit.ts';
import { StoreUnavailableError } from '../../../types.ts';
import { describe } from '../../nats.ts';
import { encodeArgs, LOG_STREAM, LOG_SUBJECT, partHeaders, partsOf, type EncodedOp } from './codec.ts';
import { Snapshotter, type SnapshotEvery } from './snapshot.ts';

const RETRY_MS = 1000;
const PUBLISH_TIMEOUT_MS = 5000;
/** JetStream's "wrong last sequence": someone else appended since this writer's last part. */
const WRONG_LAST_SEQUENCE = 10071;

interface Batch {
  /** The last commit it holds (commits are numbered as sealed). */
  readonly n: number;
  readonly id: string;
  readonly parts: readonly Uint8Array[];
  /** Parts stored so far. */
  done: number;
}

interface Waiter {
  readonly n: number;
  readonly then: () => void;
  readonly fail: ((err: unknown) => void) | undefined;
}

export interface StateLogOptions {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly logger: Logger;
  /** The stream's last sequence when the working copy was loaded. */
  readonly last: number;
  /** The working copy as a snapshot (Database.serialize), for cutting the log. */
  readonly serialize: () => Buffer;
  /** Another control plane appended: this one must stop acting at once. */
  readonly onFenced: (why: string) => void;
  /** Test seam: how often the log is cut (default SNAPSHOT_EVERY). */
  readonly snapshot_every?: SnapshotEvery;
}

export class StateLog implements Durability {
  readonly #o: StateLogOptions;
  /** This process's writer id: the message ids of its parts. */
  readonly #writer = randomBytes(9).toString('base64url');
  readonly #snapshots: Snapshotter;
  #current: EncodedOp[] = [];
  #outbox: Array<{ n: number; ops: EncodedOp[] }> = [];
  #inflight: Batch | undefined;
  #waiters: Waiter[] = [];
  #sealed = 0;
  #durable = 0;
  #last: number;
  #available = true;
  #sending = false;
  #closed = false;
  #fenced = false;
  #retry: NodeJS.Timeout | undefined;

  constructor(o: StateLogOptions) {
    this.#o = o;
    this.#last = o.last;
    this.#snapshots = new Snapshotter({ js: o.js, jsm: o.jsm, logger: o.logger, ...(o.snapshot_every ? { every: o.snapshot_every } : {}) });
    // The first append claims the log: a plane that loaded before it and appends later is fenced.
    this.#outbox.push({ n: ++this.#sealed, ops: [] });
    void this.#send();
  }

  get available(): boolean {
    return this.#available && !this.#fenced;
  }

  get outstanding(): boolean {
    return this.#durable < this.#sealed;
  }

  /** The store's recorder (statements.ts): each write, as it runs inside a commit. */
  readonly record = (name: string, args: readonly unknown[]): void => {
    this.#current.push([name, ...encodeArgs(args)]);
  };

  seal(): void {
    if (this.#current.length === 0) return;
    this.#outbox.push({ n: ++this.#sealed, ops: this.#current });
    this.#current = [];
    void this.#send();
  }

  discard(): void {
    this.#current = [];
  }

  after(then: () => void, fail?: (err: unknown) => void): void {
    if (this.#fenced) fail?.(new StoreUnavailableError('store unavailable: fenced'));
    else if (this.#durable >= this.#sealed) then();
    else this.#waiters.push({ n: this.#sealed, then, fail });
  }

  close(): void {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
  }

  /** Sends batch after batch until the outbox is empty, or an append fails (retried on a timer). */
  async #send(): Promise<void> {
    if (this.#sending || this.#closed || this.#fenced) return;
    this.#sending = true;
    try {
      for (;;) {
        // Closed or fenced while the last append was in flight: nothing more goes out.
        if (this.#stopped()) return;
        const batch = this.#inflight ?? this.#frame();
        if (!batch) break;
        this.#inflight = batch;
        await this.#store(batch);
        this.#inflight = undefined;
        this.#durable = batch.n;
        if (!this.#available) this.#o.logger.warn('state log stored again: writes accepted');
        this.#available = true;
        this.#release();
      }
    } catch (err) {
      this.#failed(err);
      return;
    } finally {
      this.#sending = false;
    }
    if (!this.#stopped() && this.#snapshots.due()) void this.#snapshots.take(this.#o.serialize(), this.#last);
  }

  #stopped(): boolean {
    return this.#closed || this.#fenced;
  }

  /** Everything sealed since the last run, as one batch (replayed as one after a restart). */
  #frame(): Batch | undefined {
    if (this.#outbox.length === 0) return undefined;
    const sealed = this.#outbox.splice(0);
    const ops = sealed.flatMap((s) => s.ops);
    const n = sealed.at(-1)?.n ?? this.#sealed;
    return { n, id: `${this.#writer}.${n}`, parts: partsOf(Buffer.from(JSON.stringify(ops))), done: 0 };
  }

  async #store(batch: Batch): Promise<void> {
    const { js } = this.#o;
    while (batch.done < batch.parts.length) {
      const index = batch.done;
      const msgID = `${batch.id}.${index}`;
      const part = batch.parts[index] ?? new Uint8Array();
      try {
        const ack = await js.publish(LOG_SUBJECT, part, {
          msgID,
          expect: { lastSequence: this.#last },
          headers: partHeaders({ id: batch.id, index, count: batch.parts.length }),
          timeout: PUBLISH_TIMEOUT_MS,
        });
        this.#last = ack.seq;
      } catch (err) {
        if (!(err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE)) throw err;
        // Ours, stored before an ack that never came (past the duplicate window)? Or another's.
        const last = await this.#o.jsm.streams.getMessage(LOG_STREAM, { last_by_subj: LOG_SUBJECT });
        if (last?.header.get('Nats-Msg-Id') !== msgID) throw new Fenced(`another control plane wrote the state log (${err.message})`);
        this.#last = last.seq;
      }
      this.#snapshots.appended(part.length);
      batch.done++;
    }
  }

  #release(): void {
    const due = this.#waiters.filter((w) => w.n <= this.#durable);
    if (due.length === 0) return;
    this.#waiters = this.#waiters.filter((w) => w.n > this.#durable);
    for (const w of due) w.then();
  }

  #failed(err: unknown): void {
    const unavailable = new StoreUnavailableError('store unavailable');
    // Who asked to hear of a failure hears it now; what waits to be sent keeps waiting.
    const told = this.#waiters.filter((w) => w.fail !== undefined);
    this.#waiters = this.#waiters.filter((w) => w.fail === undefined);
    if (err instanceof Fenced) {
      this.#fenced = true;
      this.#available = false;
      this.#o.logger.error({ err: err.message }, 'fenced: another control plane leads');
      for (const w of told) w.fail?.(unavailable);
      this.#o.onFenced(err.message);
      return;
    }
    if (this.#available) this.#o.logger.error({ err: describe(err) }, 'state log unavailable: writes are refused until it stores again');
    this.#available = false;
    for (const w of told) w.fail?.(unavailable);
    this.#retry ??= setTimeout(() => {
      this.#retry = undefined;
      void this.#send();
    }, RETRY_MS).unref();
  }
}

class Fenced extends Error {
  override readonly name = 'Fenced';
}
