// The server every surface shares: one runtime, the sessions and their authority, the typed method
// table, and the event router that numbers each session's events and sends them to its slot.
import { randomBytes } from 'node:crypto';
import { systemClock, type Clock } from '../clock.ts';
import { TAIL_WINDOW_BYTES } from '../child/transcript.ts';

import { randomIds, type IdMaker } from '../ids.ts';
import { silentLogger, type Logger } from '../log.ts';
import { MAX_STEER_BYTES } from '../registry/registry.ts';
import { createRuntime, type Runtime } from '../delegation/runtime.ts';
import { SERVER_NAME, VERSION } from '../version.ts';
import { EVENT_TYPES } from '../contract/wire.ts';
import type { MethodName } from '../contract/methods.ts';
import type { ParentFactory, ServerLimits, Services, SessionParent } from './context.ts';
import { DelegationLedger } from './delegation-ledger.ts';
import { DEFAULT_REPLAY_LIMITS } from './replay-ring.ts';
import { boundedInt, DEFAULT_MAX_BATCH, DEFAULT_MAX_REPLY_BYTES, MAX_MAX_BATCH, MAX_MAX_REPLY_BYTES, type ServerOptions } from './options.ts';
import { IdempotencyStore, type Keyed } from './idempotency.ts';
import { IdleWatch } from './idle-watch.ts';
import { logLifecycle } from './lifecycle-log.ts';
import { METHODS, type AnswerOf } from './methods/table.ts';
import { toRpcError } from './errors.ts';
import { SessionStore, type Session } from './sessions.ts';
import { SpawnTreeStore } from './spawn-trees.ts';
import { wirePayload } from './wire-events.ts';
import { memoryStore } from '../store/memory.ts';
import type { Recovered, ServerStore } from '../store/types.ts';
import { reconcile } from './reconcile.ts';
import { combine } from '../telemetry/observer.ts';
import { withProps } from '../shapes.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export { DEFAULT_MAX_BATCH, DEFAULT_MAX_REPLY_BYTES, MAX_MAX_BATCH, MAX_MAX_REPLY_BYTES, type ServerOptions } from './options.ts';

/**
 * Something that takes a session's events as a transport in its slot would (a JSON-RPC
 * connection, an SSE stream): the same envelope text, in seq order, nothing skipped.
 */
export interface EventSink {
  event(seq: number, type: string, text: string): void;
  /** The session closed or the server is shutting down: nothing more will come. */
  close(): void;
}

interface Peer {
  readonly sink: EventSink;
  /** Set for a sink that lives for one session (an SSE stream): closed with it. */
  readonly session_id: string | undefined;
  /**
   * Such a sink's start: the session's written seq when it attached (its replay ends there). An
   * event numbered before the attach but written after it still reaches it.
   */
  readonly from?: number;
}

export class ServerHub {
  readonly runtime: Runtime;
  /** The server's Prometheus metrics, when it keeps them (ServerOptions.metrics). */
  readonly metrics: Metrics | undefined;
  readonly sessions: SessionStore;
  readonly limits: ServerLimits;
  /**
   * Names the history a host's seqs belong to: the state directory's (stable across its
   * restarts), or new for every server that keeps no state. Seqs of another epoch are void.
   */
  readonly replay_epoch: string;
  /** What this start found and settled in its store (zeros without one). */
  readonly recovered: Recovered;
  readonly store: ServerStore;
  /** Every service below the surfaces; method handlers pick theirs from it. */
  readonly services: Services;
  readonly #ledger: DelegationLedger;
  readonly #parents = new Map<string, SessionParent>();
  /** Directories surfaces opened sessions in (setSessionWorkspace). */
  readonly #workspaces = new Map<string, string>();
  readonly #peers = new Map<string, Peer>();
  readonly #idle = new IdleWatch();
  readonly #closeWatchers = new Set<(session_id: string) => void>();
  readonly #idempotency: IdempotencyStore;
  readonly #makeParent: ParentFactory | undefined;
  readonly #ids: IdMaker;
  readonly #logger: Logger;
  readonly #clock: Clock;
  #nextTransient = 0;
  #draining = false;

