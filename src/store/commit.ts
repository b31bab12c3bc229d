// Group commit: a write only queues its statement; everything queued is committed in one
// transaction at the end of the event loop turn (setImmediate), or earlier when a caller must
// answer (flush: a method's reply, a steer handed to a model request). What must not go out before
// it is persisted (an event to a transport) waits in afterCommit and runs once its commit is done,
// in the order it was queued. A failed commit rolls back, keeps everything queued, marks the store
// unavailable (writes answer -32002) and is retried every second until it succeeds. Checkpoints
// (the one step that fsyncs under `--fsync normal`) run when the store is idle, never inside a
// commit a reply waits for.
import type { Logger } from '../log.ts';
import { StoreUnavailableError } from '../types.ts';
import type { Db } from './open.ts';
import type { Write } from './statements.ts';

export type Op = readonly [Write, ...unknown[]];

const RETRY_MS = 1000;
/** A checkpoint runs once no commit came for this long (the store is idle)... */
const CHECKPOINT_IDLE_MS = 250;
/** ...or, under load that never pauses, inline after this many commits (the WAL stays bounded). */
const CHECKPOINT_EVERY_COMMITS = 20_000;

/** Writes the store coalesces itself (one row per key per commit), applied after the queued ops. */
export interface Coalesced {
  pending(): boolean;
  apply(): void;
  clear(): void;
}

/**
 * Where a commit becomes durable beyond this process (the JetStream state log, remote/control/state/log.ts).
 * Without one, a local commit is durable; with one, the local database is this process's working
 * copy and what waits for a commit waits until the durability says the commit is stored.
 */
export interface Durability {
  /** False while commits cannot be stored (they stay queued, in order, and are retried). */
  readonly available: boolean;
  /** Commits sealed and not yet durable. */
  readonly outstanding: boolean;
  /** Ships what the commit just made wrote (its recorded statements). */
  seal(): void;
  /** What the failed commit recorded is dropped (its transaction rolled back). */
  discard(): void;
  /**
   * Runs `then` once every commit sealed so far is durable, after everything queued before it; `fail`
   * (if given) instead, at the first failure to store one of them meanwhile.
   */
  after(then: () => void, fail?: (err: unknown) => void): void;
  close(): void;
}

export class GroupCommit {
  readonly #db: Db;
  readonly #logger: Logger;
  readonly #coalesced: Coalesced;
  readonly #commit: () => void;
  readonly #durability: Durability | undefined;
  readonly #checkpointer: NodeJS.Timeout;
  #ops: Op[] = [];
  #waiting: Array<() => void> = [];
  #ready: Array<() => void> = [];
  #draining = false;
  #scheduled = false;
  #retry: NodeJS.Timeout | undefined;
  #available = true;
  #closed = false;
  /** Commits since the last checkpoint, and when the last one was made (ms). */
  #uncheckpointed = 0;
  #lastCommit = 0;

  constructor(db: Db, logger: Logger, coalesced: Coalesced, durability?: Durability) {
    this.#db = db;
    this.#durability = durability;
    this.#logger = logger;
    this.#coalesced = coalesced;
    this.#commit = db.transaction(() => {
      for (const [stmt, ...args] of this.#ops) stmt.run(...args);
      this.#coalesced.apply();
    });
    this.#checkpointer = setInterval(() => {
      if (this.#uncheckpointed > 0 && Date.now() - this.#lastCommit >= CHECKPOINT_IDLE_MS) this.#checkpoint();
    }, CHECKPOINT_IDLE_MS).unref();
  }

  get available(): boolean {
    return this.#available && (this.#durability?.available ?? true);
  }

  /** Resolves once everything committed so far is durable; undefined when it already is. */
  settled(): Promise<void> | undefined {
    const d = this.#durability;
    if (!d || (!d.outstanding && !this.#pending)) return undefined;
    return new Promise((resolve, reject) => {
      try {
        this.flush();
      } catch (err) {
        reject(err);
        return;
      }
      d.after(resolve, reject);
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  queue(op: Op): void {
    this.#ops.push(op);
    this.schedule();
  }

  schedule(): void {
    if (this.#scheduled || this.#closed) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      try {
        this.flush();
      } catch {
        // logged by flush; retried on its timer
      }
    });
  }

  get #pending(): boolean {
    return this.#ops.length > 0 || this.#coalesced.pending();
  }

  afterCommit(deliver: () => void): void {
    if (this.#pending || this.#waiting.length > 0) {
      this.#waiting.push(deliver);
      this.schedule();
    } else if (this.#durability?.outstanding === true) this.#durability.after(deliver);
    else if (this.#draining) this.#ready.push(deliver);
    else deliver();
  }

  /** Commits everything queued, then runs what waited for it; throws StoreUnavailableError if it cannot. */
  flush(): void {
    if (this.#closed) return;
    if (this.#pending) {
      try {
        this.#commit();
      } catch (err) {
        this.#durability?.discard();
        if (this.#available) this.#logger.error({ err }, 'store unavailable: writes are refused until it can write again');
        this.#available = false;
        this.#retry ??= setTimeout(() => {
          this.#retry = undefined;
          try {
            this.flush();
          } catch {
            // still unavailable: the next attempt is scheduled
          }
        }, RETRY_MS).unref();
        throw new StoreUnavailableError('store unavailable');
      }
      this.#ops = [];
      this.#coalesced.clear();
      this.#durability?.seal();
      this.#lastCommit = Date.now();
      if (++this.#uncheckpointed >= CHECKPOINT_EVERY_COMMITS) this.#checkpoint();
      if (!this.#available) this.#logger.warn('store available again');
      this.#available = true;
    }
    if (this.#waiting.length > 0) {
      const waiting = this.#waiting;
      this.#waiting = [];
      // Durable elsewhere: they go once the commits they waited for are stored there.
      if (this.#durability?.outstanding === true)
        this.#durability.after(() => {
          this.#ready.push(...waiting);
          this.#drain();
        });
      else this.#ready.push(...waiting);
    }
    this.#drain();
  }

  /** Nothing more is written or delivered (what is queued is dropped: close() flushes first). */
  close(): void {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    clearInterval(this.#checkpointer);
    this.#durability?.close();
    this.#ops = [];
    this.#waiting = [];
  }

  /** Runs what waited for a commit, in order; one queued meanwhile waits for its own commit. */
  #drain(): void {
    if (this.#draining) return;
    this.#draining = true;
    try {
      for (let i = 0; i < this.#ready.length; i++) {
        try {
          this.#ready[i]?.();
        } catch (err) {
          this.#logger.error({ err }, 'after-commit delivery threw');
        }
      }
      this.#ready = [];
    } finally {
      this.#draining = false;
    }
  }

  /** Copies the WAL into the database (fsync under NORMAL): off the path of any reply. */
  #checkpoint(): void {
    this.#uncheckpointed = 0;
    try {
      this.#db.pragma('wal_checkpoint(PASSIVE)');
    } catch (err) {
      this.#logger.warn({ err }, 'checkpoint failed; the WAL keeps everything and the next one retries');
    }
  }
}
