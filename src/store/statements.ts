// Every statement the SQLite store runs, prepared once, and the mapping of a child's row back to
// what the runtime knows of it.
import type { Statement } from 'better-sqlite3';
import { childStatusSchema, completionEntrySchema } from '../contract/entities.ts';
import type { CompletionEntry, JournaledChild } from '../types.ts';
import type { Db } from './open.ts';
import type { AnswerRow, EventRow, SteerState, StoredChild, StoredSteer } from './types.ts';

export interface SessionRowData {
  session_id: string;
  key_digest: Buffer;
  title: string | null;
  created_at: number;
  generation: number;
  close_on_disconnect: number;
  seq: number;
  turn_running: number;
}

export interface ChildRowData {
  subagent_id: string;
  session_id: string | null;
  generation: number | null;
  parent_id: string | null;
  depth: number;
  delegation_id: string;
  task_index: number;
  task_count: number;
  goal: string;
  context: string | null;
  agent: string;
  model: string;
  timeout_ms: number | null;
  revived_from: string | null;
  status: string;
  started_at: number | null;
  finished_at: number | null;
  entry: string | null;
  tail: string;
  checkpoint: string | null;
  revived_to: string | null;
}

interface SteerRowData {
  steer_id: string;
  seq: number;
  text: string;
  state: string;
  requeued_from: string | null;
}

interface DelegationRowData {
  delegation_id: string;
  session_id: string;
  generation: number;
  count: number;
  done: number;
}

/** A statement that changes the database: all a commit (or a replay of one) needs of it. */
export interface Write {
  run(...args: unknown[]): unknown;
}

/** Told of every write as it runs, by name (the JetStream state log ships them: jetstream/log.ts). */
export type Recorder = (name: string, args: readonly unknown[]) => void;

export interface Statements {
  readonly getMeta: Statement<[string], string>;
  readonly setMeta: Write;
  readonly sessionSaved: Write;
  readonly sessionSeq: Write;
  readonly turnRunning: Write;
  readonly closedSteers: Write;
  readonly closedChildren: Write;
  readonly closedEvents: Write;
  readonly closedAnswers: Write;
  readonly closedDelegations: Write;
  readonly closedSession: Write;
  readonly eventAppended: Write;
  readonly evictEvents: Write;
  readonly answerKept: Write;
  readonly answerDropped: Write;
  readonly delegationDispatched: Write;
  readonly delegationDone: Write;
  readonly droppedSteers: Write;
  readonly droppedChildren: Write;
  readonly droppedDelegation: Write;
  readonly childSpawned: Write;
  readonly childStarted: Write;
  readonly childProgress: Write;
  readonly childFinished: Write;
  readonly childRevived: Write;
  readonly childOfClosedDropped: Write;
  readonly ownerlessPruned: Write;
  readonly steerAccepted: Write;
  readonly steerState: Write;
  readonly steerDropped: Write;
  readonly steersOfChildDropped: Write;
  readonly sessions: Statement<[], SessionRowData>;
  readonly events: Statement<[string], EventRow>;
  readonly answers: Statement<[string], AnswerRow>;
  readonly delegation: Statement<[string], DelegationRowData>;
  readonly openDelegations: Statement<[], DelegationRowData>;
  readonly delegationEntries: Statement<[string], string>;
  readonly unfinished: Statement<[], ChildRowData>;
  readonly child: Statement<[string], ChildRowData>;
  readonly delegationChildren: Statement<[string], ChildRowData>;
  readonly steersOf: Statement<[string], SteerRowData>;
  /** Every write by its name, for replaying recorded ones. */
  readonly writes: ReadonlyMap<string, Write>;
}

