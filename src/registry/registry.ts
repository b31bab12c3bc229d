// The active-subagent registry: every live child by id, indexed by the session that owns it, plus
// a bounded set of recently finished children per owner so a late list or tail still finds them.
// Scoped calls carry the caller's authority ({session_id, generation}) and treat a foreign,
// retired or unknown child the same way: not found, revealing nothing.
import type { ChildJournal, InterruptResult, Scope, SteerRejection, SteerResult, TailResult } from '../types.ts';

export type { InterruptResult, SteerRejection, SteerResult, TailResult };
import { isFinalStatus } from '../types.ts';
import type { IdMaker } from '../ids.ts';
import type { ChildRecord } from '../child/record.ts';
import { toSnapshot, type Snapshot } from '../child/snapshot.ts';
import { steerTextProblem } from '../contract/methods.ts';

export { MAX_STEER_BYTES } from '../contract/methods.ts';

/** Default bounds of one child's undelivered steers (queued or taken): count and UTF-8 bytes. */
export const DEFAULT_MAX_QUEUED_STEERS = 64;
export const DEFAULT_MAX_QUEUED_STEER_BYTES = 256 * 1024;

export interface ListOptions {
  readonly include_finished?: boolean;
}

const LOCAL = '';

export class Registry {
  readonly #ids: IdMaker;
  readonly #retainPerOwner: number;
  readonly #live = new Map<string, ChildRecord>();
  readonly #retained = new Map<string, ChildRecord>();
  /** Per owner key (session id): its live children and its retained ids. */
  readonly #owners = new Map<string, OwnerSlot>();

  readonly #maxQueued: number;
  readonly #maxQueuedBytes: number;
  readonly #journal: ChildJournal | undefined;
  /** Commit each accepted steer before answering (false: the caller commits, with its reply). */
  readonly #commitSteers: boolean;

  constructor(
    ids: IdMaker,
    retainPerOwner: number,
    maxQueued = DEFAULT_MAX_QUEUED_STEERS,
    maxQueuedBytes = DEFAULT_MAX_QUEUED_STEER_BYTES,
    journal?: ChildJournal,
    commitSteers = true,
  ) {
    this.#journal = journal;
    this.#commitSteers = commitSteers;
    this.#ids = ids;
    this.#retainPerOwner = retainPerOwner;
    this.#maxQueued = maxQueued;
    this.#maxQueuedBytes = maxQueuedBytes;
  }

  get liveCount(): number {
    return this.#live.size;
  }

  add(record: ChildRecord): void {
    this.#live.set(record.subagent_id, record);
    const key = ownerKey(record);
    let slot = this.#owners.get(key);
    if (!slot) this.#owners.set(key, (slot = new OwnerSlot()));
    slot.live.add(record);
  }

