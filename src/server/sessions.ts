// Sessions, transport slots, parking and generations: the authority model in one place.
// - session.create attaches the caller; session.attach with the key adds another transport, and so
//   do session.resume / session.activate (with the key, or without it in single-user mode, where
//   whoever holds the server token owns every session).
// - A transport that closes leaves every slot; a session with an empty slot is parked, and closed
//   once parked longer than the park limit.
// - session.reset starts a new generation; children of older ones are out of reach for good.
// Authority is always computed from the transport a request arrived on, never from params.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { IdMaker } from '../ids.ts';
import type { Scope } from '../types.ts';
import { notOwned } from './errors.ts';
import { KeyProofs } from './key-proofs.ts';
import { ReplayRing, type ReplayLimits } from './replay-ring.ts';
import type { ServerStore, SessionRow } from '../store/types.ts';

export interface Session {
  readonly session_id: string;
  readonly title: string | undefined;
  /** Unix seconds. */
  readonly created_at: number;
  generation: number;
  /** Closed, not parked, when its last transport leaves (hermes' `close_on_disconnect`). */
  close_on_disconnect: boolean;
  /** Transport ids attached now. */
  readonly slot: Set<string>;
  /** Events numbered so far; the next event gets seq + 1. */
  seq: number;
  /**
   * The newest seq that is written (a durable store commits before it sends): what a replay may
   * hand out. Equal to `seq` without a store.
   */
  committed: number;
  /** Its recent events as sent, for a host that reconnects (kept while parked, gone on close). */
  readonly replay: ReplayRing;
}

interface SessionState extends Session {
  readonly keyDigest: Buffer;
  parkTimer: unknown;
  /** When the slot last emptied, on the clock's monotonic time (the park TTL counts from here). */
  parkedAt: number;
  closed: boolean;
}

export interface SessionStoreOptions {
  /** The token owns every session: rebind and read need no key (see RpcServer's single_user). */
  readonly single_user: boolean;
  readonly clock: Clock;
  readonly ids: IdMaker;
  readonly park_ttl_ms: number;
  /** Bounds of each session's replay ring. */
  readonly replay: ReplayLimits;
  /** Called when a session closes (explicitly or by park expiry): stop its children. */
  readonly onClose: (session_id: string) => void;
  /** Where sessions outlive the process (docs/durability.md); the memory store keeps nothing. */
  readonly store: ServerStore;
}

// crypto.hash: the one-shot digest, half the cost of a Hash object; every HTTP call checks a key.
const digest = (key: string) => hash('sha256', key, 'buffer');

export class SessionStore {
  readonly #sessions = new Map<string, SessionState>();
  readonly #proofs = new KeyProofs();
  readonly #opts: SessionStoreOptions;

  constructor(opts: SessionStoreOptions) {
    this.#opts = opts;
  }

  /**
   * The sessions the store kept, back as they were, parked (no transport survives a restart): a
   * host re-binds with its key, and each parks for the park limit from now.
   */
  restore(rows: readonly SessionRow[]): void {
    // The map holds sessions in the order they were made (session.list breaks a tie of
    // `created_at` by it); a store gives its rows in an order of its own.
    for (const row of [...rows].sort((a, b) => a.created_at - b.created_at)) {
      const state: SessionState = {
        session_id: row.session_id,
        title: row.title,
        created_at: row.created_at,
        close_on_disconnect: row.close_on_disconnect,
        generation: row.generation,
        slot: new Set(),
        seq: row.seq,
        committed: row.seq,
        replay: this.#ring(row.session_id, row.seq),
        keyDigest: row.key_digest,
        parkTimer: undefined,
        parkedAt: 0,
        closed: false,
      };
      this.#sessions.set(row.session_id, state);
      this.#park(state);
    }
  }