  constructor(options: ServerOptions = {}) {
    this.#logger = options.logger ?? silentLogger;
    this.#clock = options.clock ?? systemClock;
    this.#makeParent = options.parent;
    const ids = options.ids ?? randomIds;
    this.#ids = ids;
    const store = (this.store = options.store ?? memoryStore());
    this.replay_epoch = store.replay_epoch ?? `ep_${randomBytes(9).toString('base64url')}`;
    this.#ledger = new DelegationLedger(store);
    this.#idempotency = new IdempotencyStore(this.#clock, undefined, undefined, undefined, store);
    this.runtime = createRuntime(
      withProps(options.runtime, {
        max_concurrent_children: options.max_concurrent_children,
        max_spawn_depth: options.max_spawn_depth,
        default_runner: options.default_runner,
        clock: this.#clock,
        ids,
        logger: this.#logger,
        // The runtime settles what the last process lost as it is made, before anything is served.
        // One commit per call, made by the method before it replies: the call's writes, its events
        // and its kept answer together (a crash between two commits could lose the answer alone).
        ...(store.durable ? { store, commit: 'by_caller' as const } : {}),
        ...(options.metrics ? { observer: options.runtime?.observer ? combine(options.runtime.observer, options.metrics) : options.metrics } : {}),
      }),
    );
    this.metrics = options.metrics;
    options.metrics?.addSources({
      sessions: () => {
        let live = 0;
        let parked = 0;
        for (const s of this.sessions.all()) {
          if (s.slot.size > 0) live++;
          else parked++;
        }
        return { live, parked };
      },
      replayRingBytes: () => {
        let bytes = 0;
        for (const s of this.sessions.all()) bytes += s.replay.bytes;
        return bytes;
      },
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
      onClose: (session_id) => this.#released(session_id),
      store,
    });
    const restored = store.loadSessions();
    this.sessions.restore(restored);
    const isDraining = () => this.#draining;
    const recovered = () => this.recovered;
    this.services = {
      runtime: this.runtime,
      sessions: this.sessions,
      ledger: this.#ledger,
      idempotency: this.#idempotency,
      limits: this.limits,
      info: { name: SERVER_NAME, version: VERSION },
      replay_epoch: this.replay_epoch,
      store,
      get recovered() {
        return recovered();
      },
      clock: this.#clock,
      single_user: options.single_user ?? false,
      cwd: options.cwd ?? process.cwd(),
      model: options.model ?? '',
      spawnTrees: options.state_dir === undefined ? undefined : new SpawnTreeStore(options.state_dir),
      logger: this.#logger,
      get draining() {
        return isDraining();
      },
      parents: { of: (session_id) => this.#parentOf(session_id), peek: (session_id) => this.#parents.get(session_id) },
      catalog: {
        methods: () => Object.keys(METHODS).sort(),
        // Derived from the event schemas (the contract), not read from catalog.json: a test holds
        // the two equal, and both equal to what the server really emits.
        events: () => [...EVENT_TYPES, 'gateway.ready'].sort(),
      },
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
    this.recovered = reconcile({
      settled: this.runtime.recovered(),
      open: store.openDelegations(),
      restored,
      sessions: this.sessions,
      ledger: this.#ledger,
      route: (session, event) => this.#route(session, event),
      observe: (event, owner) => this.#ledger.observe(event, owner),
    });
    // Written before the first host can connect: what a restart settled is in every ring.
    store.flush();
  }

  /**
   * In-process only, never on the wire: the directory a surface opened a session in (an IDE's
   * workspace, src/acp), handed to the parent factory. Call it before the session's first prompt:
   * a parent agent already made keeps what it was made with.
   */
  setSessionWorkspace(session_id: string, workspace: string): void {
    if (this.sessions.get(session_id)) this.#workspaces.set(session_id, workspace);
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
  invoke<M extends MethodName>(method: M, params: Record<string, unknown>, transport: string): Keyed<AnswerOf<M>> {
    const onBug = (e: unknown) => this.#logger.error({ err: e, method }, 'method failed');
    try {
      const keyed = METHODS[method].run(params, { services: this.services, transport });
      // A promise rejects as a synchronous answer throws: with a wire error, never a stack.
      if (!(keyed.value instanceof Promise)) return keyed;
      return { value: keyed.value.catch((err: unknown) => Promise.reject(toRpcError(err, onBug))), replayed: keyed.replayed };
    } catch (err) {
      throw toRpcError(err, onBug);
    }
  }

  /**
   * Puts `sink` in the session's slot, as a transport (so the session is not parked while it is
   * there), if `session_key` is the session's key (or, in single-user mode, none is given);
   * otherwise 4001. Events from the next one on reach it: whatever the caller reads from the
   * session in the same synchronous step is the state just before them.
   */
  attachSink(session_id: unknown, session_key: unknown, sink: EventSink): { id: string; session: Session } {
    const id = `sse_${++this.#nextTransient}`;
    const session = this.sessions.rebind(session_id, session_key, id);
    this.#peers.set(id, { sink, session_id: session.session_id, from: session.committed });
    return { id, session };
  }

  /** Takes a sink out of its slot (the stream ended); the session parks if nothing else is attached. */
  detachSink(id: string): void {
    if (!this.#peers.delete(id)) return;
    this.sessions.transportClosed(id);
  }

  /** Runs `watch` with a session's id once it closed (for state kept beside the server). Returns the unwatch. */
  onSessionClose(watch: (session_id: string) => void): () => void {
    this.#closeWatchers.add(watch);
    return () => void this.#closeWatchers.delete(watch);
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** Stops accepting work, interrupts every child and lets their completion events go out. */
  async shutdown(): Promise<void> {
    this.#draining = true;
    await this.runtime.shutdown();
    // The children's completions are written, then sent, before any transport closes.
    try {
      this.store.flush();
    } catch (err) {
      this.#logger.error({ err }, 'the last completions could not be written at shutdown');
    }
    this.closeTransports();
    for (const [id, p] of [...this.#peers]) {
      if (p.session_id === undefined) continue;
      this.#peers.delete(id);
      p.sink.close();
    }
    // A durable server's sessions outlive it (a deploy): they are let go here, not closed in the store.
    this.sessions.closeAll(!this.store.durable);
    try {
      this.store.flush();
    } catch (err) {
      this.#logger.error({ err }, 'the last writes could not be made at shutdown');
    }
  }

  /** Closes a surface's own transports at shutdown, after the children's last events went out. */
  protected closeTransports(): void {}

  /** A transport of a surface (a JSON-RPC connection) that takes the events of every session it attaches to. */
  protected addPeer(id: string, sink: EventSink): void {
    this.#peers.set(id, { sink, session_id: undefined });
  }

  protected removePeer(id: string): void {
    this.#peers.delete(id);
    this.sessions.transportClosed(id);
  }

  #parentOf(session_id: string): SessionParent | undefined {
    let p = this.#parents.get(session_id);
    if (p || !this.#makeParent) return p;
    p = this.#makeParent({
      session_id,
      runtime: this.runtime,
      ids: this.#ids,
      logger: this.#logger,
      clock: this.#clock,
      workspace: this.#workspaces.get(session_id),
      owner: () => ({ session_id, transport: 'parent', generation: this.sessions.get(session_id)?.generation ?? 0 }),
      emit: (type, payload) => {
        const session = this.sessions.get(session_id);
        if (session) this.#send(session, type, this.#clock.now() / 1000, payload);
      },
    });
    this.#parents.set(session_id, p);
    return p;
  }

  /**
   * A closed session leaves nothing behind: its parent agent (closed, so a turn still winding down
   * cannot spawn again), its children (interrupted, then let go as they finish), its queue and
   * pause flag (once they have), its ledger and kept answers. Events of its children still
   * finishing reach no transport: the session is gone from the store (#route).
   */
  #released(session_id: string): void {
    this.#parents.get(session_id)?.close();
    this.#parents.delete(session_id);
    this.#workspaces.delete(session_id);
    // At shutdown the runtime has stopped its children already, but for those left running on
    // workers for the next process to adopt: a session let go then must not stop them.
    if (!this.#draining) this.runtime.releaseSession(session_id);
    this.#ledger.forget(session_id);
    this.#idempotency.forget(session_id);
    for (const [id, p] of [...this.#peers]) {
      if (p.session_id !== session_id) continue;
      this.#peers.delete(id);
      p.sink.close();
    }
    for (const watch of [...this.#closeWatchers]) watch(session_id);
  }

  /** Sends a runtime event of the session's current generation to its slot. */
  #route(session: Session, event: Record<string, unknown> & { type: string }): void {
    const { type, ts, src: _src, ...payload } = event;
    this.#send(session, type, typeof ts === 'number' ? ts : this.#clock.now() / 1000, wirePayload(type, payload));
  }

  /**
   * Runs inside the runtime's event delivery and the parent agent's emit. A sink never throws (a
   * notification a transport cannot take is logged and lost for it alone), so one peer's failure
   * cannot stop the event from reaching the rest of the slot.
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
    const store = this.store;
    if (!store.durable) {
      session.committed = seq;
      for (const transport of session.slot) this.#peers.get(transport)?.sink.event(seq, type, text);
      return;
    }
    // Persisted before it is sent (docs/durability.md): the peers in the slot now get it once its
    // commit is done (at the end of this turn, or when a reply flushes first).
    store.eventAppended(session.session_id, seq, text);
    if (type === 'message.start' || type === 'message.complete') store.turnRunning(session.session_id, type === 'message.start');
    const slot = new Set(session.slot);
    store.afterCommit(() => {
      session.committed = seq;
      for (const transport of session.slot) {
        const p = this.#peers.get(transport);
        if (p && (slot.has(transport) || (p.from !== undefined && p.from < seq))) p.sink.event(seq, type, text);
      }
    });
  }
}
