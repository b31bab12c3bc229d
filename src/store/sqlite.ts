// The durable store: one SQLite database per state directory (docs/durability.md). Each fact the
// server or runtime writes becomes a queued statement here; when it is committed, and what waits
// for that, is commit.ts (group commit).
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../log.ts';
import type { CompletionEntry, JournaledChild, Steer } from '../types.ts';
import { GroupCommit, type Durability, type Op } from './commit.ts';
import { DirLock, openDatabase, prepareDir, type Db, type FsyncMode } from './open.ts';
import { SCHEMA_VERSION } from './schema.ts';
import { childFromRow, parseEntry, statements, type ChildRowData, type Recorder, type Statements } from './statements.ts';
import type { AnswerRow, DelegationRow, EventRow, ServerStore, SessionRow, StoreStats, StoredChild } from './types.ts';
import { withProps } from '../shapes.ts';

export interface SqliteStoreOptions {
  readonly fsync?: FsyncMode;
  readonly logger?: Logger;
  /** Test seam: runs inside each commit's transaction, before it commits; a throw fails the commit. */
  readonly beforeCommit?: () => void;
  /** Whether to take the directory's lock (a library opening a file it was given: still yes). */
  readonly lock?: boolean;
}

/** A working copy in memory whose commits are durable elsewhere (the JetStream store). */
export interface ReplicaOptions {
  readonly logger?: Logger;
  /** Where it is durable, for `subrun state:` lines and store stats. */
  readonly where: string;
  /** Told of every write (the durability ships them at each seal). */
  readonly record: Recorder;
  readonly durability: Durability;
}

/** Finished children without a session (a library's) kept at most. */
const MAX_OWNERLESS_FINISHED = 1000;

export class SqliteStore implements ServerStore {
  readonly durable = true;
  readonly replay_epoch: string;
  readonly path: string;
  readonly #db: Db;
  readonly #st: Statements;
  readonly #lock: DirLock | undefined;
  readonly #logger: Logger;
  /** Coalesced per commit: a session's latest seq, its ring's eviction mark, a child's progress. */
  readonly #seqs = new Map<string, number>();
  readonly #evicted = new Map<string, number>();
  readonly #progress = new Map<string, { tail: string; checkpoint: string | null }>();
  #ownerlessFinished = 0;
  readonly #group: GroupCommit;
  /** In memory, durable elsewhere: no file to size, no WAL to checkpoint. */
  readonly #replica: boolean;

  /** Opens `dir/store.db` (made if missing), taking the directory's lock. Throws StoreOpenError. */
  static open(dir: string, options: SqliteStoreOptions = {}): SqliteStore {
    prepareDir(dir);
    const lock = options.lock === false ? undefined : DirLock.take(dir);
    try {
      return new SqliteStore(join(dir, 'store.db'), openDatabase(join(dir, 'store.db'), options.fsync ?? 'normal'), lock, options);
    } catch (err) {
      lock?.release();
      throw err;
    }
  }

  /** A working copy in `db` (already loaded) whose commits `replica.durability` makes durable. */
  static replica(db: Db, replica: ReplicaOptions): SqliteStore {
    return new SqliteStore(replica.where, db, undefined, { logger: replica.logger }, replica);
  }

