// The database's schema, versioned with PRAGMA user_version and migrated forward only: each entry
// of MIGRATIONS takes the schema from its index to the next version. A database of a newer version
// than this code knows is refused (a downgrade must never rewrite what a newer subrun wrote).
//
// What each table holds (docs/durability.md, "What is written, and when"):
// - meta: the state directory's replay epoch (stable across restarts of one directory).
// - sessions: one row per open session; its key only as a SHA-256 digest; seq = its latest event.
// - events: each session's replay ring as sent (the envelope text), pruned with the ring.
// - children: every child from spawn to entry; its tail and runner checkpoint; revived_to once revived.
// - steers: the steers of children not yet finished (a finished child's are in its entry), one
//   B-tree keyed by child: a steer's commit writes as few pages as it can (docs/benchmarks.md).
// - delegations: what delegation.result answers (the entries are the children's).
// - answers: idempotency keys and the first answer each got.

/** The schema this code writes. */
export const SCHEMA_VERSION = 1;

export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    key_digest BLOB NOT NULL,
    title TEXT,
    created_at REAL NOT NULL,
    generation INTEGER NOT NULL,
    close_on_disconnect INTEGER NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0,
    turn_running INTEGER NOT NULL DEFAULT 0
  ) WITHOUT ROWID;
  CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID;
  CREATE TABLE children (
    subagent_id TEXT PRIMARY KEY,
    session_id TEXT,
    generation INTEGER,
    parent_id TEXT,
    depth INTEGER NOT NULL,
    delegation_id TEXT NOT NULL,
    task_index INTEGER NOT NULL,
    task_count INTEGER NOT NULL,
    goal TEXT NOT NULL,
    context TEXT,
    agent TEXT NOT NULL,
    model TEXT NOT NULL,
    timeout_ms INTEGER,
    revived_from TEXT,
    status TEXT NOT NULL,
    started_at REAL,
    finished_at REAL,
    entry TEXT,
    tail TEXT NOT NULL DEFAULT '',
    checkpoint TEXT,
    revived_to TEXT
  );
  CREATE INDEX children_delegation ON children (delegation_id);
  CREATE INDEX children_session ON children (session_id);
  CREATE INDEX children_unfinished ON children (depth) WHERE entry IS NULL;
  CREATE TABLE steers (
    subagent_id TEXT NOT NULL,
    steer_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    accepted_at REAL NOT NULL,
    requeued_from TEXT,
    PRIMARY KEY (subagent_id, steer_id)
  ) WITHOUT ROWID;
  CREATE TABLE delegations (
    delegation_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    count INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0
  ) WITHOUT ROWID;
  CREATE INDEX delegations_session ON delegations (session_id);
  CREATE TABLE answers (
    session_id TEXT NOT NULL,
    slot TEXT NOT NULL,
    params TEXT NOT NULL,
    expires INTEGER NOT NULL,
    answer TEXT NOT NULL,
    PRIMARY KEY (session_id, slot)
  ) WITHOUT ROWID;
  `,
];