export function statements(db: Db, record?: Recorder): Statements {
  const writes = new Map<string, Write>();
  const run = (name: string, sql: string): Write => {
    const stmt = db.prepare(sql);
    const write: Write = record
      ? {
          run: (...args) => {
            record(name, args);
            return stmt.run(...args);
          },
        }
      : stmt;
    writes.set(name, stmt);
    return write;
  };
  const ofClosedSession = 'SELECT subagent_id FROM children WHERE session_id = ? AND entry IS NOT NULL';
  const ofDelegation = 'SELECT subagent_id FROM children WHERE delegation_id = ? AND entry IS NOT NULL';
  return {
    getMeta: db.prepare<[string], string>('SELECT value FROM meta WHERE key = ?'),
    setMeta: run('setMeta', 'INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
    sessionSaved: run(
      'sessionSaved',
      `INSERT INTO sessions (session_id, key_digest, title, created_at, generation, close_on_disconnect, seq) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET generation = excluded.generation, close_on_disconnect = excluded.close_on_disconnect`,
    ),
    sessionSeq: run('sessionSeq', 'UPDATE sessions SET seq = ? WHERE session_id = ?'),
    turnRunning: run('turnRunning', 'UPDATE sessions SET turn_running = ? WHERE session_id = ?'),
    closedSteers: run('closedSteers', `DELETE FROM steers WHERE subagent_id IN (${ofClosedSession})`),
    closedChildren: run('closedChildren', 'DELETE FROM children WHERE session_id = ? AND entry IS NOT NULL'),
    closedEvents: run('closedEvents', 'DELETE FROM events WHERE session_id = ?'),
    closedAnswers: run('closedAnswers', 'DELETE FROM answers WHERE session_id = ?'),
    closedDelegations: run('closedDelegations', 'DELETE FROM delegations WHERE session_id = ?'),
    closedSession: run('closedSession', 'DELETE FROM sessions WHERE session_id = ?'),
    eventAppended: run('eventAppended', 'INSERT OR REPLACE INTO events (session_id, seq, text) VALUES (?, ?, ?)'),
    evictEvents: run('evictEvents', 'DELETE FROM events WHERE session_id = ? AND seq <= ?'),
    answerKept: run('answerKept', 'INSERT OR REPLACE INTO answers (session_id, slot, params, expires, answer) VALUES (?, ?, ?, ?, ?)'),
    answerDropped: run('answerDropped', 'DELETE FROM answers WHERE session_id = ? AND slot = ?'),
    delegationDispatched: run(
      'delegationDispatched',
      'INSERT OR REPLACE INTO delegations (delegation_id, session_id, generation, count, done) VALUES (?, ?, ?, ?, ?)',
    ),
    delegationDone: run('delegationDone', 'UPDATE delegations SET done = 1 WHERE delegation_id = ?'),
    droppedSteers: run('droppedSteers', `DELETE FROM steers WHERE subagent_id IN (${ofDelegation})`),
    droppedChildren: run('droppedChildren', 'DELETE FROM children WHERE delegation_id = ? AND entry IS NOT NULL'),
    droppedDelegation: run('droppedDelegation', 'DELETE FROM delegations WHERE delegation_id = ?'),
    childSpawned: run(
      'childSpawned',
      `INSERT OR REPLACE INTO children (subagent_id, session_id, generation, parent_id, depth, delegation_id, task_index, task_count, goal, context,
       agent, model, timeout_ms, revived_from, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued')`,
    ),
    childStarted: run('childStarted', "UPDATE children SET status = 'running', started_at = ? WHERE subagent_id = ?"),
    childProgress: run('childProgress', 'UPDATE children SET tail = ?, checkpoint = coalesce(?, checkpoint) WHERE subagent_id = ?'),
    childFinished: run('childFinished', 'UPDATE children SET status = ?, finished_at = ?, entry = ? WHERE subagent_id = ?'),
    childRevived: run('childRevived', 'UPDATE children SET revived_to = ? WHERE subagent_id = ?'),
    // A child of a session that closed while it finished is let go with it.
    childOfClosedDropped: run(
      'childOfClosedDropped',
      'DELETE FROM children WHERE subagent_id = ? AND session_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = children.session_id)',
    ),
    ownerlessPruned: run(
      'ownerlessPruned',
      `DELETE FROM children WHERE session_id IS NULL AND entry IS NOT NULL AND subagent_id NOT IN
       (SELECT subagent_id FROM children WHERE session_id IS NULL AND entry IS NOT NULL ORDER BY finished_at DESC LIMIT ?)`,
    ),
    steerAccepted: run(
      'steerAccepted',
      'INSERT OR REPLACE INTO steers (steer_id, subagent_id, seq, text, state, accepted_at, requeued_from) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    steerState: run('steerState', 'UPDATE steers SET state = ? WHERE subagent_id = ? AND steer_id = ?'),
    steerDropped: run('steerDropped', 'DELETE FROM steers WHERE subagent_id = ? AND steer_id = ?'),
    steersOfChildDropped: run('steersOfChildDropped', 'DELETE FROM steers WHERE subagent_id = ?'),
    sessions: db.prepare<[], SessionRowData>('SELECT * FROM sessions'),
    events: db.prepare<[string], EventRow>('SELECT seq, text FROM events WHERE session_id = ? ORDER BY seq'),
    answers: db.prepare<[string], AnswerRow>('SELECT slot, params, expires, answer FROM answers WHERE session_id = ? ORDER BY expires'),
    delegation: db.prepare<[string], DelegationRowData>('SELECT * FROM delegations WHERE delegation_id = ?'),
    openDelegations: db.prepare<[], DelegationRowData>('SELECT * FROM delegations WHERE done = 0'),
    delegationEntries: db.prepare<[string], string>('SELECT entry FROM children WHERE delegation_id = ? AND entry IS NOT NULL ORDER BY task_index'),
    unfinished: db.prepare<[], ChildRowData>('SELECT * FROM children WHERE entry IS NULL ORDER BY depth DESC'),
    child: db.prepare<[string], ChildRowData>('SELECT * FROM children WHERE subagent_id = ?'),
    delegationChildren: db.prepare<[string], ChildRowData>('SELECT * FROM children WHERE delegation_id = ? ORDER BY task_index'),
    steersOf: db.prepare<[string], SteerRowData>('SELECT steer_id, seq, text, state, requeued_from FROM steers WHERE subagent_id = ? ORDER BY seq'),
    writes,
  };
}

function agentOf(text: string): JournaledChild['agent'] {
  const parsed: unknown = JSON.parse(text);
  if (parsed === 'default' || parsed === 'object') return parsed;
  return typeof parsed === 'object' && parsed !== null && 'spec' in parsed ? { spec: parsed.spec } : 'object';
}

/** An entry as written (the contract's shape, checked on the way back in). */
export function parseEntry(text: string): CompletionEntry {
  return completionEntrySchema.parse(JSON.parse(text));
}

function steerState(state: string): SteerState {
  return state === 'taken' || state === 'delivered' ? state : 'queued';
}

function parseJson(text: string | null): unknown {
  return text === null ? undefined : JSON.parse(text);
}

export function childFromRow(r: ChildRowData, steers: readonly SteerRowData[]): StoredChild {
  return {
    subagent_id: r.subagent_id,
    parent_id: r.parent_id,
    depth: r.depth,
    delegation_id: r.delegation_id,
    task_index: r.task_index,
    task_count: r.task_count,
    goal: r.goal,
    context: r.context ?? undefined,
    agent: agentOf(r.agent),
    model: r.model,
    owner: r.session_id === null ? undefined : { session_id: r.session_id, transport: 'restored', generation: r.generation ?? 0 },
    timeout_ms: r.timeout_ms ?? undefined,
    revived_from: r.revived_from ?? undefined,
    status: childStatusSchema.parse(r.status),
    started_at: r.started_at,
    entry: r.entry === null ? undefined : parseEntry(r.entry),
    tail: r.tail,
    checkpoint: parseJson(r.checkpoint),
    revived_to: r.revived_to ?? undefined,
    steers: steers.map((s): StoredSteer => ({
      steer_id: s.steer_id,
      seq: s.seq,
      text: s.text,
      state: steerState(s.state),
      requeued_from: s.requeued_from ?? undefined,
    })),
  };
}
