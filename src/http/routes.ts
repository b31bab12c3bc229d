// The resources of /v1/: each one a translation of a JSON-RPC method, run through the server's own
// dispatch (ServerHub#invoke) as a call from a transport attached to the session for this one
// request. So authority, limits, errors and idempotency are the JSON-RPC ones; only the framing
// and the status codes are HTTP's. A request names its session in the path and proves it with the
// session key; anything not the caller's is the same 404.
import { RpcCode, RpcError } from '../server/errors.ts';
import { IDEMPOTENCY_TTL_MS, MAX_KEPT_BYTES_PER_SESSION, MAX_KEYS_PER_SESSION } from '../server/idempotency.ts';
import type { Keyed } from '../server/idempotency.ts';
import type { ServerHub } from '../server/hub.ts';
import type { Session } from '../server/sessions.ts';
import type { MethodName } from '../contract/methods.ts';
import { PROTOCOL_VERSION } from '../contract/entities.ts';
import { JsonText } from '../server/json-text.ts';
import { settle, type AnswerOf, type HandledOf, type SettledOf } from '../server/methods/table.ts';
import { SERVER_NAME, VERSION } from '../version.ts';
import { answer, errorAnswer, HttpCode, httpError, notFound, type Answer } from './respond.ts';
import { cursorOf, type SseHub } from './sse.ts';
import type { Call, Route, Target } from './route-table.ts';
import { withProps } from '../shapes.ts';

/** The longest `?wait=` on a delegation, in seconds. */
export const MAX_WAIT_SECONDS = 60;

export interface RouteDeps {
  readonly server: ServerHub;
  readonly sse: SseHub;
  readonly features: () => Record<string, boolean>;
  readonly max_outbound_bytes: number;
}

/** The session key of a request: the header, or on GET the query (an EventSource sets no header). */
function keyOf(call: Call): string | undefined {
  const h = call.req.headers['x-subrun-session-key'];
  if (typeof h === 'string') return h;
  return call.req.method === 'GET' ? (call.url.searchParams.get('session_key') ?? undefined) : undefined;
}

function idempotencyKeyOf(call: Call): string | undefined {
  const h = call.req.headers['idempotency-key'];
  return typeof h === 'string' ? h : undefined;
}

const boolQuery = (url: Target, name: string): boolean | undefined | 'bad' => {
  const v = url.searchParams.get(name);
  if (v === null) return undefined;
  if (v === 'true') return true;
  if (v === 'false') return false;
  return 'bad';
};

/** A path parameter of the matched route ('' if the route has none of that name: nothing matches it). */
const param = (call: Call, name: 'sid' | 'cid' | 'did'): string => call.params[name] ?? '';

/** A call's settled answer, and the session it ran in. */
interface Invoked<M extends MethodName> {
  readonly keyed: Keyed<SettledOf<M>>;
  readonly session: Session;
}

/** A settled answer as the value it holds (a handler's own JSON text parsed back). */
function valueOf<T>(v: T | JsonText<T>): T {
  return v instanceof JsonText ? v.parse() : v;
}

const badQuery = (name: string, message: string): Answer =>
  httpError(RpcCode.InvalidParams, `invalid params: ${name}: ${message}`, undefined, { issues: [{ path: name, message }] });

