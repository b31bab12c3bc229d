// Opening a state directory: its permissions, the one-server lock, the database file (0600), its
// pragmas, its health and its schema. Every way this can fail is a StoreOpenError with one line a
// person can act on (the CLI prints it and exits 2); nothing here ever rewrites a database it
// cannot read.
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeFileSync, chmodSync, existsSync } from 'node:fs';
import { join } from 'node:path';
// Loaded with this module only: the CLI and openStore() import the store when a state directory is used.
import Database from 'better-sqlite3';
import { errorCode } from '../guards.ts';
import { MIGRATIONS, SCHEMA_VERSION } from './schema.ts';

export type Db = Database.Database;

/** `normal`: safe against process death (no fsync per commit); `full`: against power loss too. */
export type FsyncMode = 'normal' | 'full';

export class StoreOpenError extends Error {
  override readonly name = 'StoreOpenError';
}

const WAY_OUT = 'start with --state-dir DIR for another directory, or --no-state to keep nothing';

/** Makes `dir` (0700) or checks it: a directory writable by group or others is refused. */
export function prepareDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new StoreOpenError(`cannot create the state directory ${dir}: ${errorCode(err) ?? String(err)}; ${WAY_OUT}`);
  }
  const st = statSync(dir);
  if (!st.isDirectory()) throw new StoreOpenError(`the state directory ${dir} is not a directory; ${WAY_OUT}`);
  if ((st.mode & 0o022) !== 0) {
    throw new StoreOpenError(
      `the state directory ${dir} is writable by group or others (mode ${(st.mode & 0o777).toString(8)}); run chmod 700 on it, or ${WAY_OUT}`,
    );
  }
}

interface LockHolder {
  readonly pid: number;
  readonly listener?: string;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by someone else.
    return errorCode(err) === 'EPERM';
  }
}

function readHolder(path: string): LockHolder | undefined {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'pid' in parsed && typeof parsed.pid === 'number') {
      const listener = 'listener' in parsed && typeof parsed.listener === 'string' ? parsed.listener : undefined;
      return { pid: parsed.pid, ...(listener !== undefined ? { listener } : {}) };
    }
  } catch {
    // unreadable or half written: treated as stale
  }
  return undefined;
}

/** The one-server lock of a state directory: `LOCK` holds the pid (and the listener, once known). */
export class DirLock {
  readonly #path: string;
  #held = false;

  private constructor(path: string) {
    this.#path = path;
  }

