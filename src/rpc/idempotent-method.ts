// The method-table side of idempotent control (the store and its rules are idempotency.ts): wraps
// a method so a call with `idempotency_key` keeps and replays its first answer.
import type { CallContext, MethodDef } from './context.ts';
import { isThenable, type Keyed } from './idempotency.ts';

/** `{...result, idempotent_replay: true}`: how JSON-RPC marks a replayed answer. */
export function markReplay(value: unknown): unknown {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? { ...value, idempotent_replay: true } : value;
}

/** A method def that honours `idempotency_key`; `keyed` gives the HTTP layer the replay flag. */
export interface IdempotentMethodDef extends MethodDef {
  keyed(params: Record<string, unknown>, ctx: CallContext): Keyed;
}

/**
 * Wraps one method. A keyed call is first checked against the session as the method itself would
 * check it: a caller that may not use the session gets the method's own error, in its own order
 * (never another caller's kept answer).
 */
export function idempotent(method: string, def: MethodDef): IdempotentMethodDef {
  const keyed = (p: Record<string, unknown>, ctx: CallContext): Keyed => {
    const key = p.idempotency_key;
    if (typeof key !== 'string') return { value: def.handle(p, ctx), replayed: false };
    let session_id: string;
    try {
      session_id = ctx.server.sessions.authorize(p.session_id, ctx.transport).session_id;
    } catch {
      return { value: def.handle(p, ctx), replayed: false };
    }
    return ctx.server.idempotency.run(session_id, method, key, p, () => def.handle(p, ctx), (err) => ctx.server.logger.error({ err, method }, 'method failed'));
  };
  return {
    params: def.params,
    keyed,
    handle(p, ctx) {
      const r = keyed(p as Record<string, unknown>, ctx);
      if (!r.replayed) return r.value;
      // A repeat while the first answer is still pending: marked once it settles.
      return isThenable(r.value) ? Promise.resolve(r.value).then(markReplay) : markReplay(r.value);
    },
  };
}
