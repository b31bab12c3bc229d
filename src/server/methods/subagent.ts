// subagent.* : list, tail, steer, interrupt — hermes-agent's shapes, so its hosts work unchanged.
// A foreign, unknown or retired child gets the method's "not found" answer, revealing nothing.
import { steerTextProblem } from '../../contract/methods.ts';
import { RpcCode, RpcError } from '../errors.ts';
import { FlatJsonCache, JsonText } from '../json-text.ts';
import type { Session } from '../sessions.ts';
import { defineMethod, type SteerAnswer } from './define.ts';
import { withProps } from '../../shapes.ts';

/** Each session's serialised snapshots, reused while a child's snapshot is unchanged (docs/benchmarks.md). Gone with the session. */
const listTexts = new WeakMap<Session, FlatJsonCache>();

function snapshotsText(session: Session, snapshots: readonly Readonly<Record<string, unknown>>[]): string {
  let cache = listTexts.get(session);
  if (cache === undefined) {
    cache = new FlatJsonCache();
    listTexts.set(session, cache);
  }
  return cache.array(snapshots, 'subagent_id');
}

export const subagentMethods = {
  'subagent.list': defineMethod(
    'subagent.list',
    (p, { sessions, runtime }, transport) => {
      const s = sessions.authorize(p.session_id, transport);
      const subagents = runtime.scoped.list(sessions.scopeOf(s), { include_finished: p.include_finished ?? false });
      // The bytes of JSON.stringify({ subagents, delegations: [] }).
      return new JsonText(`{"subagents":${snapshotsText(s, subagents)},"delegations":[]}`);
    },
    { accepts: (p): p is { session_id: unknown; include_finished?: boolean } => p.include_finished === undefined || typeof p.include_finished === 'boolean' },
  ),

  'subagent.tail': defineMethod('subagent.tail', (p, { sessions, runtime }, transport) => {
    const s = sessions.authorize(p.session_id, transport);
    return runtime.scoped.tail(sessions.scopeOf(s), p.subagent_id, p.since);
  }),

  'subagent.steer': defineMethod(
    'subagent.steer',
    (p, { sessions, runtime }, transport) => {
      const s = sessions.authorize(p.session_id, transport);
      const scope = sessions.scopeOf(s);
      const r = runtime.scoped.steer(scope, p.subagent_id, p.text);
      // A full queue is an error, not `rejected`: the host must learn to wait, not that the child is gone.
      if (r.status === 'rejected' && r.reason === 'queue_full') throw new RpcError(RpcCode.SteerQueueFull, 'steer queue full');
      // The steer could not be written: it was taken back, and the host hears why (docs/durability.md).
      if (r.status === 'rejected' && r.reason === 'store_unavailable') throw new RpcError(RpcCode.StoreUnavailable, 'store unavailable');
      if (r.status !== 'queued') {
        // The text rules ran in the params schema (4002, 4003): what is left is the registry's word.
        const reason = r.reason === 'finished' || r.reason === 'vetoed' ? r.reason : 'not_found';
        return { status: 'rejected', subagent_id: p.subagent_id, text: r.text, reason } satisfies SteerAnswer;
      }
      const queued = { status: 'queued', subagent_id: p.subagent_id, text: r.text, steer_id: r.steer_id } as const;
      // A child on a remote worker: `queued` only once the steer is in its mailbox (publish ack).
      const committed = runtime.steerCommitted(p.subagent_id, r.steer_id);
      if (committed === undefined) return queued;
      return committed.then((fate) => {
        if (fate === 'refused') throw new RpcError(RpcCode.NatsUnavailable, 'NATS unavailable');
        // The publish ack was lost (an outage): not an error, since the steer may take effect; the
        // host hears that it is accounted like any queued steer and may reconcile it later.
        return fate === 'uncertain' ? withProps(queued, { uncertain: true as const }) : queued;
      });
    },
    {
      idempotent: true,
      writes: true,
      // The steer is the call hosts make most: params the schema would pass through unchanged
      // (an id, text already trimmed and within bounds, no key) skip its copy (bench: http.steer).
      accepts: (p): p is { session_id: unknown; subagent_id: string; text: string } =>
        typeof p.subagent_id === 'string' &&
        p.subagent_id.trim() !== '' &&
        typeof p.text === 'string' &&
        p.text.trim() === p.text &&
        steerTextProblem(p.text) === undefined &&
        p.idempotency_key === undefined,
    },
  ),

  // A child the last process lost (error / server_restart, or worker_lost) continues as a new
  // child from its last checkpoint (docs/durability.md, "Revive"); explicit only, never automatic.
  'subagent.revive': defineMethod(
    'subagent.revive',
    (p, { sessions, runtime }, transport) => {
      const s = sessions.authorize(p.session_id, transport);
      const r = runtime.revive(p.subagent_id, {
        scope: sessions.scopeOf(s),
        owner: { session_id: s.session_id, transport, generation: s.generation },
        ...(p.text !== undefined ? { text: p.text } : {}),
        requeue_missed: p.requeue_missed ?? true,
      });
      r.handle.results.catch(() => undefined);
      return { subagent_id: r.subagent_id, revived_from: r.revived_from, delegation_id: r.handle.delegation_id, requeued: [...r.requeued] };
    },
    { idempotent: true, writes: true },
  ),

  'subagent.interrupt': defineMethod(
    'subagent.interrupt',
    (p, { sessions, runtime }, transport) => {
      const s = sessions.authorize(p.session_id, transport);
      return runtime.scoped.interrupt(sessions.scopeOf(s), p.subagent_id);
    },
    { idempotent: true, writes: true },
  ),
} as const;
