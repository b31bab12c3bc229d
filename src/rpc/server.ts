// The RPC server: one runtime, one session store, the dispatch table, and the event router that
// sends each runtime event to every transport in its session's slot, numbered per session.
import { randomBytes } from 'node:crypto';
import { systemClock, type Clock } from '../clock.ts';
import { openaiKind, type OpenAIRunnerConfig } from '../agent/runner.ts';
import type { Runner } from '../types.ts';
import { TAIL_WINDOW_BYTES } from '../child/transcript.ts';
import { ErrorCode, SubrunError } from '../errors.ts';
import { randomIds, type IdMaker } from '../ids.ts';
import { silentLogger, type Logger } from '../log.ts';
import { MAX_STEER_BYTES } from '../registry/registry.ts';
import { createRuntime, positiveInt, type Runtime, type RuntimeOptions } from '../delegation/runtime.ts';
import { SERVER_NAME, VERSION } from '../version.ts';
import catalog from '../contract/catalog.json' with { type: 'json' };
import { Connection } from './connection.ts';
import type { MethodDef, ServerLimits, ServerState } from './context.ts';
import { DelegationLedger } from './delegation-ledger.ts';
import { DEFAULT_MAX_BATCH, DEFAULT_MAX_REPLY_BYTES, MAX_MAX_BATCH, MAX_MAX_REPLY_BYTES } from './reply-budget.ts';
import { delegationMethods } from './methods/delegation.ts';
import { serverMethods } from './methods/server.ts';
import { sessionMethods } from './methods/session.ts';
import { parentMethods } from './methods/parent.ts';
import { subagentMethods } from './methods/subagent.ts';
import { spawnTreeMethods } from './methods/spawn-tree.ts';
import { ParentAgent } from '../agent/parent-agent.ts';
import { EVENT_TYPES, PROTOCOL_VERSION } from '../contract/wire.ts';
import { logLifecycle } from './lifecycle-log.ts';
import { DEFAULT_REPLAY_LIMITS } from './replay-ring.ts';
import { IDEMPOTENT_METHODS, IdempotencyStore, isThenable, type Keyed } from './idempotency.ts';
import { idempotent, type IdempotentMethodDef } from './idempotent-method.ts';
import { IdleWatch } from './idle-watch.ts';
import { toRpcError } from './errors.ts';
import { SessionStore, type Session } from './sessions.ts';
import { SpawnTreeStore } from './spawn-trees.ts';
import { wirePayload } from './wire-events.ts';
import type { Transport } from './transports/transport.ts';

export { PROTOCOL_VERSION };


/** An integer option within [min, max] (the CLI checks the same ranges). */
function boundedInt(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const v = positiveInt(name, value, fallback, min);
  if (v > max) throw new SubrunError(ErrorCode.InvalidOptions, `${name} must be at most ${max}, got ${v}`, [{ path: name, message: `expected an integer <= ${max}` }]);
  return v;
}

export interface ServerOptions {
  readonly max_concurrent_children?: number;
  readonly max_spawn_depth?: number;
  /** Largest stdio line / WebSocket frame accepted. Default 1 MiB. */
  readonly max_message_bytes?: number;
  /** Most elements one batch may have (1 to 100,000). Default 1,000. */
  readonly max_batch?: number;
  /** Bytes one message's replies may take (1,024 to 256 MiB). Default 32 MiB. */
  readonly max_reply_bytes?: number;
  /** How long a session may stay parked (no transport attached) before it is closed. Default 15 min. */
  readonly park_ttl_ms?: number;
  /** Each session's replay ring: events kept (default 1,000) and bytes kept (default 1 MiB). */
  readonly replay_events?: number;
  readonly replay_bytes?: number;
  /**
   * hermes' authority model: whoever holds the server token owns every session, so a transport may
   * resume or activate any session without its key and replay any session's events. Default false:
   * the session key is the authority.
   */
  readonly single_user?: boolean;
  /** Where spawn trees are kept (`spawn_tree.*`); absent: none are kept and those methods say so. */
  readonly state_dir?: string;
  /** The working directory hosts are told about (session info `cwd`). Default process.cwd(). */
  readonly cwd?: string;
  readonly default_runner?: Runner;
  /** The model behind `agent: {kind: "openai"}` children and the sessions' parent agents. */
  readonly openai?: OpenAIRunnerConfig;
  readonly runtime?: Omit<RuntimeOptions, 'max_concurrent_children' | 'max_spawn_depth' | 'clock' | 'ids' | 'logger' | 'default_runner'>;
  readonly clock?: Clock;
  readonly ids?: IdMaker;
  readonly logger?: Logger;
}

