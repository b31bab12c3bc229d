// What the server writes down and reads back (docs/durability.md). Two stores implement it: the
// SQLite store (durable) and the memory store (`--no-state`, and the default of the library),
// which keeps nothing and runs every after-commit callback at once, so a server without state
// behaves exactly as before this seam existed.
import type { ChildJournal, CompletionEntry } from '../types.ts';

export type { SteerState, StoredChild, StoredSteer } from '../types.ts';

export interface SessionRow {
  readonly session_id: string;
  readonly key_digest: Buffer;
  readonly title: string | undefined;
  readonly created_at: number;
  readonly generation: number;
  readonly close_on_disconnect: boolean;
  /** Its latest event's seq. */
  readonly seq: number;
  /** A parent turn (prompt.submit) was running: a restart ends it with message.complete `error`. */
  readonly turn_running: boolean;
}

export interface EventRow {
  readonly seq: number;
  readonly text: string;
}

export interface AnswerRow {
  readonly slot: string;
  readonly params: string;
  readonly expires: number;
  /** `{value}` or `{error: {code, message, data?}}`, as JSON. */
  readonly answer: string;
}

export interface DelegationRow {
  readonly delegation_id: string;
  readonly session_id: string;
  readonly generation: number;
  readonly count: number;
  readonly done: boolean;
}

/** What a start found and settled, for gateway.ready and server.info. */
export interface Recovered {
  readonly sessions: number;
  readonly children_settled: number;
  readonly steers_missed: number;
}

export interface StoreStats {
  readonly path: string;
  readonly bytes: number;
  readonly schema_version: number;
  readonly sessions: number;
  readonly events: number;
  readonly children: number;
  readonly unfinished_children: number;
  readonly steers: number;
  readonly delegations: number;
  readonly answers: number;
}

export interface ServerStore extends ChildJournal {
  /** True for a store that outlives the process. */
  readonly durable: boolean;
  /** The state directory's replay epoch: stable across its restarts. Undefined: memory. */
  readonly replay_epoch: string | undefined;
  /**
   * Runs `deliver` once everything queued so far is committed (at once when nothing is pending):
   * how "nothing is sent before it is persisted" is kept without a commit per event.
   */
  afterCommit(deliver: () => void): void;
  /**
   * Resolves once everything committed so far is durable; undefined when it already is (a local
   * commit is durable in SQLite; a JetStream store's is once stored there). Rejects with
   * StoreUnavailableError if storing fails meanwhile (what it waited for is retried and stands).
   */
  settled(): Promise<void> | undefined;

  sessionSaved(row: SessionRow): void;
  sessionClosed(session_id: string): void;
  turnRunning(session_id: string, running: boolean): void;
  eventAppended(session_id: string, seq: number, text: string): void;
  /** Events of the session up to `seq` left its ring. */
  eventsEvicted(session_id: string, seq: number): void;
  answerKept(session_id: string, row: AnswerRow): void;
  answerDropped(session_id: string, slot: string): void;
  delegationDispatched(row: DelegationRow): void;
  delegationDone(delegation_id: string): void;
  /** Finished delegations the ledger let go of (its bound, or a reset): with their children. */
  delegationsDropped(delegation_ids: readonly string[]): void;

  loadSessions(): SessionRow[];
  loadEvents(session_id: string): EventRow[];
  loadAnswers(session_id: string): AnswerRow[];
  /** Delegations not done: the last process may have died between a last entry and its delegation.complete. */
  openDelegations(): DelegationRow[];
  loadDelegation(delegation_id: string): (DelegationRow & { readonly entries: CompletionEntry[] }) | undefined;
  stats(): StoreStats | undefined;
  close(): void;
}
