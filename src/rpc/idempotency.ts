// Idempotent control: a retried spawn, steer, interrupt or reset must not act twice. A call that
// carries an idempotency key (the `idempotency_key` param over JSON-RPC, the `Idempotency-Key`
// header over HTTP: one key space) keeps its first answer, a result or a domain error, for a TTL;
// a repeat with the same params gets that answer again, marked as a replay, and has no effect. The
// same key with other params is refused (4015). An internal error is not kept: a retry may succeed.
//
// Keys are scoped to a session and a method. Each session keeps at most MAX_KEYS_PER_SESSION,
// the oldest evicted first; a closed session drops its keys at once.
import type { Clock } from '../clock.ts';
import { RpcCode, RpcError, toRpcError } from './errors.ts';

/** How long an answer is kept for its key. */
export const IDEMPOTENCY_TTL_MS = 10 * 60 * 1000;
/** Keys one session keeps at most (oldest evicted first). */
export const MAX_KEYS_PER_SESSION = 1000;

/** The methods that take an idempotency key. */
export const IDEMPOTENT_METHODS: readonly string[] = ['delegation.spawn', 'session.reset', 'subagent.interrupt', 'subagent.steer'];

export const idempotencyConflict = () => new RpcError(RpcCode.IdempotencyConflict, 'idempotency key reused with different params');

interface Kept {
  readonly params: string;
  readonly expires: number;
  readonly value?: unknown;
  readonly error?: RpcError;
}

/** An answer of a keyed call: `replayed` when it is the kept answer of an earlier call. */
export interface Keyed {
  readonly value: unknown;
  readonly replayed: boolean;
}

/** JSON text with object keys sorted, so "equal as parsed JSON" is a string comparison. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value).sort();
    return `{${keys
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export class IdempotencyStore {
  readonly #clock: Clock;
  readonly #ttl: number;
  readonly #max: number;
  /** Per session: `method \n key` → the kept answer, in insertion (= expiry) order. */
  readonly #bySession = new Map<string, Map<string, Kept>>();

  constructor(clock: Clock, ttl_ms = IDEMPOTENCY_TTL_MS, max_keys = MAX_KEYS_PER_SESSION) {
    this.#clock = clock;
    this.#ttl = ttl_ms;
    this.#max = max_keys;
  }

  /**
   * Runs `run` once per (session, method, key) within the TTL. Throws the kept domain error on a
   * replay of a call that failed, and 4015 when the params differ from the first call's.
   */
  run(session_id: string, method: string, key: string, params: Record<string, unknown>, run: () => unknown, log?: (err: unknown) => void): Keyed {
    const now = this.#clock.now();
    const keys = this.#bySession.get(session_id);
    if (keys) this.#prune(keys, now);
    const slot = `${method}\n${key}`;
    const { idempotency_key: _k, ...rest } = params;
    const text = canonicalJson(rest);
    const kept = keys?.get(slot);
    if (kept) {
      if (kept.params !== text) throw idempotencyConflict();
      if (kept.error) throw kept.error;
      return { value: kept.value, replayed: true };
    }
    let value: unknown;
    try {
      value = run();
    } catch (err) {
      const e = toRpcError(err, log);
      // Only answers the same call would give again are kept: not an internal error, nor a
      // refusal because the server is shutting down.
      if (e.code !== RpcCode.InternalError && e.code !== RpcCode.ShuttingDown) this.#keep(session_id, keys, slot, { params: text, expires: now + this.#ttl, error: e });
      throw e;
    }
    this.#keep(session_id, keys, slot, { params: text, expires: now + this.#ttl, value });
    return { value, replayed: false };
  }

  /** The session closed: its keys go with it. */
  forget(session_id: string): void {
    this.#bySession.delete(session_id);
  }

  /** Keys kept for one session now (for tests and diagnostics). */
  sizeOf(session_id: string): number {
    return this.#bySession.get(session_id)?.size ?? 0;
  }

  #keep(session_id: string, keys: Map<string, Kept> | undefined, slot: string, kept: Kept): void {
    if (!keys) this.#bySession.set(session_id, (keys = new Map()));
    keys.set(slot, kept);
    while (keys.size > this.#max) keys.delete(keys.keys().next().value as string);
  }

  #prune(keys: Map<string, Kept>, now: number): void {
    for (const [slot, kept] of keys) {
      if (kept.expires > now) break;
      keys.delete(slot);
    }
  }
}