export function buildRoutes(deps: RouteDeps): Route[] {
  const { server, sse } = deps;

  /**
   * Runs `fn` with the session attached to a transport of its own for this request (so the
   * handlers' authority checks pass exactly when the key is right, or without one in single-user
   * mode, as session.resume does); detached again after, which parks the session anew if nothing
   * else is attached: each request renews its park time.
   */
  const within = <T>(call: Call, fn: (transport: string, session: Session) => T): T => {
    const transport = server.transientId();
    const session = server.sessions.rebind(param(call, 'sid'), keyOf(call), transport, call.req.socket);
    try {
      return fn(transport, session);
    } finally {
      server.sessions.leave(session, transport);
    }
  };

  /**
   * One method call, its answer settled: a handler may answer with a promise (a steer to a child
   * on a remote worker answers once the steer is committed), and every answer is shaped from the
   * value, never from the promise. The session stays attached until the answer is there. A
   * synchronous answer is handed on in the same step, with no promise made (bench: http.steer).
   */
  const invoke = <M extends MethodName>(call: Call, method: M, params: Record<string, unknown>): Invoked<M> | Promise<Invoked<M>> => {
    const transport = server.transientId();
    const session = server.sessions.rebind(param(call, 'sid'), keyOf(call), transport, call.req.socket);
    let keyed: Keyed<AnswerOf<M>>;
    try {
      keyed = server.invoke(method, withProps(params, { session_id: session.session_id }), transport);
    } catch (err) {
      server.sessions.leave(session, transport);
      throw err;
    }
    const { value, replayed } = keyed;
    if (!(value instanceof Promise)) {
      server.sessions.leave(session, transport);
      return { keyed: { value, replayed }, session };
    }
    return settle<M>(value)
      .then((v) => ({ keyed: { value: v, replayed }, session }))
      .finally(() => server.sessions.leave(session, transport));
  };

  const visible = (session: Session, subagent_id: string): boolean =>
    server.runtime.scoped.list(server.sessions.scopeOf(session), { include_finished: true }).some((s) => s.subagent_id === subagent_id);

  /**
   * The status of a first answer, kept with it, so a replay maps to the very same status. Only a
   * keyed call (`kept`) can be replayed, so only its answer is kept.
   */
  const statusOfValue = new WeakMap<object, Answer>();
  const keyedAnswer = (keyed: Keyed<object>, kept: boolean, first: () => Answer): Answer => {
    if (!kept) return first();
    let a = statusOfValue.get(keyed.value);
    if (!a) statusOfValue.set(keyed.value, (a = first()));
    return keyed.replayed ? withProps(a, { headers: withProps(a.headers, { 'Idempotency-Replayed': 'true' }) }) : a;
  };
  /** Domain errors of a keyed call are kept too; a replayed one says so. */
  const keyedCall = <M extends MethodName>(
    call: Call,
    method: M,
    params: Record<string, unknown>,
    map: (keyed: Keyed<HandledOf<M>>, session: Session, kept: boolean) => Answer,
  ): Answer | Promise<Answer> => {
    const key = idempotencyKeyOf(call);
    const kept = key !== undefined;
    try {
      const invoked = invoke(call, method, kept ? withProps(params, { idempotency_key: key }) : params);
      // The common answer is synchronous: shaped here, with no closure made for the promise's paths.
      if (!(invoked instanceof Promise)) return map({ value: valueOf(invoked.keyed.value), replayed: invoked.keyed.replayed }, invoked.session, kept);
      return invoked
        .then(({ keyed, session }) => map({ value: valueOf(keyed.value), replayed: keyed.replayed }, session, kept))
        .catch((err: unknown) => refused(err, kept));
    } catch (err) {
      return refused(err, kept);
    }
  };
  const replayedErrors = new WeakSet<RpcError>();
  /** A keyed call's wire error as its answer, said replayed when it is the kept one again. */
  const refused = (err: unknown, kept: boolean): Answer => {
    if (!(err instanceof RpcError)) throw err;
    const replayed = kept && replayedErrors.has(err);
    if (kept) replayedErrors.add(err);
    return errorAnswer(err, replayed ? { 'Idempotency-Replayed': 'true' } : undefined);
  };

  const plain = (call: Call, method: MethodName, params: Record<string, unknown>, status = 200): Answer | Promise<Answer> => {
    const invoked = invoke(call, method, params);
    return invoked instanceof Promise ? invoked.then(({ keyed }) => answer(status, keyed.value)) : answer(status, invoked.keyed.value);
  };

  const cid = (call: Call) => param(call, 'cid');

  const waitForDelegation = (call: Call, did: string, seconds: number): Promise<Answer> =>
    new Promise((resolvePromise) => {
      let settled = false;
      const finish = () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        off();
        call.res.off('close', finish);
        // plain() may throw synchronously: a rejection here, as any refusal.
        Promise.resolve()
          .then(() => plain(call, 'delegation.result', { delegation_id: did }))
          .then(resolvePromise, (err: unknown) =>
            resolvePromise(err instanceof RpcError ? errorAnswer(err) : httpError(RpcCode.InternalError, 'Internal error')),
          );
      };
      // Registered after the server's own listener, so the ledger has the delegation's last entry
      // by the time this runs.
      const off = server.runtime.onOwnedEvent((event) => {
        if (event.type === 'delegation.complete' && event.delegation_id === did) queueMicrotask(finish);
      });
      const timer = setTimeout(finish, seconds * 1000);
      call.res.once('close', finish);
    });

  const sessionView = (session: Session) => ({
    session_id: session.session_id,
    generation: session.generation,
    title: session.title ?? null,
    created_at: session.created_at,
    live_subagents: server.runtime.scoped.list(server.sessions.scopeOf(session)).length,
    paused: server.runtime.isPaused(session.session_id),
    latest_seq: session.seq,
  });

  return [
    {
      path: ['v1', 'capabilities'],
      methods: {
        GET: () =>
          answer(200, {
            protocol_version: PROTOCOL_VERSION,
            server: { name: SERVER_NAME, version: VERSION },
            features: deps.features(),
            limits: withProps(server.limits, {
              idempotency_ttl_ms: IDEMPOTENCY_TTL_MS,
              idempotency_keys_per_session: MAX_KEYS_PER_SESSION,
              idempotency_bytes_per_session: MAX_KEPT_BYTES_PER_SESSION,
              max_wait_seconds: MAX_WAIT_SECONDS,
              max_outbound_bytes: deps.max_outbound_bytes,
            }),
          }),
      },
    },
    {
      path: ['v1', 'sessions'],
      methods: {
        POST: async (call) => {
          const transport = server.transientId();
          // No HTTP request stays connected: close_on_disconnect would close the session at once.
          const value = await settle<'session.create'>(
            server.invoke('session.create', withProps(call.body, { close_on_disconnect: undefined }), transport).value,
          );
          // Not attached to anything yet: parked until a stream attaches or the next request.
          server.sessions.detach(valueOf(value).session_id, transport);
          return answer(201, value);
        },
        // The token owns every session in single-user mode (hermes' model), so it may list them.
        GET: () =>
          server.services.single_user
            ? answer(200, { sessions: server.sessions.all().map(sessionView) })
            : httpError(HttpCode.Forbidden, 'listing sessions needs --single-user'),
      },
    },
    {
      path: ['v1', 'sessions', ':sid'],
      methods: {
        GET: (call) =>
          answer(
            200,
            within(call, (_t, session) => sessionView(session)),
          ),
        DELETE: (call) => plain(call, 'session.close', {}),
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'reset'],
      methods: { POST: (call) => keyedCall(call, 'session.reset', {}, (keyed, _session, kept) => keyedAnswer(keyed, kept, () => answer(200, keyed.value))) },
    },
    {
      path: ['v1', 'sessions', ':sid', 'pause'],
      methods: { POST: (call) => plain(call, 'delegation.pause', { paused: call.body.paused }) },
    },
    {
      path: ['v1', 'sessions', ':sid', 'delegations'],
      methods: {
        POST: (call) =>
          keyedCall(call, 'delegation.spawn', { tasks: call.body.tasks, timeout_ms: call.body.timeout_ms }, (keyed, _session, kept) =>
            keyedAnswer(keyed, kept, () => answer(202, keyed.value)),
          ),
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'delegations', ':did'],
      methods: {
        GET: async (call) => {
          const did = param(call, 'did');
          const { keyed } = await invoke(call, 'delegation.result', { delegation_id: did });
          const first = answer(200, keyed.value);
          const raw = call.url.searchParams.get('wait');
          if (raw === null) return first;
          const seconds = Number(raw);
          if (raw.trim() === '' || !Number.isFinite(seconds) || seconds < 0) return badQuery('wait', 'expected a number of seconds >= 0');
          if (valueOf(keyed.value).done || seconds === 0) return first;
          return waitForDelegation(call, did, Math.min(seconds, MAX_WAIT_SECONDS));
        },
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'subagents'],
      methods: {
        GET: (call) => {
          const include_finished = boolQuery(call.url, 'include_finished');
          if (include_finished === 'bad') return badQuery('include_finished', 'expected true or false');
          return plain(call, 'subagent.list', include_finished === undefined ? {} : { include_finished });
        },
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'subagents', ':cid'],
      methods: {
        GET: (call) =>
          within(call, (_t, session) => {
            const found = server.runtime.scoped.list(server.sessions.scopeOf(session), { include_finished: true }).find((s) => s.subagent_id === cid(call));
            return found ? answer(200, found) : notFound();
          }),
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'subagents', ':cid', 'tail'],
      methods: {
        GET: async (call) => {
          const raw = call.url.searchParams.get('since');
          if (raw !== null && !/^\d{1,15}$/.test(raw)) return badQuery('since', 'expected an integer >= 0');
          const { keyed, session } = await invoke(call, 'subagent.tail', { subagent_id: cid(call), ...(raw === null ? {} : { since: Number(raw) }) });
          const tail = valueOf(keyed.value);
          // `seq`: the session's latest event this window reflects (an SSE consumer joins there).
          return tail.available ? answer(200, withProps(tail, { seq: session.seq })) : notFound();
        },
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'subagents', ':cid', 'steer'],
      methods: {
        POST: (call) =>
          keyedCall(call, 'subagent.steer', { subagent_id: cid(call), text: call.body.text }, (keyed, _session, kept) =>
            keyedAnswer(keyed, kept, () => {
              const r = keyed.value;
              if (r.status === 'queued') return answer(202, r);
              // Rejected: the caller's own child that no longer takes steers (or whose runner
              // vetoed it) is a conflict, its reason in `data`; any other is not the caller's to know.
              return r.reason === 'not_found' ? notFound() : httpError(RpcCode.NotAcceptingSteer, 'not accepting steer', undefined, { reason: r.reason });
            }),
          ),
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'subagents', ':cid', 'interrupt'],
      methods: {
        POST: (call) =>
          keyedCall(call, 'subagent.interrupt', { subagent_id: cid(call) }, (keyed, session, kept) =>
            keyedAnswer(keyed, kept, () => (keyed.value.found || visible(session, cid(call)) ? answer(200, keyed.value) : notFound())),
          ),
      },
    },
    {
      // A child the last process lost, continued as a new child (docs/durability.md, "Revive").
      path: ['v1', 'sessions', ':sid', 'subagents', ':cid', 'revive'],
      methods: {
        POST: (call) =>
          keyedCall(
            call,
            'subagent.revive',
            {
              subagent_id: cid(call),
              ...(call.body.text !== undefined ? { text: call.body.text } : {}),
              ...(call.body.requeue_missed !== undefined ? { requeue_missed: call.body.requeue_missed } : {}),
            },
            (keyed, _session, kept) => keyedAnswer(keyed, kept, () => answer(201, keyed.value)),
          ),
      },
    },
    {
      path: ['v1', 'sessions', ':sid', 'timeline'],
      methods: { GET: (call) => plain(call, 'session.timeline', {}) },
    },
    {
      path: ['v1', 'sessions', ':sid', 'events'],
      stream: true,
      methods: {
        GET: (call) => {
          const cursor = cursorOf(call.req, call.url.searchParams);
          if (Number.isNaN(cursor)) return badQuery('last_event_id', 'expected an integer >= 0');
          return sse.open(call.res, call.ctx, param(call, 'sid'), keyOf(call), cursor) ? 'streamed' : notFound();
        },
      },
    },
  ];
}