  #ring(session_id: string, latest: number): ReplayRing {
    const store = this.#opts.store;
    if (!store.durable) return new ReplayRing(this.#opts.replay);
    return new ReplayRing(this.#opts.replay, { load: () => store.loadEvents(session_id), evicted: (seq) => store.eventsEvicted(session_id, seq) }, latest);
  }

  #save(s: SessionState): void {
    this.#opts.store.sessionSaved({
      session_id: s.session_id,
      key_digest: s.keyDigest,
      title: s.title,
      created_at: s.created_at,
      generation: s.generation,
      close_on_disconnect: s.close_on_disconnect,
      seq: s.seq,
      turn_running: false,
    });
  }

  /** hermes' close_on_disconnect, changed by a resume (kept with the session). */
  setCloseOnDisconnect(session: Session, value: boolean): void {
    const s = this.#sessions.get(session.session_id);
    if (!s || s.close_on_disconnect === value) return;
    s.close_on_disconnect = value;
    this.#save(s);
  }

  get size(): number {
    return this.#sessions.size;
  }

  create(transport: string, title?: string, close_on_disconnect = false): { session: Session; session_key: string } {
    const session_id = this.#opts.ids.session();
    const session_key = randomBytes(24).toString('base64url');
    const state: SessionState = {
      session_id,
      title,
      created_at: this.#opts.clock.now() / 1000,
      close_on_disconnect,
      generation: 1,
      slot: new Set([transport]),
      seq: 0,
      committed: 0,
      replay: this.#ring(session_id, 0),
      keyDigest: digest(session_key),
      parkTimer: undefined,
      parkedAt: 0,
      closed: false,
    };
    this.#sessions.set(session_id, state);
    this.#save(state);
    return { session: state, session_key };
  }

  /** The session, if `transport` is in its slot; otherwise 4001 (one answer for every reason). */
  authorize(session_id: unknown, transport: string): Session {
    return this.#authorized(session_id, transport);
  }

  #authorized(session_id: unknown, transport: string): SessionState {
    const s = typeof session_id === 'string' ? this.#sessions.get(session_id) : undefined;
    if (!s || s.closed || !s.slot.has(transport)) throw notOwned();
    return s;
  }

  /**
   * The session, if `transport` is attached to it or `session_key` is its key (for a host that
   * reads before it re-attaches, e.g. replaying its gap), or any live session in single-user mode;
   * otherwise 4001. Attaches nothing.
   */
  authorizeRead(session_id: unknown, session_key: unknown, transport: string): Session {
    const s = typeof session_id === 'string' ? this.#sessions.get(session_id) : undefined;
    if (s && !s.closed && (s.slot.has(transport) || this.#opts.single_user)) return s;
    const given = digest(typeof session_key === 'string' ? session_key : '');
    const ok = timingSafeEqual(given, s?.keyDigest ?? digest(randomBytes(16).toString('hex')));
    if (!s || s.closed || !ok || typeof session_key !== 'string') throw notOwned();
    return s;
  }

  scopeOf(session: Session): Scope {
    return { session_id: session.session_id, generation: session.generation };
  }

  /**
   * Adds `transport` to the slot if the key is right (compared in constant time). `by`: the
   * connection a request came on (an HTTP keep-alive socket): once it proved a session's key, its
   * next request with the very same key for that session is let in without another digest.
   */
  attach(session_id: unknown, session_key: unknown, transport: string, by?: object): Session {
    const s = typeof session_id === 'string' ? this.#sessions.get(session_id) : undefined;
    if (by !== undefined && s !== undefined && !s.closed && typeof session_key === 'string' && this.#proofs.proved(by, s, session_key)) {
      s.slot.add(transport);
      return s;
    }
    const given = digest(typeof session_key === 'string' ? session_key : '');
    // Compare even when the session is unknown, so timing says nothing about which ids exist.
    const ok = timingSafeEqual(given, s?.keyDigest ?? digest(randomBytes(16).toString('hex')));
    if (!s || s.closed || !ok || typeof session_key !== 'string') throw notOwned();
    if (by !== undefined) this.#proofs.remember(by, s, session_key);
    s.slot.add(transport);
    return s;
  }

  /**
   * session.resume / session.activate: binds `transport` to a live or parked session. With its key
   * (compared as for attach), or, in single-user mode, with none. Already attached: unchanged.
   */
  rebind(session_id: unknown, session_key: unknown, transport: string, by?: object): Session {
    const s = typeof session_id === 'string' ? this.#sessions.get(session_id) : undefined;
    if (!this.#opts.single_user || session_key !== undefined) return this.attach(session_id, session_key, transport, by);
    if (!s || s.closed) throw notOwned();
    s.slot.add(transport);
    return s;
  }

  /** In single-user mode every live session; otherwise those `transport` is attached to. */
  sessionsFor(transport: string): Session[] {
    return this.#opts.single_user ? this.all() : this.sessionsOf(transport);
  }

  detach(session_id: unknown, transport: string): void {
    const s = this.#authorized(session_id, transport);
    this.#leave(s, transport);
  }

  /** `transport` leaves `session` if it is still there (a call that attached for its own length ends). */
  leave(session: Session, transport: string): void {
    const s = this.#sessions.get(session.session_id);
    if (s !== undefined && !s.closed && s.slot.has(transport)) this.#leave(s, transport);
  }

  reset(session_id: unknown, transport: string): { session: Session; retired: number } {
    const s = this.#authorized(session_id, transport);
    const retired = s.generation;
    s.generation += 1;
    this.#save(s);
    return { session: s, retired };
  }

  close(session_id: unknown, transport: string): Session {
    const s = this.#authorized(session_id, transport);
    this.#close(s);
    return s;
  }

  /** A transport went away: it leaves every slot; emptied sessions are parked. */
  transportClosed(transport: string): void {
    for (const s of this.#sessions.values()) if (s.slot.has(transport)) this.#leave(s, transport);
  }

  /** The live sessions `transport` is attached to. */
  sessionsOf(transport: string): Session[] {
    return [...this.#sessions.values()].filter((s) => s.slot.has(transport));
  }

  get(session_id: string): Session | undefined {
    const s = this.#sessions.get(session_id);
    return s && !s.closed ? s : undefined;
  }

  all(): Session[] {
    return [...this.#sessions.values()].filter((s) => !s.closed);
  }

  /** Closes every session; `forget: false` (a durable server's shutdown) keeps them in the store for the next start. */
  closeAll(forget = true): void {
    for (const s of [...this.#sessions.values()]) this.#close(s, forget);
  }

  #leave(s: SessionState, transport: string): void {
    s.slot.delete(transport);
    if (s.slot.size === 0 && s.close_on_disconnect) return this.#close(s);
    this.#park(s);
  }

  /**
   * Parks an emptied session: closed once it stayed empty for the TTL. One timer per parking, kept
   * across attaches: an HTTP call attaches and leaves on every request, and a timer set and cleared
   * per request was measurable (bench: http.steer). When it fires it closes the session only if
   * the slot is still empty and has been for the whole TTL; otherwise it re-arms for the rest.
   */
  #park(s: SessionState): void {
    if (s.slot.size !== 0 || s.closed) return;
    s.parkedAt = this.#elapsed();
    if (s.parkTimer === undefined) this.#armPark(s, this.#opts.park_ttl_ms);
  }

  /** Time as the timers keep it: a wall-clock step must neither close a session early nor keep one late. */
  #elapsed(): number {
    const clock = this.#opts.clock;
    return clock.monotonic ? clock.monotonic() : clock.now();
  }

  #armPark(s: SessionState, ms: number): void {
    s.parkTimer = this.#opts.clock.setTimeout(() => {
      s.parkTimer = undefined;
      if (s.slot.size !== 0 || s.closed) return;
      const left = s.parkedAt + this.#opts.park_ttl_ms - this.#elapsed();
      if (left > 0) this.#armPark(s, left);
      else this.#close(s);
    }, ms);
  }

  #close(s: SessionState, forget = true): void {
    if (s.closed) return;
    s.closed = true;
    s.slot.clear();
    if (s.parkTimer !== undefined) this.#opts.clock.clearTimeout(s.parkTimer);
    s.parkTimer = undefined;
    this.#sessions.delete(s.session_id);
    if (forget) this.#opts.store.sessionClosed(s.session_id);
    this.#opts.onClose(s.session_id);
  }
}
