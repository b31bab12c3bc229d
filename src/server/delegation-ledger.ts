// The per-session record of delegations, for delegation.result: which delegations a session's
// children (at any depth) were dispatched under, and their entries as they complete. Fed from the
// runtime's owned events, for open sessions in their current generation only (the server filters).
//
// Bounds: a live delegation is never evicted (delegation.result is how a host recovers the entries
// of a delegation whose events it lost, so forgetting a running one would lose them for good). Its
// count needs no bound of its own: each live delegation has a live child, and a live child costs
// far more than its line here. Of the finished delegations, the MAX_FINISHED_PER_SESSION most
// recently finished are kept per session; a session that closes, or a generation that is reset,
// drops its lines at once.
import type { CompletionEntry, Owner } from '../types.ts';
import type { ServerStore } from '../store/types.ts';

interface DelegationRecord {
  readonly generation: number;
  readonly entries: Array<CompletionEntry | undefined>;
  done: boolean;
}

/** Finished delegations kept per session for delegation.result (documented in docs/protocol.md). */
export const MAX_FINISHED_PER_SESSION = 256;

class SessionLedger {
  readonly records = new Map<string, DelegationRecord>();
  /** Ids of the finished delegations, oldest first. */
  finished: string[] = [];
}

export class DelegationLedger {
  readonly #bySession = new Map<string, SessionLedger>();
  readonly #store: ServerStore | undefined;

  /** With a durable store, every line is written, and a line of an earlier process is read back from it. */
  constructor(store?: ServerStore) {
    this.#store = store?.durable ? store : undefined;
  }

  /** Brings a delegation of an earlier process back into memory (a restart settling its children). */
  restore(session_id: string, delegation_id: string): boolean {
    if (this.#bySession.get(session_id)?.records.has(delegation_id)) return true;
    const row = this.#store?.loadDelegation(delegation_id);
    if (!row || row.session_id !== session_id) return false;
    let session = this.#bySession.get(session_id);
    if (!session) this.#bySession.set(session_id, (session = new SessionLedger()));
    const entries = new Array<CompletionEntry | undefined>(row.count).fill(undefined);
    for (const e of row.entries) entries[e.task_index] = e;
    session.records.set(delegation_id, { generation: row.generation, entries, done: row.done });
    if (row.done) session.finished.push(delegation_id);
    return true;
  }

  /** Feed every owned event of an open session's current generation here. */
  observe(event: Record<string, unknown> & { type: string }, owner: Owner | undefined): void {
    if (!owner) return;
    const delegation_id = typeof event.delegation_id === 'string' ? event.delegation_id : undefined;
    if (!delegation_id) return;
    let session = this.#bySession.get(owner.session_id);
    if (event.type === 'delegation.dispatched') {
      if (!session) this.#bySession.set(owner.session_id, (session = new SessionLedger()));
      const count = typeof event.count === 'number' ? event.count : 0;
      session.records.set(delegation_id, { generation: owner.generation, entries: new Array<CompletionEntry | undefined>(count).fill(undefined), done: false });
      this.#store?.delegationDispatched({ delegation_id, session_id: owner.session_id, generation: owner.generation, count, done: false });
      return;
    }
    const record = session?.records.get(delegation_id);
    if (!session || !record) return;
    if (event.type === 'subagent.complete') {
      const entry = event.entry as CompletionEntry;
      record.entries[entry.task_index] = entry;
    } else if (event.type === 'delegation.complete' && !record.done) {
      record.done = true;
      session.finished.push(delegation_id);
      this.#store?.delegationDone(delegation_id);
      const dropped: string[] = [];
      for (let over = session.finished.length - MAX_FINISHED_PER_SESSION; over > 0; over--) {
        const oldest = session.finished.shift();
        if (oldest !== undefined) session.records.delete(oldest);
        if (oldest !== undefined) dropped.push(oldest);
      }
      if (dropped.length > 0) this.#store?.delegationsDropped(dropped);
    }
  }

  /** The delegation if this session (in this generation) spawned it. */
  get(session_id: string, generation: number, delegation_id: string): { done: boolean; results: CompletionEntry[] } | undefined {
    // A delegation of an earlier process (its session outlived a restart) is read from the store.
    if (!this.#bySession.get(session_id)?.records.has(delegation_id) && !this.restore(session_id, delegation_id)) return undefined;
    const r = this.#bySession.get(session_id)?.records.get(delegation_id);
    if (!r || r.generation !== generation) return undefined;
    return { done: r.done, results: r.entries.filter((e): e is CompletionEntry => e !== undefined) };
  }

  /** A delegation whose every entry is in but that is not done yet: its entries, to complete it (a restart settling its children). */
  completable(session_id: string, delegation_id: string): CompletionEntry[] | undefined {
    const r = this.#bySession.get(session_id)?.records.get(delegation_id);
    if (!r || r.done || r.entries.some((e) => e === undefined)) return undefined;
    return r.entries.filter((e): e is CompletionEntry => e !== undefined);
  }

  /** Drops every line of generations before `generation` (session.reset: out of reach for good). */
  retireBefore(session_id: string, generation: number): void {
    const session = this.#bySession.get(session_id);
    if (!session) return;
    const dropped: string[] = [];
    for (const [id, r] of session.records) {
      if (r.generation >= generation) continue;
      session.records.delete(id);
      if (r.done) dropped.push(id);
    }
    if (dropped.length > 0) this.#store?.delegationsDropped(dropped);
    session.finished = session.finished.filter((id) => session.records.has(id));
    if (session.records.size === 0) this.#bySession.delete(session_id);
  }

  forget(session_id: string): void {
    this.#bySession.delete(session_id);
  }

  /** Sessions with lines here, for tests and diagnostics. */
  get sessionCount(): number {
    return this.#bySession.size;
  }
}
