// Idempotent control: a retried spawn, steer, interrupt or reset must not act twice. A call that
// carries an idempotency key (the `idempotency_key` param over JSON-RPC, the `Idempotency-Key`
// header over HTTP: one key space) keeps its first answer, a result or a domain error, for a TTL;
// a repeat with the same params gets that answer again, marked as a replay, and has no effect. The
// same key with other params is refused (4015). An answer that says "try again later" is not kept
// (an internal error, shutting down or NATS unavailable, a full steer queue): a retry may succeed.
//
// An answer that comes as a promise (a steer to a child on a remote worker answers once the steer
// is committed) is kept as what it settles to: a repeat while it is pending shares the pending
// answer, and one that settles to an answer not kept leaves the key free again.
//
// Bounded: keys are scoped to a session and a method; each session keeps at most
// MAX_KEYS_PER_SESSION keys and MAX_KEPT_BYTES_PER_SESSION bytes of answers, the oldest evicted
// first. The params are kept as a digest, not as text. Expired keys of every session are swept on
// every keyed call (of any session); a closed session drops its keys at once.
import { createHash } from 'node:crypto';
import type { Clock } from '../clock.ts';
import { RpcCode, RpcError, toRpcError } from './errors.ts';
import type { ServerStore } from '../store/types.ts';
import { z } from 'zod';

/** A kept answer as written: its value, or its error. */
const keptAnswerSchema = z.object({
  value: z.unknown().optional(),
  error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
});

/** How long an answer is kept for its key. */
export const IDEMPOTENCY_TTL_MS = 10 * 60 * 1000;
/** Keys one session keeps at most (oldest evicted first). */
export const MAX_KEYS_PER_SESSION = 1000;
/** Bytes of kept answers (as JSON, plus the key) one session keeps at most (oldest evicted first). */
export const MAX_KEPT_BYTES_PER_SESSION = 4 * 1024 * 1024;
/** What a kept answer costs beside its JSON: the digest, the expiry, the bookkeeping. */
const ENTRY_OVERHEAD_BYTES = 160;

/**
 * Answers that are not kept: they say "not now", not "no" (internal error; shutting down and NATS
 * unavailable share -32000; a reply too large; a full steer queue, 4005, means "wait and retry").
 */
const NOT_KEPT: ReadonlySet<number> = new Set<number>([RpcCode.InternalError, RpcCode.ShuttingDown, RpcCode.ResponseTooLarge, RpcCode.SteerQueueFull]);

export const idempotencyConflict = () => new RpcError(RpcCode.IdempotencyConflict, 'idempotency key reused with different params');

interface Kept {
  readonly session_id: string;
  readonly slot: string;
  /** sha256 of the params' canonical JSON (a steer's text may be large; its digest is not). */
  readonly params: string;
  readonly expires: number;
  bytes: number;
  value?: unknown;
  error?: RpcError;
  /** Set while the first call's answer is a promise not yet settled. */
  pending?: Promise<unknown>;
}

interface SessionKeys {
  readonly keys: Map<string, Kept>;
  bytes: number;
}

/** An answer of a keyed call: `replayed` when it is the kept answer of an earlier call. */
export interface Keyed<T = unknown> {
  readonly value: T;
  readonly replayed: boolean;
}

/** JSON text with object keys sorted, so "equal as parsed JSON" is a string comparison. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isRecord(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys
      .filter((k) => value[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`)
      .join(',')}}`;
  }
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- JSON.stringify returns undefined for undefined or a function, though typed string
  return JSON.stringify(value) ?? 'null';
}

import { isRecord, isThenable } from '../guards.ts';

export { isThenable };

/** The bytes a kept answer takes, near enough: its JSON text. */
function sizeOf(value: unknown): number {
  try {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- JSON.stringify returns undefined for undefined or a function, though typed string
    return (JSON.stringify(value) ?? '').length;
  } catch {
    return 0;
  }
}

export class IdempotencyStore {
  readonly #clock: Clock;
  readonly #ttl: number;
  readonly #max: number;
  readonly #maxBytes: number;
  /** Per session: `method \n key` → the kept answer, in insertion (= expiry) order. */
  readonly #bySession = new Map<string, SessionKeys>();
  /** Every kept answer of every session, in insertion (= expiry: one TTL) order, for the sweep. */
  readonly #all = new Set<Kept>();

  /** With a durable store: every kept answer is written, and a session's are read back on its first keyed call. */
  readonly #store: ServerStore | undefined;
  /** Sessions whose written answers were read back (or that had none to read). */
  readonly #loaded = new Set<string>();

  constructor(clock: Clock, ttl_ms = IDEMPOTENCY_TTL_MS, max_keys = MAX_KEYS_PER_SESSION, max_bytes = MAX_KEPT_BYTES_PER_SESSION, store?: ServerStore) {
    this.#store = store?.durable ? store : undefined;
    this.#clock = clock;
    this.#ttl = ttl_ms;
    this.#max = max_keys;
    this.#maxBytes = max_bytes;
  }

  /**
   * Runs `run` once per (session, method, key) within the TTL. Throws the kept domain error on a
   * replay of a call that failed, and 4015 when the params differ from the first call's. A
   * promise from `run` is answered as a promise that settles as it does.
   */
  run<T>(session_id: string, method: string, key: string, params: Record<string, unknown>, run: () => T, log?: (err: unknown) => void): Keyed<T> {
    // The kept answer is the one `run` gave for the same (session, method, key): its type is T.
    return this.#run(session_id, method, key, params, run, log) as Keyed<T>;
  }

