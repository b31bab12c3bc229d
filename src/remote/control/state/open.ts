// The JetStream store (docs/durability.md, "On JetStream"): the SQLite store's working copy in
// memory, loaded from the state streams at start, every commit appended to the state log before
// anything that waited on it goes out. Any control plane on the same NATS can load it, so a standby
// on another machine adopts the leader's remote children (docs/scale-out.md, "Standby").
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../../../log.ts';
import { SqliteStore } from '../../../store/sqlite.ts';
import { LOG_STREAM } from './codec.ts';
import { ensureStateStreams, loadState } from './load.ts';
import { StateLog } from './log.ts';
import type { SnapshotEvery } from './snapshot.ts';

export interface JetStreamStoreOptions {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly logger: Logger;
  /** Another control plane wrote the log: this one must stop acting (the CLI exits 3). */
  readonly onFenced: (why: string) => void;
  readonly snapshot_every?: SnapshotEvery;
}

export interface OpenedJetStreamStore {
  readonly store: SqliteStore;
  /** What the start read back: log batches replayed and the snapshot's size. */
  readonly loaded: { readonly batches: number; readonly snapshot_bytes: number };
}

/** Loads the state and claims the log (its first append); rejects if it cannot (NATS, fenced). */
export async function openJetStreamStore(o: JetStreamStoreOptions): Promise<OpenedJetStreamStore> {
  await ensureStateStreams(o.jsm);
  const state = await loadState(o.js, o.jsm);
  const log = new StateLog({
    js: o.js,
    jsm: o.jsm,
    logger: o.logger,
    last: state.last,
    serialize: () => state.db.serialize(),
    onFenced: o.onFenced,
    ...(o.snapshot_every ? { snapshot_every: o.snapshot_every } : {}),
  });
  const store = SqliteStore.replica(state.db, { logger: o.logger, where: `nats:${LOG_STREAM}`, record: log.record, durability: log });
  // A new store's replay epoch was written as it opened: stored with the claim.
  log.seal();
  await store.settled();
  return { store, loaded: { batches: state.batches, snapshot_bytes: state.snapshot_bytes } };
}
