// Reading the control plane's state back from JetStream at start: the newest whole snapshot, then
// every whole batch of the log after it, applied to a working copy in memory with the same
// statements that first wrote them. A batch cut off by a crash never finished its commit (nothing
// waited on it was sent), so it is skipped; a log cut past the snapshot read (a newer snapshot
// came meanwhile) is read again from that newer snapshot.
import { DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { Db } from '../../../store/open.ts';
import { openMemoryDatabase, StoreOpenError } from '../../../store/open.ts';
import { statements, type Write } from '../../../store/statements.ts';
import { Assembler, decodeArgs, DUPLICATE_WINDOW_NS, LOG_STREAM, LOG_SUBJECT, readPartHeader, SNAP_STREAM, SNAP_SUBJECT } from './codec.ts';

export interface LoadedState {
  readonly db: Db;
  /** The log's last sequence as read: the next append expects it. */
  readonly last: number;
  readonly batches: number;
  readonly snapshot_bytes: number;
}

const ATTEMPTS = 5;

export async function ensureStateStreams(jsm: JetStreamManager): Promise<void> {
  for (const [name, subject] of [
    [LOG_STREAM, LOG_SUBJECT],
    [SNAP_STREAM, SNAP_SUBJECT],
  ] as const) {
    await jsm.streams.info(name).catch(() =>
      jsm.streams.add({
        name,
        subjects: [subject],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        // Never dropped by a limit: only a snapshot cuts the log.
        discard: DiscardPolicy.New,
        duplicate_window: DUPLICATE_WINDOW_NS,
      }),
    );
  }
}

export async function loadState(js: JetStreamClient, jsm: JetStreamManager): Promise<LoadedState> {
  for (let attempt = 1; ; attempt++) {
    const snap = await readSnapshot(js, jsm);
    const { first_seq, last_seq, messages } = (await jsm.streams.info(LOG_STREAM)).state;
    if (snap.upto + 1 < first_seq && (messages > 0 || snap.upto < last_seq)) {
      if (attempt < ATTEMPTS) continue;
      throw new StoreOpenError(`the state log ${LOG_STREAM} was cut past its newest snapshot; it cannot be read`);
    }
    const db = openMemoryDatabase(snap.image);
    try {
      const { writes } = statements(db);
      let batches = 0;
      const from = snap.upto + 1;
      if (messages > 0 && last_seq >= from) {
        const assembler = new Assembler();
        await readRange(js, LOG_STREAM, from, last_seq, (h, data) => {
          const whole = assembler.add(h, data);
          if (whole === undefined) return;
          apply(db, writes, whole);
          batches++;
        });
      }
      return { db, last: last_seq, batches, snapshot_bytes: snap.image?.length ?? 0 };
    } catch (err) {
      db.close();
      throw err;
    }
  }
}

/** The newest snapshot whose parts are all stored (none: an empty store at sequence 0). */
async function readSnapshot(js: JetStreamClient, jsm: JetStreamManager): Promise<{ image: Buffer | undefined; upto: number }> {
  const { first_seq, last_seq, messages } = (await jsm.streams.info(SNAP_STREAM)).state;
  let newest: { image: Buffer | undefined; upto: number } = { image: undefined, upto: 0 };
  if (messages === 0) return newest;
  const assembler = new Assembler();
  await readRange(js, SNAP_STREAM, first_seq, last_seq, (h, data) => {
    const whole = assembler.add(h, data);
    if (whole !== undefined && h.upto !== undefined) newest = { image: whole, upto: h.upto };
  });
  return newest;
}

/** Every message of `stream` from `from` through `to`, in order, with its part header. */
async function readRange(
  js: JetStreamClient,
  stream: string,
  from: number,
  to: number,
  each: (h: NonNullable<ReturnType<typeof readPartHeader>>, data: Uint8Array) => void,
): Promise<void> {
  const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from });
  const messages = await consumer.consume();
  try {
    for await (const m of messages) {
      const h = readPartHeader(m.headers);
      if (h) each(h, m.data);
      if (m.seq >= to) break;
    }
  } finally {
    await messages.close();
  }
}

/** One batch: its writes, replayed in one transaction as they were committed. */
function apply(db: Db, writes: ReadonlyMap<string, Write>, whole: Buffer): void {
  const ops: unknown = JSON.parse(whole.toString('utf8'));
  if (!Array.isArray(ops)) throw unreadable();
  db.transaction(() => {
    for (const op of ops) {
      if (!Array.isArray(op)) throw unreadable();
      const fields: unknown[] = op;
      const [name, ...args] = fields;
      const write = typeof name === 'string' ? writes.get(name) : undefined;
      if (!write) throw unreadable();
      write.run(...decodeArgs(args));
    }
  })();
}

function unreadable(): StoreOpenError {
  return new StoreOpenError(`the state log ${LOG_STREAM} holds a record this subrun cannot read; run the subrun that wrote it`);
}
