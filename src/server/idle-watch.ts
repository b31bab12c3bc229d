// session.idle: a session that had live children has none left and every completion was sent.
// Counted from the events the server routes (an open session's current generation only): each
// child spawned is open until its subagent.complete, each delegation until its delegation.complete
// (which follows its children's). When both counts fall back to zero the tree is quiet. A reset
// starts the counts again: the retired generation's events are never routed.
import type { Session } from './sessions.ts';

interface Counts {
  generation: number;
  children: number;
  delegations: number;
}

export class IdleWatch {
  readonly #counts = new WeakMap<Session, Counts>();

  /** Feed each routed event's type after it went out; true when `session.idle` is due now. */
  observe(session: Session, type: string): boolean {
    let c = this.#counts.get(session);
    if (!c || c.generation !== session.generation) {
      if (type !== 'subagent.spawn_requested' && type !== 'delegation.dispatched') return false;
      c = { generation: session.generation, children: 0, delegations: 0 };
      this.#counts.set(session, c);
    }
    switch (type) {
      case 'subagent.spawn_requested':
        c.children += 1;
        return false;
      case 'delegation.dispatched':
        c.delegations += 1;
        return false;
      case 'subagent.complete':
        c.children = Math.max(0, c.children - 1);
        break;
      case 'delegation.complete':
        c.delegations = Math.max(0, c.delegations - 1);
        break;
      default:
        return false;
    }
    if (c.children > 0 || c.delegations > 0) return false;
    this.#counts.delete(session);
    return true;
  }
}