  /**
   * Moves a finished child from live to retained (dropping the oldest beyond the bound). A child
   * of a released owner, or of a generation retired before it finished, is not retained: nobody
   * can reach it any more.
   */
  retire(record: ChildRecord): void {
    if (!this.#live.delete(record.subagent_id)) return;
    const key = ownerKey(record);
    const slot = this.#owners.get(key);
    if (slot === undefined) return; // never: add() made the slot of every live child
    slot.live.delete(record);
    if (this.#retainPerOwner > 0 && slot.onReleased === undefined && generationOf(record) >= slot.retainFrom) {
      this.#retained.set(record.subagent_id, record);
      const order = slot.finished;
      order.push(record.subagent_id);
      while (order.length > this.#retainPerOwner) {
        const old = order.shift();
        if (old !== undefined) this.#retained.delete(old);
      }
    }
    this.#dropIfEmpty(key, slot);
  }

  /**
   * Lets go of everything kept for one owner key (a session that closed): its retained children
   * now, its live ones as they finish (none is retained). `released` runs once the last live one
   * has finished, at once if none is live. Their entries and events go out as always.
   */
  release(session_id: string, released: () => void): void {
    const slot = this.#owners.get(session_id);
    if (!slot) {
      released();
      return;
    }
    for (const id of slot.finished) this.#retained.delete(id);
    slot.finished.length = 0;
    const before = slot.onReleased;
    slot.onReleased = before
      ? () => {
          before();
          released();
        }
      : released;
    this.#dropIfEmpty(session_id, slot);
  }

  /**
   * Stops retaining the children of `session_id`'s generations before `generation` (a reset
   * session: they are out of its reach for good): the finished ones are dropped now, the live ones
   * are not retained when they finish.
   */
  retireBefore(session_id: string, generation: number): void {
    const slot = this.#owners.get(session_id);
    if (!slot) return;
    slot.retainFrom = Math.max(slot.retainFrom, generation);
    const kept = slot.finished.filter((id) => {
      const r = this.#retained.get(id);
      if (r && generationOf(r) >= generation) return true;
      this.#retained.delete(id);
      return false;
    });
    slot.finished.length = 0;
    slot.finished.push(...kept);
    this.#dropIfEmpty(session_id, slot);
  }

  #dropIfEmpty(key: string, slot: OwnerSlot): void {
    if (slot.live.size > 0 || slot.finished.length > 0) return;
    if (this.#owners.get(key) === slot) this.#owners.delete(key);
    const released = slot.onReleased;
    slot.onReleased = undefined;
    released?.();
  }

  /** Owner keys with live or retained children, for tests and diagnostics. */
  get ownerCount(): number {
    return this.#owners.size;
  }

  /** A live or retained child, without any authority check (in-process use). */
  get(subagent_id: string): ChildRecord | undefined {
    return this.#live.get(subagent_id) ?? this.#retained.get(subagent_id);
  }

  /** A live or retained child that `scope` may see; undefined for unknown, foreign or retired. */
  getScoped(scope: Scope | undefined, subagent_id: string): ChildRecord | undefined {
    const r = this.get(subagent_id);
    if (!r) return undefined;
    if (scope === undefined) return r;
    const o = r.owner;
    return o && o.session_id === scope.session_id && o.generation === scope.generation ? r : undefined;
  }

  /** Snapshots of live children (all owners), plus retained finished ones if asked. */
  list(options: ListOptions = {}): Snapshot[] {
    const out: Snapshot[] = [];
    for (const r of this.#live.values()) out.push(toSnapshot(r));
    if (options.include_finished) for (const r of this.#retained.values()) out.push(toSnapshot(r));
    return out;
  }

  /** Snapshots of the children `scope` may see, at every depth. */
  listScoped(scope: Scope, options: ListOptions = {}): Snapshot[] {
    const out: Snapshot[] = [];
    const slot = this.#owners.get(scope.session_id);
    if (slot) for (const r of slot.live) if (r.owner?.generation === scope.generation) out.push(toSnapshot(r));
    if (options.include_finished && slot) {
      for (const id of slot.finished) {
        const r = this.#retained.get(id);
        if (r && r.owner?.generation === scope.generation) out.push(toSnapshot(r));
      }
    }
    return out;
  }

  /** The records `scope` may see, live ones in spawn order then retained ones, oldest first (the timeline). */
  recordsScoped(scope: Scope): ChildRecord[] {
    const slot = this.#owners.get(scope.session_id);
    if (!slot) return [];
    const out = [...slot.live].filter((r) => r.owner?.generation === scope.generation);
    for (const id of slot.finished) {
      const r = this.#retained.get(id);
      if (r && r.owner?.generation === scope.generation) out.push(r);
    }
    return out;
  }

  /** Live records of one owner key (session id), every generation; for session teardown. */
  liveOf(session_id: string): ChildRecord[] {
    return [...(this.#owners.get(session_id)?.live ?? [])];
  }

  liveRecords(): IterableIterator<ChildRecord> {
    return this.#live.values();
  }

  tail(subagent_id: string, since?: number, scope?: Scope): TailResult {
    const r = this.getScoped(scope, subagent_id);
    if (!r) return { subagent_id, available: false, text: '', truncated: false, offset: 0 };
    return { subagent_id, available: true, ...r.readTail(since) };
  }

  /**
   * Queues `text` (trimmed) for the child. `queued` means accepted, not delivered: the child takes
   * it at its next delivery point, or it comes back in the entry's `missed_steer`.
   */
  steer(subagent_id: string, rawText: string, scope?: Scope, requeued_from?: string): SteerResult {
    const text = typeof rawText === 'string' ? rawText.trim() : '';
    // The wire's rule (contract/methods.ts), so an in-process steer is held to the same bound.
    const problem = steerTextProblem(text);
    if (problem !== undefined) return rejected(subagent_id, text, problem);
    const bytes = Buffer.byteLength(text, 'utf8');
    const r = this.getScoped(scope, subagent_id);
    if (!r) return rejected(subagent_id, text, 'not_found');
    // A child the caller can still see (live or retained) that takes no more steers: it is not
    // "not found", it is finished (or finishing).
    if (r.finished || !r.accepting_steer || isFinalStatus(r.status)) return rejected(subagent_id, text, 'finished');
    // Bounded memory: a child that is not taking its steers cannot make the host's words pile up.
    if (!r.hasRoomForSteer(bytes, this.#maxQueued, this.#maxQueuedBytes)) return rejected(subagent_id, text, 'queue_full');
    // The veto runs before the steer is queued or wakes a waiting runner: a vetoed steer must leave
    // no trace (not even an early end of a wait_steer).
    const journal = this.#journal;
    if (journal && !journal.available) return rejected(subagent_id, text, 'store_unavailable');
    let steer;
    try {
      steer = r.acceptSteer(this.#ids.steer(), text, requeued_from);
    } catch {
      return rejected(subagent_id, text, 'vetoed');
    }
    if (!steer) return rejected(subagent_id, text, 'finished');
    if (journal) {
      // `queued` is said only once the steer is written: a restart then ends it delivered or missed.
      journal.steerAccepted(subagent_id, steer, Date.now());
      try {
        if (this.#commitSteers) journal.flush();
      } catch {
        r.withdrawSteer(steer.steer_id);
        journal.steerWithdrawn(subagent_id, steer.steer_id);
        return rejected(subagent_id, text, 'store_unavailable');
      }
    }
    return { status: 'queued', subagent_id, text, steer_id: steer.steer_id };
  }

  /**
   * Stops the child and every live descendant (cooperatively: each ends at its next step boundary
   * with status `interrupted`). `interrupted` lists the target, then the descendants it reached.
   */
  interrupt(subagent_id: string, scope?: Scope): InterruptResult {
    const r = this.getScoped(scope, subagent_id);
    if (!r || r.finished || !r.stop('interrupt')) return { found: false, subagent_id, interrupted: [] };
    const interrupted = [r.subagent_id];
    stopDescendants(r, interrupted);
    return { found: true, subagent_id, interrupted };
  }
}

function rejected(subagent_id: string, text: string, reason: SteerRejection): SteerResult {
  return { status: 'rejected', subagent_id, text, reason };
}

/** Stops every live descendant of `r` (pre-order), appending the ids it newly stopped. */
export function stopDescendants(r: ChildRecord, out: string[] = []): string[] {
  const stack = [...r.liveChildren].reverse();
  for (let c = stack.pop(); c !== undefined; c = stack.pop()) {
    if (c.stop('interrupt')) out.push(c.subagent_id);
    stack.push(...[...c.liveChildren].reverse());
  }
  return out;
}

/** One owner's children: the live ones in spawn order and the ids of its retained finished ones, oldest first. */
class OwnerSlot {
  /** Its live children, in spawn order (a Set keeps insertion order). */
  readonly live = new Set<ChildRecord>();
  readonly finished: string[] = [];
  /** Children of generations below this one are not retained (their generation was reset). */
  retainFrom = 0;
  /** Set once the owner is released (its session closed): runs when its last live child is out. */
  onReleased: (() => void) | undefined;
}

function generationOf(r: ChildRecord): number {
  return r.owner?.generation ?? 0;
}

function ownerKey(r: ChildRecord): string {
  return r.owner?.session_id ?? LOCAL;
}