/** Every method the server answers, by name: the dispatch table. The control methods honour idempotency keys. */
export const METHODS: ReadonlyMap<string, MethodDef> = new Map(
  Object.entries({ ...serverMethods, ...sessionMethods, ...delegationMethods, ...subagentMethods, ...parentMethods, ...spawnTreeMethods }).map(([name, def]) => [
    name,
    IDEMPOTENT_METHODS.includes(name) ? idempotent(name, def) : def,
  ]),
);

/**
 * Something other than a JSON-RPC connection that takes a session's events as a transport in its
 * slot would (an SSE stream): the same envelope text, in seq order, nothing skipped.
 */
export interface EventSink {
  event(seq: number, type: string, text: string): void;
  /** The session closed or the server is shutting down: nothing more will come. */
  close(): void;
}

export const CATALOG: { readonly methods: readonly string[]; readonly events: readonly string[] } = catalog;

export class RpcServer {
  readonly runtime: Runtime;
  readonly sessions: SessionStore;
  readonly limits: ServerLimits;
  /** New for every server: a host holding seqs of another epoch knows they are void. */
  readonly replay_epoch = `ep_${randomBytes(9).toString('base64url')}`;
  readonly #ledger = new DelegationLedger();
  readonly #connections = new Map<string, Connection>();
  readonly #parents = new Map<string, ParentAgent>();
  /** Sessions whose parent agent runs on a model configuration of their own (setSessionModel). */
  readonly #sessionModels = new Map<string, OpenAIRunnerConfig>();
  readonly #sinks = new Map<string, { readonly sink: EventSink; readonly session_id: string }>();
  readonly #idle = new IdleWatch();
  readonly #closeWatchers = new Set<(session_id: string) => void>();
  readonly #idempotency: IdempotencyStore;
  #nextTransient = 0;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #state: ServerState & { draining: boolean };
  #nextConnection = 0;