  private constructor(path: string, db: Db, lock: DirLock | undefined, options: SqliteStoreOptions, replica?: ReplicaOptions) {
    this.path = path;
    this.#db = db;
    this.#lock = lock;
    this.#logger = options.logger ?? silentLogger;
    this.#replica = replica !== undefined;
    this.#st = statements(db, replica?.record);
    const epoch = this.#st.getMeta.pluck().get('replay_epoch');
    if (typeof epoch === 'string') this.replay_epoch = epoch;
    else {
      this.replay_epoch = `ep_${randomBytes(9).toString('base64url')}`;
      this.#st.setMeta.run('replay_epoch', this.replay_epoch);
    }
    this.#group = new GroupCommit(
      db,
      this.#logger,
      {
        pending: () => this.#seqs.size > 0 || this.#evicted.size > 0 || this.#progress.size > 0,
        apply: () => {
          this.#applyCoalesced();
          options.beforeCommit?.();
        },
        clear: () => {
          this.#seqs.clear();
          this.#evicted.clear();
          this.#progress.clear();
        },
      },
      replica?.durability,
    );
  }

  get available(): boolean {
    return this.#group.available;
  }

  /** Names the listener in the directory's lock (the line a second server prints). */
  announce(listener: string): void {
    this.#lock?.announce(listener);
  }

  afterCommit(deliver: () => void): void {
    this.#group.afterCommit(deliver);
  }

  flush(): void {
    this.#group.flush();
  }

  settled(): Promise<void> | undefined {
    return this.#group.settled();
  }

  #queue(op: Op): void {
    this.#group.queue(op);
  }

  #schedule(): void {
    this.#group.schedule();
  }

  /** The coalesced writes, last in each commit (the group's ops run first). */
  #applyCoalesced(): void {
    const st = this.#st;
    for (const [id, seq] of this.#seqs) st.sessionSeq.run(seq, id);
    for (const [id, seq] of this.#evicted) st.evictEvents.run(id, seq);
    for (const [id, p] of this.#progress) st.childProgress.run(p.tail, p.checkpoint, id);
  }

  // ---- the children (ChildJournal) ----

  spawned(c: JournaledChild): void {
    const o = c.owner;
    const agent = JSON.stringify(c.agent);
    this.#queue([
      this.#st.childSpawned,
      c.subagent_id,
      o?.session_id ?? null,
      o?.generation ?? null,
      c.parent_id,
      c.depth,
      c.delegation_id,
      c.task_index,
      c.task_count,
      c.goal,
      c.context ?? null,
      agent,
      c.model,
      c.timeout_ms ?? null,
      c.revived_from ?? null,
    ]);
  }

  started(subagent_id: string, at: number): void {
    this.#queue([this.#st.childStarted, at, subagent_id]);
  }

  progress(subagent_id: string, tail: string, checkpoint: unknown): void {
    this.#progress.set(subagent_id, { tail, checkpoint: checkpoint === undefined ? null : JSON.stringify(checkpoint) });
    this.#schedule();
  }

  finished(subagent_id: string, entry: CompletionEntry, at: number): void {
    const st = this.#st;
    this.#queue([st.childFinished, entry.status, at, JSON.stringify(entry), subagent_id]);
    this.#queue([st.steersOfChildDropped, subagent_id]);
    this.#queue([st.childOfClosedDropped, subagent_id]);
    if (++this.#ownerlessFinished % 64 === 0) this.#queue([st.ownerlessPruned, MAX_OWNERLESS_FINISHED]);
  }

  steerAccepted(subagent_id: string, steer: Steer, at: number): void {
    this.#queue([this.#st.steerAccepted, steer.steer_id, subagent_id, steer.seq, steer.text, 'queued', at, steer.requeued_from ?? null]);
  }

  steerWithdrawn(subagent_id: string, steer_id: string): void {
    this.#queue([this.#st.steerDropped, subagent_id, steer_id]);
  }

  steersTaken(subagent_id: string, steer_ids: readonly string[]): void {
    for (const id of steer_ids) this.#queue([this.#st.steerState, 'taken', subagent_id, id]);
  }

  steersDelivered(subagent_id: string, steer_ids: readonly string[]): void {
    for (const id of steer_ids) this.#queue([this.#st.steerState, 'delivered', subagent_id, id]);
  }

  // ---- sessions, events, answers, delegations ----

  sessionSaved(r: SessionRow): void {
    this.#queue([this.#st.sessionSaved, r.session_id, r.key_digest, r.title ?? null, r.created_at, r.generation, r.close_on_disconnect ? 1 : 0, r.seq]);
  }

  sessionClosed(session_id: string): void {
    const st = this.#st;
    this.#seqs.delete(session_id);
    this.#evicted.delete(session_id);
    for (const stmt of [st.closedSteers, st.closedChildren, st.closedEvents, st.closedAnswers, st.closedDelegations, st.closedSession])
      this.#queue([stmt, session_id]);
  }

  turnRunning(session_id: string, running: boolean): void {
    this.#queue([this.#st.turnRunning, running ? 1 : 0, session_id]);
  }

  eventAppended(session_id: string, seq: number, text: string): void {
    this.#queue([this.#st.eventAppended, session_id, seq, text]);
    this.#seqs.set(session_id, seq);
  }

  eventsEvicted(session_id: string, seq: number): void {
    this.#evicted.set(session_id, seq);
    this.#schedule();
  }

  answerKept(session_id: string, r: AnswerRow): void {
    this.#queue([this.#st.answerKept, session_id, r.slot, r.params, r.expires, r.answer]);
  }

  answerDropped(session_id: string, slot: string): void {
    this.#queue([this.#st.answerDropped, session_id, slot]);
  }

  delegationDispatched(r: DelegationRow): void {
    this.#queue([this.#st.delegationDispatched, r.delegation_id, r.session_id, r.generation, r.count, r.done ? 1 : 0]);
  }

  delegationDone(delegation_id: string): void {
    this.#queue([this.#st.delegationDone, delegation_id]);
  }

  delegationsDropped(delegation_ids: readonly string[]): void {
    const st = this.#st;
    for (const id of delegation_ids) for (const stmt of [st.droppedSteers, st.droppedChildren, st.droppedDelegation]) this.#queue([stmt, id]);
  }

  revived(subagent_id: string, revived_as: string): void {
    this.#queue([this.#st.childRevived, revived_as, subagent_id]);
  }

  // ---- reads (each first commits what is queued, so it reads what the process knows) ----

  #settled(): void {
    try {
      this.flush();
    } catch {
      // unavailable: the reads see what was committed
    }
  }

  loadSessions(): SessionRow[] {
    return this.#st.sessions.all().map((r) => ({
      session_id: r.session_id,
      key_digest: r.key_digest,
      title: r.title ?? undefined,
      created_at: r.created_at,
      generation: r.generation,
      close_on_disconnect: r.close_on_disconnect === 1,
      seq: r.seq,
      turn_running: r.turn_running === 1,
    }));
  }

  loadEvents(session_id: string): EventRow[] {
    this.#settled();
    return this.#st.events.all(session_id);
  }

  loadAnswers(session_id: string): AnswerRow[] {
    this.#settled();
    return this.#st.answers.all(session_id);
  }

  loadDelegation(delegation_id: string): (DelegationRow & { entries: CompletionEntry[] }) | undefined {
    this.#settled();
    const r = this.#st.delegation.get(delegation_id);
    if (!r) return undefined;
    const entries = this.#st.delegationEntries.pluck().all(delegation_id).map(parseEntry);
    return { delegation_id: r.delegation_id, session_id: r.session_id, generation: r.generation, count: r.count, done: r.done === 1, entries };
  }

  openDelegations(): DelegationRow[] {
    this.#settled();
    return this.#st.openDelegations.all().map((r) => withProps(r, { done: false }));
  }

  unfinished(): StoredChild[] {
    this.#settled();
    return this.#st.unfinished.all().map((r) => this.#withSteers(r));
  }

  child(subagent_id: string): StoredChild | undefined {
    this.#settled();
    const r = this.#st.child.get(subagent_id);
    return r ? this.#withSteers(r) : undefined;
  }

  /** A named position kept with the writes it goes with (the worker event feed's last event). */
  cursor(name: string): number | undefined {
    const v = this.#st.getMeta.pluck().get(`cursor:${name}`);
    return typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined;
  }

  /** Queued like any write: committed in the same transaction as what the position's events caused. */
  moveCursor(name: string, position: number): void {
    this.#queue([this.#st.setMeta, `cursor:${name}`, String(position)]);
  }

  delegationChildren(delegation_id: string): StoredChild[] {
    this.#settled();
    return this.#st.delegationChildren.all(delegation_id).map((r) => this.#withSteers(r));
  }

  #withSteers(r: ChildRowData): StoredChild {
    return childFromRow(r, r.entry === null ? this.#st.steersOf.all(r.subagent_id) : []);
  }

  stats(): StoreStats {
    this.#settled();
    const count = (table: string) => Number(this.#db.prepare(`SELECT count(*) FROM ${table}`).pluck().get());
    let bytes = this.#replica ? Number(this.#db.pragma('page_count', { simple: true })) * Number(this.#db.pragma('page_size', { simple: true })) : 0;
    for (const suffix of this.#replica ? [] : ['', '-wal']) {
      try {
        bytes += statSync(`${this.path}${suffix}`).size;
      } catch {
        // no WAL file right after a checkpoint
      }
    }
    return {
      path: this.path,
      bytes,
      schema_version: SCHEMA_VERSION,
      sessions: count('sessions'),
      events: count('events'),
      children: count('children'),
      unfinished_children: Number(this.#db.prepare('SELECT count(*) FROM children WHERE entry IS NULL').pluck().get()),
      steers: count('steers'),
      delegations: count('delegations'),
      answers: count('answers'),
    };
  }

  /**
   * The process dies here (a test's model of a kill -9): nothing queued is written, nothing more
   * ever is, and what waited for a commit is never delivered. Only what was committed remains.
   */
  abandon(): void {
    if (this.#group.closed) return;
    this.#group.close();
    this.#db.close();
    this.#lock?.release();
  }

  /** Commits what is queued (best effort) and closes the database and the lock. */
  close(): void {
    if (this.#group.closed) return;
    this.#settled();
    this.#group.close();
    try {
      if (!this.#replica) this.#db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // the WAL stays; the next open replays it
    }
    this.#db.close();
    this.#lock?.release();
  }
}