  #run(session_id: string, method: string, key: string, params: Record<string, unknown>, run: () => unknown, log?: (err: unknown) => void): Keyed {
    const now = this.#clock.now();
    this.#sweep(now);
    const slot = `${method}\n${key}`;
    this.#load(session_id, now);
    const { idempotency_key: _k, ...rest } = params;
    const digest = createHash('sha256').update(canonicalJson(rest)).digest('base64url');
    const kept = this.#bySession.get(session_id)?.keys.get(slot);
    if (kept) {
      if (kept.params !== digest) throw idempotencyConflict();
      if (kept.pending) return { value: kept.pending, replayed: true };
      if (kept.error) throw kept.error;
      return { value: kept.value, replayed: true };
    }
    const entry: Kept = { session_id, slot, params: digest, expires: now + this.#ttl, bytes: ENTRY_OVERHEAD_BYTES + slot.length };
    let value: unknown;
    try {
      value = run();
    } catch (err) {
      const e = toRpcError(err, log);
      if (!NOT_KEPT.has(e.code)) this.#keep(entry, e, undefined);
      throw e;
    }
    if (!isThenable(value)) {
      this.#keep(entry, undefined, value);
      return { value, replayed: false };
    }
    // Kept as pending now, so a repeat in the meantime shares this answer instead of acting again.
    entry.pending = Promise.resolve(value).then(
      (v) => {
        entry.pending = undefined;
        if (this.#all.has(entry)) this.#settle(entry, undefined, v);
        return v;
      },
      (err: unknown) => {
        const e = toRpcError(err, log);
        entry.pending = undefined;
        if (this.#all.has(entry)) {
          if (NOT_KEPT.has(e.code)) this.#remove(entry);
          else this.#settle(entry, e, undefined);
        }
        throw e;
      },
    );
    this.#keep(entry, undefined, undefined);
    return { value: entry.pending, replayed: false };
  }

  /** Reads back what an earlier process kept for the session (its answers replay across a restart). */
  #load(session_id: string, now: number): void {
    const store = this.#store;
    if (store === undefined || this.#loaded.has(session_id)) return;
    this.#loaded.add(session_id);
    for (const row of store.loadAnswers(session_id)) {
      if (row.expires <= now) {
        store.answerDropped(session_id, row.slot);
        continue;
      }
      const answer = keptAnswerSchema.parse(JSON.parse(row.answer));
      const entry: Kept = { session_id, slot: row.slot, params: row.params, expires: row.expires, bytes: ENTRY_OVERHEAD_BYTES + row.slot.length };
      const error = answer.error ? new RpcError(answer.error.code, answer.error.message, answer.error.data) : undefined;
      this.#keep(entry, error, answer.value, false);
    }
  }

  /** The session closed: its keys go with it. */
  forget(session_id: string): void {
    this.#loaded.delete(session_id);
    const s = this.#bySession.get(session_id);
    if (!s) return;
    for (const kept of s.keys.values()) this.#all.delete(kept);
    this.#bySession.delete(session_id);
  }

  /** Keys kept for one session now (for tests and diagnostics). */
  sizeOf(session_id: string): number {
    return this.#bySession.get(session_id)?.keys.size ?? 0;
  }

  /** Bytes kept for one session now, as the bound counts them (for tests and diagnostics). */
  bytesOf(session_id: string): number {
    return this.#bySession.get(session_id)?.bytes ?? 0;
  }

  /** Keys kept across every session (for tests and diagnostics). */
  get size(): number {
    return this.#all.size;
  }

  #keep(entry: Kept, error: RpcError | undefined, value: unknown, write = true): void {
    let s = this.#bySession.get(entry.session_id);
    if (!s) this.#bySession.set(entry.session_id, (s = { keys: new Map(), bytes: 0 }));
    s.keys.set(entry.slot, entry);
    s.bytes += entry.bytes;
    this.#all.add(entry);
    this.#settle(entry, error, value, write);
  }

  /** Records the answer and its size, then evicts the session's oldest keys past either bound. */
  #settle(entry: Kept, error: RpcError | undefined, value: unknown, write = true): void {
    const s = this.#bySession.get(entry.session_id);
    if (!s) return;
    // Written before the answer goes out (the method's reply waits for the commit); a pending one once it settles.
    if (write && entry.pending === undefined && this.#store) {
      const answer = JSON.stringify(error ? { error: error.toJSON() } : { value });
      this.#store.answerKept(entry.session_id, { slot: entry.slot, params: entry.params, expires: entry.expires, answer });
    }
    if (error) {
      // Formatted now: until then V8 holds the stack's frames, and through them the params of the
      // call (a 1 MiB steer text kept for the TTL).
      // A getter read for its side effect (V8 formats the stack on first read).
      // eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator
      void error.stack;
      entry.error = error;
    } else entry.value = value;
    const grown = error ? sizeOf(error.toJSON()) : value === undefined ? 0 : sizeOf(value);
    entry.bytes += grown;
    s.bytes += grown;
    // The newest key stays whatever it costs (one answer is bounded by the message limits).
    for (const oldest of s.keys.values()) {
      if (s.keys.size <= this.#max && s.bytes <= this.#maxBytes) break;
      if (oldest === entry) break;
      this.#remove(oldest);
    }
  }

  #remove(entry: Kept): void {
    this.#all.delete(entry);
    const s = this.#bySession.get(entry.session_id);
    if (!s || s.keys.get(entry.slot) !== entry) return;
    this.#store?.answerDropped(entry.session_id, entry.slot);
    s.keys.delete(entry.slot);
    s.bytes -= entry.bytes;
    if (s.keys.size === 0) this.#bySession.delete(entry.session_id);
  }

  /** Drops every expired key of every session: all share one TTL, so they expire in insertion order. */
  #sweep(now: number): void {
    for (const kept of this.#all) {
      if (kept.expires > now) break;
      this.#remove(kept);
    }
  }
}
