// The per-session record of delegations, for delegation.result: which delegations a session's
// children (at any depth) were dispatched under, and their entries as they complete. Fed from the
// runtime's owned events; bounded per session so a long-lived session cannot grow it forever.
import type { CompletionEntry, Owner } from '../delegation/types.ts';

interface DelegationRecord {
  readonly generation: number;
  readonly entries: Array<CompletionEntry | undefined>;
  done: boolean;
}

const MAX_PER_SESSION = 256;

export class DelegationLedger {
  readonly #bySession = new Map<string, Map<string, DelegationRecord>>();

  /** Feed every owned event here. */
  observe(event: Record<string, unknown> & { type: string }, owner: Owner | undefined): void {
    if (!owner) return;
    const delegation_id = typeof event.delegation_id === 'string' ? event.delegation_id : undefined;
    if (!delegation_id) return;
    let session = this.#bySession.get(owner.session_id);
    if (event.type === 'delegation.dispatched') {
      if (!session) this.#bySession.set(owner.session_id, (session = new Map()));
      const count = typeof event.count === 'number' ? event.count : 0;
      session.set(delegation_id, { generation: owner.generation, entries: new Array(count).fill(undefined), done: false });
      while (session.size > MAX_PER_SESSION) {
        const oldest = session.keys().next().value;
        if (oldest === undefined) break;
        session.delete(oldest);
      }
      return;
    }
    const record = session?.get(delegation_id);
    if (!record) return;
    if (event.type === 'subagent.complete') {
      const entry = event.entry as CompletionEntry;
      record.entries[entry.task_index] = entry;
    } else if (event.type === 'delegation.complete') {
      record.done = true;
    }
  }

  /** The delegation if this session (in this generation) spawned it. */
  get(session_id: string, generation: number, delegation_id: string): { done: boolean; results: CompletionEntry[] } | undefined {
    const r = this.#bySession.get(session_id)?.get(delegation_id);
    if (!r || r.generation !== generation) return undefined;
    return { done: r.done, results: r.entries.filter((e): e is CompletionEntry => e !== undefined) };
  }

  forget(session_id: string): void {
    this.#bySession.delete(session_id);
  }
}
