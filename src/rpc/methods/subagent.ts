// subagent.* : list, tail, steer, interrupt — hermes-agent's shapes, so its hosts work unchanged.
// A foreign, unknown or retired child gets the method's "not found" answer, revealing nothing.
import { defineMethod, type MethodDef } from '../context.ts';
import { RpcCode, RpcError } from '../errors.ts';
import { FlatJsonCache, JsonText } from '../json-text.ts';
import { paramsAccept, paramsSchemas } from '../../contract/wire.ts';
import type { Session } from '../sessions.ts';
import { requireId, requireSteerText } from './checks.ts';

/**
 * Each session's serialised snapshots, reused while a child's snapshot is unchanged. Hosts poll
 * subagent.list, and serialising the snapshots afresh was most of the server's time per call
 * (bench/cases/rpc-stdio.ts: 10 children, about 15 µs of JSON.stringify a call on Node 20). The
 * snapshots are still built fresh on every call and compared field by field, so a change shows at
 * once. Gone with the session.
 */
const listTexts = new WeakMap<Session, FlatJsonCache>();

function snapshotsText(session: Session, snapshots: readonly object[]): string {
  let cache = listTexts.get(session);
  if (cache === undefined) {
    cache = new FlatJsonCache();
    listTexts.set(session, cache);
  }
  return cache.array(snapshots, 'subagent_id');
}

export const subagentMethods: Record<string, MethodDef> = {
  'subagent.list': defineMethod(paramsSchemas['subagent.list'], (p, { server, transport }) => {
    const s = server.sessions.authorize(p.session_id, transport);
    const subagents = server.runtime.scoped.list(server.sessions.scopeOf(s), { include_finished: p.include_finished ?? false });
    // The bytes of JSON.stringify({ subagents, delegations: [] }).
    return new JsonText(`{"subagents":${snapshotsText(s, subagents)},"delegations":[]}`);
  }, paramsAccept['subagent.list']),

  'subagent.tail': defineMethod(paramsSchemas['subagent.tail'], (p, { server, transport }) => {
    const subagent_id = requireId(p.subagent_id, 'subagent_id');
    const s = server.sessions.authorize(p.session_id, transport);
    return server.runtime.scoped.tail(server.sessions.scopeOf(s), subagent_id, p.since);
  }),

  'subagent.steer': defineMethod(paramsSchemas['subagent.steer'], (p, { server, transport }) => {
    const subagent_id = requireId(p.subagent_id, 'subagent_id');
    const text = requireSteerText(p.text);
    const s = server.sessions.authorize(p.session_id, transport);
    const r = server.runtime.scoped.steer(server.sessions.scopeOf(s), subagent_id, text);
    // A full queue is an error, not `rejected`: the host must learn to wait, not that the child is gone.
    if (r.status === 'rejected' && r.reason === 'queue_full') throw new RpcError(RpcCode.SteerQueueFull, 'steer queue full');
    // The wire shape carries no `reason` (hermes compatibility) and never a `delivered` key.
    if (r.status !== 'queued') return { status: 'rejected', subagent_id, text: r.text };
    const queued = { status: 'queued', subagent_id, text: r.text, steer_id: r.steer_id };
    // A child on a remote worker: `queued` only once the steer is in its mailbox (publish ack).
    const committed = server.runtime.steerCommitted(subagent_id, r.steer_id);
    if (committed === undefined) return queued;
    return committed.then((ok) => {
      if (!ok) throw new RpcError(RpcCode.NatsUnavailable, 'NATS unavailable');
      return queued;
    });
  }),

  'subagent.interrupt': defineMethod(paramsSchemas['subagent.interrupt'], (p, { server, transport }) => {
    const subagent_id = requireId(p.subagent_id, 'subagent_id');
    const s = server.sessions.authorize(p.session_id, transport);
    return server.runtime.scoped.interrupt(server.sessions.scopeOf(s), subagent_id);
  }),
};
