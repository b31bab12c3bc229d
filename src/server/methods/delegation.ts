// delegation.* : spawn, result, status, pause.
import type { Services } from '../context.ts';
import type { TaskSpec } from '../../types.ts';
import type { Session } from '../sessions.ts';
import { RpcCode, RpcError } from '../errors.ts';
import { defineMethod } from './define.ts';
import { withProps } from '../../shapes.ts';

/** The named session (4001 unless attached), or, when none is named, every session in reach. */
function targets(session_id: unknown, server: Services, transport: string): Session[] {
  if (session_id === undefined || session_id === null) return server.sessions.sessionsFor(transport);
  return [server.sessions.authorize(session_id, transport)];
}

export const delegationMethods = {
  'delegation.spawn': defineMethod(
    'delegation.spawn',
    (p, server, transport) => {
      const s = server.sessions.authorize(p.session_id, transport);
      if (server.draining) throw new RpcError(RpcCode.ShuttingDown, 'server is shutting down');
      if (server.runtime.isPaused(s.session_id)) throw new RpcError(RpcCode.SpawnPaused, 'spawning is paused');
      // Only the JSON fields of a task cross the wire; a `runner` key is not a way in.
      const tasks = p.tasks.map((t) => (typeof t === 'object' && t !== null && !Array.isArray(t) ? withProps(t, { runner: undefined }) : t));
      // The runtime checks every task itself (InvalidTasks, as for a library caller in plain JS).
      const handle = server.runtime.delegate(tasks as readonly TaskSpec[], {
        timeout_ms: p.timeout_ms,
        owner: { session_id: s.session_id, transport, generation: s.generation },
      });
      // The entries arrive as events and through delegation.result; nobody awaits this promise.
      handle.results.catch(() => undefined);
      return { status: 'dispatched' as const, delegation_id: handle.delegation_id, subagent_ids: [...handle.subagent_ids], count: handle.subagent_ids.length };
    },
    { idempotent: true, writes: true },
  ),

  'delegation.result': defineMethod('delegation.result', (p, server, transport) => {
    const { delegation_id } = p;
    const s = server.sessions.authorize(p.session_id, transport);
    const d = server.ledger.get(s.session_id, s.generation, delegation_id);
    if (!d) throw new RpcError(RpcCode.DelegationNotFound, 'delegation not found');
    return { delegation_id, done: d.done, results: d.results };
  }),

  // With a session: that session. Without one (hermes calls both with `{}`): every session the
  // transport is attached to, or every session of the server in single-user mode; `paused` is
  // true only if there is one and all of them are.
  'delegation.status': defineMethod('delegation.status', (p, server, transport) => {
    const sessions = targets(p.session_id, server, transport);
    return {
      active: sessions.flatMap((s) => server.runtime.scoped.list(server.sessions.scopeOf(s))),
      paused: sessions.length > 0 && sessions.every((s) => server.runtime.isPaused(s.session_id)),
      max_spawn_depth: server.limits.max_spawn_depth,
      max_concurrent_children: server.limits.max_concurrent_children,
    };
  }),

  'delegation.pause': defineMethod('delegation.pause', (p, server, transport) => {
    const sessions = targets(p.session_id, server, transport);
    const paused = p.paused ?? true;
    for (const s of sessions) server.runtime.setPaused(s.session_id, paused);
    return { paused };
  }),
} as const;