  /** Takes the lock; a live holder is a StoreOpenError naming it, a dead one's lock is taken over. */
  static take(dir: string): DirLock {
    const lock = new DirLock(join(dir, 'LOCK'));
    const body = JSON.stringify({ pid: process.pid });
    try {
      const fd = openSync(lock.#path, 'wx', 0o600);
      writeFileSync(fd, body);
      closeSync(fd);
    } catch (err) {
      if (errorCode(err) !== 'EEXIST') throw new StoreOpenError(`cannot lock the state directory ${dir}: ${errorCode(err) ?? String(err)}; ${WAY_OUT}`);
      const holder = readHolder(lock.#path);
      if (holder && holder.pid !== process.pid && alive(holder.pid)) {
        const where = holder.listener ? ` (listening on ${holder.listener})` : '';
        throw new StoreOpenError(`the state directory ${dir} is in use by subrun pid ${holder.pid}${where}; ${WAY_OUT}`);
      }
      // Stale: its process is gone. Replaced whole (a rename), never edited in place.
      const tmp = `${lock.#path}.${process.pid}`;
      writeFileSync(tmp, body, { mode: 0o600 });
      renameSync(tmp, lock.#path);
    }
    lock.#held = true;
    return lock;
  }

  /** Names the listener in the lock, for the line a second server prints. */
  announce(listener: string): void {
    if (!this.#held) return;
    const tmp = `${this.#path}.${process.pid}`;
    try {
      writeFileSync(tmp, JSON.stringify({ pid: process.pid, listener }), { mode: 0o600 });
      renameSync(tmp, this.#path);
    } catch {
      // the lock still holds the pid: enough to refuse a second server
    }
  }

  release(): void {
    if (!this.#held) return;
    this.#held = false;
    const holder = readHolder(this.#path);
    if (holder?.pid !== process.pid) return;
    try {
      writeFileSync(this.#path, '', { mode: 0o600 });
    } catch {
      // a lock left behind is stale once this process is gone: the next start takes it over
    }
  }
}

/** Opens (or creates) `path` as subrun's database: WAL, one writer, checked, migrated. */
export function openDatabase(path: string, fsync: FsyncMode): Db {
  // Made 0600 before SQLite sees it: SQLite gives its WAL file the database file's mode.
  if (!existsSync(path)) closeSync(openSync(path, 'a', 0o600));
  else chmodSync(path, 0o600);
  let db: Db;
  try {
    db = new Database(path, { fileMustExist: true });
  } catch (err) {
    throw new StoreOpenError(`cannot open the database ${path}: ${describe(err)}; ${WAY_OUT}`);
  }
  try {
    // Exclusive: this process is its only user (the lock says so), and the WAL index lives in
    // memory, so a commit costs one write of the WAL and no shared-memory file exists.
    db.pragma('locking_mode = EXCLUSIVE');
    const health = db.pragma('quick_check', { simple: true });
    if (health !== 'ok') {
      // quick_check's first row may itself hold many lines: one line for a person, its first problem.
      const problems = String(health)
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '' && !l.startsWith('***'));
      const first = problems[0] ?? 'quick_check failed';
      const more = problems.length > 1 ? ` and ${problems.length - 1} more` : '';
      throw new StoreOpenError(`the database ${path} is corrupt (${first}${more}); it was left as it is: move it aside, or ${WAY_OUT}`);
    }
    const version = Number(db.pragma('user_version', { simple: true }));
    if (version > SCHEMA_VERSION) {
      throw new StoreOpenError(
        `the database ${path} has schema version ${version}, newer than this subrun knows (${SCHEMA_VERSION}); run a newer subrun, or ${WAY_OUT}`,
      );
    }
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${fsync === 'full' ? 'FULL' : 'NORMAL'}`);
    // Checkpoints (the one step that fsyncs under NORMAL) run when the store is idle, never inside
    // a commit a reply waits for (sqlite.ts); the WAL file is cut back to 64 MiB after each.
    db.pragma('wal_autocheckpoint = 0');
    db.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
    db.pragma('foreign_keys = OFF');
    migrate(db, version);
  } catch (err) {
    db.close();
    if (err instanceof StoreOpenError) throw err;
    const code = errorCode(err);
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') {
      throw new StoreOpenError(`the database ${path} is corrupt (${code}); it was left as it is: move it aside, or ${WAY_OUT}`);
    }
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') throw new StoreOpenError(`the database ${path} is in use by another process; ${WAY_OUT}`);
    throw new StoreOpenError(`cannot open the database ${path}: ${describe(err)}; ${WAY_OUT}`);
  }
  for (const suffix of ['-wal', '-shm']) {
    try {
      chmodSync(`${path}${suffix}`, 0o600);
    } catch {
      // not there (yet): SQLite makes it with the database file's mode
    }
  }
  return db;
}

/** Takes the schema from `version` to SCHEMA_VERSION, one transaction per step. */
function migrate(db: Db, version: number): void {
  for (let v = version; v < SCHEMA_VERSION; v++) {
    const step = MIGRATIONS[v];
    if (step === undefined) break;
    db.transaction(() => {
      db.exec(step);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
}

/**
 * A database in memory, empty or from a snapshot (`Database.serialize()`): the working copy of a
 * store whose durable copy is elsewhere (the JetStream store, jetstream/open.ts).
 */
export function openMemoryDatabase(snapshot?: Buffer): Db {
  const db = snapshot ? new Database(snapshot) : new Database(':memory:');
  try {
    const version = Number(db.pragma('user_version', { simple: true }));
    if (version > SCHEMA_VERSION) {
      throw new StoreOpenError(`the stored snapshot has schema version ${version}, newer than this subrun knows (${SCHEMA_VERSION}); run a newer subrun`);
    }
    db.pragma('foreign_keys = OFF');
    migrate(db, version);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
