// A start on a state directory, before anything listens (docs/durability.md, "Start"): what the
// last process left open is closed, and each session is told in its own ring, so a host that
// replays its gap hears it like any other event:
// - every child it lost, settled by the runtime (descendants first): its subagent.complete;
// - every delegation whose children are now all settled: its delegation.complete;
// - every parent turn that was running: message.complete with status `error`;
// - session.idle for each session that had children in flight.
import type { SettledChild } from '../delegation/recover.ts';
import type { DelegationRow, Recovered, SessionRow } from '../store/types.ts';
import type { Owner } from '../types.ts';
import type { DelegationLedger } from './delegation-ledger.ts';
import type { Session, SessionStore } from './sessions.ts';

export const RESTART_TURN_ERROR = 'the server stopped while this turn ran';

interface ReconcileDeps {
  readonly settled: readonly SettledChild[];
  /** Delegations the store has not seen done (with or without a child settled now). */
  readonly open: readonly DelegationRow[];
  readonly restored: readonly SessionRow[];
  readonly sessions: SessionStore;
  readonly ledger: DelegationLedger;
  /** Numbers, writes and routes one runtime-shaped event of the session (the hub's own path). */
  readonly route: (session: Session, event: Record<string, unknown> & { type: string }) => void;
  /** Records a runtime-shaped event in the ledger (what delegation.result answers). */
  readonly observe: (event: Record<string, unknown> & { type: string }, owner: Owner) => void;
}

export function reconcile(d: ReconcileDeps): Recovered {
  const quietened = new Set<Session>();
  const delegations = new Map<string, { session: Session; owner: Owner }>();
  let steers_missed = 0;
  for (const { child, entry, steers_missed: missed } of d.settled) {
    steers_missed += missed;
    const owner = child.owner;
    const session = owner ? d.sessions.get(owner.session_id) : undefined;
    // A child of a session that closed, or of a generation that was reset, is settled unheard.
    if (!owner || !session || session.generation !== owner.generation) continue;
    d.ledger.restore(session.session_id, child.delegation_id);
    const identity = {
      subagent_id: child.subagent_id,
      parent_id: child.parent_id,
      depth: child.depth,
      delegation_id: child.delegation_id,
      task_index: child.task_index,
      task_count: child.task_count,
      goal: child.goal,
      model: child.model,
      tool_count: entry.tool_trace.length,
    };
    d.observe({ type: 'subagent.complete', ...identity, entry }, owner);
    // The wire's shape: the entry flat beside the identity (wire-events.ts).
    d.route(session, { type: 'subagent.complete', ...identity, entry });
    delegations.set(child.delegation_id, { session, owner });
    quietened.add(session);
  }
  // A delegation whose last entry was written but whose delegation.complete was not.
  for (const row of d.open) {
    const session = d.sessions.get(row.session_id);
    if (!session || session.generation !== row.generation || delegations.has(row.delegation_id)) continue;
    if (!d.ledger.restore(session.session_id, row.delegation_id)) continue;
    delegations.set(row.delegation_id, { session, owner: { session_id: session.session_id, transport: 'restored', generation: session.generation } });
  }
  for (const [delegation_id, { session, owner }] of delegations) {
    const results = d.ledger.completable(session.session_id, delegation_id);
    if (!results) continue;
    d.observe({ type: 'delegation.complete', delegation_id, results }, owner);
    d.route(session, { type: 'delegation.complete', delegation_id, results });
    quietened.add(session);
  }
  for (const row of d.restored) {
    const session = d.sessions.get(row.session_id);
    if (!row.turn_running || !session) continue;
    d.route(session, {
      type: 'message.complete',
      turn_id: 'turn_restored',
      status: 'error',
      text: '',
      error: RESTART_TURN_ERROR,
      api_calls: 0,
      tokens: { input: 0, output: 0 },
      usage: { input: 0, output: 0, total: 0, calls: 0 },
    });
    quietened.add(session);
  }
  for (const session of quietened) d.route(session, { type: 'session.idle', session_id: session.session_id, generation: session.generation });
  return { sessions: d.restored.length, children_settled: d.settled.length, steers_missed };
}