  constructor(options: ServerOptions = {}) {
    this.#logger = options.logger ?? silentLogger;
    this.#clock = options.clock ?? systemClock;
    const ids = options.ids ?? randomIds;
    this.#idempotency = new IdempotencyStore(this.#clock);
    this.runtime = createRuntime({
      ...options.runtime,
      // The caller's kinds win (a remote placement wraps openai too); openai by default.
      runner_kinds: { openai: openaiKind(options.openai), ...options.runtime?.runner_kinds },
      max_concurrent_children: options.max_concurrent_children,
      max_spawn_depth: options.max_spawn_depth,
      default_runner: options.default_runner,
      clock: this.#clock,
      ids,
      logger: this.#logger,
    });
    this.limits = {
      max_message_bytes: options.max_message_bytes ?? 1024 * 1024,
      max_batch: boundedInt('max_batch', options.max_batch, DEFAULT_MAX_BATCH, 1, MAX_MAX_BATCH),
      max_reply_bytes: boundedInt('max_reply_bytes', options.max_reply_bytes, DEFAULT_MAX_REPLY_BYTES, 1024, MAX_MAX_REPLY_BYTES),
      park_ttl_ms: options.park_ttl_ms ?? 15 * 60 * 1000,
      replay_events: boundedInt('replay_events', options.replay_events, DEFAULT_REPLAY_LIMITS.max_events, 0, 100_000),
      replay_bytes: boundedInt('replay_bytes', options.replay_bytes, DEFAULT_REPLAY_LIMITS.max_bytes, 0, 256 * 1024 * 1024),
      max_concurrent_children: this.runtime.limits.max_concurrent_children,
      max_spawn_depth: this.runtime.limits.max_spawn_depth,
      max_steer_bytes: MAX_STEER_BYTES,
      tail_window_bytes: TAIL_WINDOW_BYTES,
    };
    this.sessions = new SessionStore({
      single_user: options.single_user ?? false,
      clock: this.#clock,
      ids,
      park_ttl_ms: this.limits.park_ttl_ms,
      replay: { max_events: this.limits.replay_events, max_bytes: this.limits.replay_bytes },
      // A closed session leaves nothing behind: its parent agent (closed, so a turn still winding
      // down cannot spawn again), its children (interrupted, then let go as they finish), its
      // queue and pause flag (once they have), and its delegation ledger. Events of its children
      // still finishing reach no transport: the session is gone from the store (#route).
      onClose: (session_id) => {
        this.#parents.get(session_id)?.close();
        this.#parents.delete(session_id);
        this.#sessionModels.delete(session_id);
        this.runtime.releaseSession(session_id);
        this.#ledger.forget(session_id);
        this.#idempotency.forget(session_id);
        for (const [id, s] of [...this.#sinks]) {
          if (s.session_id !== session_id) continue;
          this.#sinks.delete(id);
          s.sink.close();
        }
        for (const watch of [...this.#closeWatchers]) watch(session_id);
      },
    });
    this.#state = {
      runtime: this.runtime,
      sessions: this.sessions,
      ledger: this.#ledger,
      idempotency: this.#idempotency,
      limits: this.limits,
      info: { name: SERVER_NAME, version: VERSION },
      replay_epoch: this.replay_epoch,
      clock: this.#clock,
      single_user: options.single_user ?? false,
      cwd: options.cwd ?? process.cwd(),
      model: options.openai?.endpoint.model ?? '',
      spawnTrees: options.state_dir === undefined ? undefined : new SpawnTreeStore(options.state_dir),
      logger: this.#logger,
      draining: false,
      parentOf: (session_id) => {
        let p = this.#parents.get(session_id);
        if (!p) {
          p = new ParentAgent({
            runtime: this.runtime,
            config: this.#sessionModels.get(session_id) ?? options.openai,
            ids,
            logger: this.#logger,
            clock: this.#clock,
            owner: () => {
              const s = this.sessions.get(session_id);
              return { session_id, transport: 'parent', generation: s?.generation ?? 0 };
            },
            emit: (type, payload) => this.#emitSession(session_id, type, payload),
          });
          this.#parents.set(session_id, p);
        }
        return p;
      },
      peekParent: (session_id) => this.#parents.get(session_id),
      forgetParent: (session_id) => {
        this.#parents.get(session_id)?.close();
        this.#parents.delete(session_id);
      },
      methodNames: () => [...METHODS.keys()].sort(),
      // Derived from the event schemas (the contract), not read from catalog.json: a test holds
      // the two equal, and both equal to what the server really emits.
      eventTypes: () => [...EVENT_TYPES, 'gateway.ready'].sort(),
    };
    this.runtime.onOwnedEvent((event, owner) => {
      logLifecycle(this.#logger, event, owner);
      if (!owner) return;
      // Only an open session's current generation is recorded and routed: a child of a closed
      // session (or of a reset generation) that delegates while it winds down must not make a
      // ledger for a session that will never ask, nor reach a transport (fail closed).
      const session = this.sessions.get(owner.session_id);
      if (!session || session.generation !== owner.generation) return;
      this.#ledger.observe(event, owner);
      this.#route(session, event);
      if (this.#idle.observe(session, event.type)) {
        this.#send(session, 'session.idle', this.#clock.now() / 1000, { session_id: session.session_id, generation: session.generation });
      }
    });
  }

  /**
   * In-process only, never on the wire: the model configuration of one session's parent agent
   * (and so of the children it delegates to), e.g. its workspace tools rooted at the directory an
   * IDE opened the session in (src/acp). Call it before the session's first prompt: a parent
   * agent already made keeps the configuration it was made with.
   */
  setSessionModel(session_id: string, config: OpenAIRunnerConfig): void {
    if (this.sessions.get(session_id)) this.#sessionModels.set(session_id, config);
  }

  /** A fresh transport id for one call that arrives outside any connection (an HTTP request). */
  transientId(): string {
    return `http_${++this.#nextTransient}`;
  }

  /**
   * Runs one method as a JSON-RPC call from `transport` would run: the same handler, params
   * schema, authority and errors (thrown as RpcError). `replayed` is set when an idempotency key
   * returned a kept answer. The value may be a promise for a method that answers asynchronously
   * (callers await it before shaping an answer from it); it rejects with an RpcError.
   */
  invoke(method: string, params: Record<string, unknown>, transport: string): Keyed {
    const def = METHODS.get(method);
    if (!def) throw new Error(`no method ${method}`);
    try {
      const p = def.params.parse(params) as Record<string, unknown>;
      const ctx = { server: this.#state, transport };
      const keyed = 'keyed' in def ? (def as IdempotentMethodDef).keyed(p, ctx) : { value: def.handle(p, ctx), replayed: false };
      // A promise rejects as a synchronous answer throws: with a wire error, never a stack.
      if (!isThenable(keyed.value)) return keyed;
      return { value: Promise.resolve(keyed.value).catch((err: unknown) => Promise.reject(toRpcError(err, (e) => this.#logger.error({ err: e, method }, 'method failed')))), replayed: keyed.replayed };
    } catch (err) {
      throw toRpcError(err, (e) => this.#logger.error({ err: e, method }, 'method failed'));
    }
  }

  /** The server's state as method handlers see it (for the HTTP layer's reads). */
  get state(): ServerState {
    return this.#state;
  }

  /**
   * Puts `sink` in the session's slot, as a transport (so the session is not parked while it is
   * there), if `session_key` is the session's key (or, in single-user mode, none is given);
   * otherwise 4001. Events from the next one on
   * reach it: whatever the caller reads from the session in the same synchronous step is the state
   * just before them.
   */
  attachSink(session_id: unknown, session_key: unknown, sink: EventSink): { id: string; session: Session } {
    const id = `sse_${++this.#nextTransient}`;
    const session = this.sessions.rebind(session_id, session_key, id);
    this.#sinks.set(id, { sink, session_id: session.session_id });
    return { id, session };
  }

  /** Takes a sink out of its slot (the stream ended); the session parks if nothing else is attached. */
  detachSink(id: string): void {
    if (!this.#sinks.delete(id)) return;
    this.sessions.transportClosed(id);
  }

  /**
   * Runs `watch` with a session's id once it closed (session.close, park expiry, the shutdown),
   * for what keeps state per session beside the server (the ACP adapter). Returns the unwatch.
   */
  onSessionClose(watch: (session_id: string) => void): () => void {
    this.#closeWatchers.add(watch);
    return () => void this.#closeWatchers.delete(watch);
  }

  get connectionCount(): number {
    return this.#connections.size;
  }

  get draining(): boolean {
    return this.#state.draining;
  }

  /** Adopts a transport as a new connection and greets it with `gateway.ready`. */
  connect(transport: Transport): Connection {
    const id = `tr_${++this.#nextConnection}`;
    const conn = new Connection(
      id,
      transport,
      METHODS,
      this.#state,
      this.#logger,
      () => {
        this.#connections.delete(id);
        this.sessions.transportClosed(id);
      },
      this.limits,
    );
    this.#connections.set(id, conn);
    this.#logger.info({ transport: id }, 'connection opened');
    void conn.whenClosed.then(() => this.#logger.info({ transport: id }, 'connection closed'));
    // The first frame, before any reply: hermes' client refuses a connection that starts with
    // anything else. It belongs to no session, so it has no session_id (not even null).
    conn.notify('event', {
      type: 'gateway.ready',
      seq: 0,
      ts: this.#clock.now() / 1000,
      payload: {
        protocol_version: PROTOCOL_VERSION,
        replay_epoch: this.replay_epoch,
        server: { name: SERVER_NAME, version: VERSION },
        skin: {},
        change_events: false,
        heartbeat: true,
      },
    });
    conn.start();
    return conn;
  }

  /**
   * Stops accepting work, interrupts every child, lets their completion events go out, then
   * closes every connection.
   */
  async shutdown(): Promise<void> {
    this.#state.draining = true;
    await this.runtime.shutdown();
    for (const conn of [...this.#connections.values()]) conn.close('server shutting down');
    for (const s of [...this.#sinks.values()]) s.sink.close();
    this.#sinks.clear();
    this.sessions.closeAll();
  }

  /** Sends a runtime event of the session's current generation to its slot. */
  #route(session: Session, event: Record<string, unknown> & { type: string }): void {
    const { type, ts, src: _src, ...payload } = event;
    this.#send(session, type, typeof ts === 'number' ? ts : this.#clock.now() / 1000, wirePayload(type, payload));
  }

  /** A session-level event (the parent agent's), numbered and routed like a child's. */
  #emitSession(session_id: string, type: string, payload: Record<string, unknown>): void {
    const session = this.sessions.get(session_id);
    if (session) this.#send(session, type, this.#clock.now() / 1000, payload);
  }

  /**
   * Runs inside the runtime's event delivery and the parent agent's emit. Connection#notify never
   * throws (a notification a transport cannot take is logged and lost for it alone), so one
   * connection's failure cannot stop the event from reaching the rest of the slot.
   */
  #send(session: Session, type: string, ts: number, payload: Record<string, unknown>): void {
    // Serialised once: the same text goes to every attached peer and into the replay ring, so a
    // replayed event is byte for byte the one that was sent. One that cannot be serialised takes
    // no seq (a host would wait for it forever).
    const seq = session.seq + 1;
    let text: string;
    try {
      text = JSON.stringify({ type, session_id: session.session_id, seq, ts, payload });
    } catch (err) {
      this.#logger.error({ err, type, session_id: session.session_id }, 'event not serialisable');
      return;
    }
    session.seq = seq;
    session.replay.push(seq, text);
    for (const transport of session.slot) {
      const conn = this.#connections.get(transport);
      if (conn) conn.notifyEvent(text);
      else this.#sinks.get(transport)?.sink.event(seq, type, text);
    }
  }
}
