// A session's timeline (session.timeline, GET /v1/sessions/{sid}/timeline): its children's times
// from their records, and the marks no record keeps: each steer with its fate, each child an
// interrupt reached. The runtime tells it as one more observer (queued, delivered, missed at the
// seal, withdrawn, interrupted), and directly of a steer refused to the caller's own child (only
// the runtime knows the caller's scope there). Bounded per session; a closed session's marks go.
import type { ChildRecord } from '../child/record.ts';
import type { Timeline, TimelineFate } from '../contract/entities.ts';
import { NO_OBSERVER, type RuntimeObserver } from '../telemetry/observer.ts';
import type { Owner, Scope } from '../types.ts';
import { KeptMarks } from './kept-marks.ts';
import { withProps } from '../shapes.ts';

/** Steers kept per session (the oldest settled one leaves first). */
export const MAX_TIMELINE_STEERS = 1000;
/** Interrupt marks kept per session (the oldest leaves first). */
export const MAX_TIMELINE_INTERRUPTS = 1000;

interface SteerMark {
  readonly session_id: string;
  readonly steer_id: string | null;
  readonly subagent_id: string;
  readonly generation: number;
  fate: TimelineFate;
  /** Epoch ms; null for a refused steer. */
  readonly queued_at: number | null;
  at: number | null;
  /** Its place in the session's marks (kept-marks.ts sets both). */
  n: number;
  gone: boolean;
}

interface InterruptMark {
  readonly subagent_id: string;
  readonly target_id: string;
  readonly generation: number;
  readonly at: number;
}

interface SessionMarks {
  /** Bounded, the oldest settled leaving first, without a scan or a splice per steer (bench: http.steer.floor_depth). */
  readonly steers: KeptMarks<SteerMark>;
  readonly interrupts: InterruptMark[];
}

export class TimelineLog {
  readonly #sessions = new Map<string, SessionMarks>();
  /** Steers still queued, by id: where a delivery or a miss settles them. */
  readonly #queued = new Map<string, SteerMark>();
  readonly #lookup: (subagent_id: string) => ChildRecord | undefined;
  readonly #now: () => number;
  /** What the runtime tells this log, as its observers are told. */
  readonly observer: RuntimeObserver;

  constructor(lookup: (subagent_id: string) => ChildRecord | undefined, now: () => number) {
    this.#lookup = lookup;
    this.#now = now;
    this.observer = withProps(NO_OBSERVER, {
      steerQueued: (subagent_id, steer_id, _bytes, at) => {
        const owner = this.#lookup(subagent_id)?.owner;
        if (owner)
          this.#addSteer(owner, {
            session_id: owner.session_id,
            steer_id,
            subagent_id,
            generation: owner.generation,
            fate: 'queued',
            queued_at: at,
            at: null,
            n: 0,
            gone: false,
          });
      },
      steerDelivered: (_subagent_id, steer_id, at) => this.#settle(steer_id, 'delivered', at),
      steerWithdrawn: (subagent_id, steer_id) => {
        const mark = this.#queued.get(steer_id);
        this.#queued.delete(steer_id);
        const owner = this.#lookup(subagent_id)?.owner;
        if (mark && owner) this.#sessions.get(owner.session_id)?.steers.remove(mark);
      },
      // A missed steer's moment is the child's end (the seal), in acceptance order.
      finished: (_c, entry) => {
        const at = this.#now();
        for (const m of entry.missed_steer_detail ?? []) this.#settle(m.steer_id, 'missed', at);
      },
      interrupted: (target, found, reached) => {
        const owner = found ? this.#lookup(target)?.owner : undefined;
        if (!owner) return;
        const at = this.#now();
        const list = this.#marks(owner.session_id).interrupts;
        for (const subagent_id of reached) list.push({ subagent_id, target_id: target, generation: owner.generation, at });
        if (list.length > MAX_TIMELINE_INTERRUPTS) list.splice(0, list.length - MAX_TIMELINE_INTERRUPTS);
      },
    } satisfies Partial<RuntimeObserver>);
  }

  /** A steer to the caller's own child that it no longer takes (HTTP 409; JSON-RPC `rejected`). */
  rejected(record: ChildRecord): void {
    const owner = record.owner;
    if (owner) {
      this.#addSteer(owner, {
        session_id: owner.session_id,
        steer_id: null,
        subagent_id: record.subagent_id,
        generation: owner.generation,
        fate: 'rejected',
        queued_at: null,
        at: this.#now(),
        n: 0,
        gone: false,
      });
    }
  }

  /** The session closed: nothing of it is kept. */
  release(session_id: string): void {
    const marks = this.#sessions.get(session_id);
    if (!marks) return;
    this.#sessions.delete(session_id);
    for (const s of marks.steers.values()) if (s.steer_id !== null && s.fate === 'queued') this.#queued.delete(s.steer_id);
  }

  /** The session was reset: the marks of generations up to `generation` are never seen again. */
  retire(session_id: string, generation: number): void {
    const marks = this.#sessions.get(session_id);
    if (!marks) return;
    const keep = (m: { readonly generation: number }) => m.generation > generation;
    const steers = new KeptMarks<SteerMark>(MAX_TIMELINE_STEERS);
    for (const s of marks.steers.values()) {
      if (keep(s)) steers.add(s, s.fate !== 'queued');
      else if (s.steer_id !== null) this.#queued.delete(s.steer_id);
    }
    this.#sessions.set(session_id, { steers, interrupts: marks.interrupts.filter(keep) });
  }

  /** The timeline of `records` (the scope's live and retained children), read at `now` (epoch ms). */
  view(scope: Scope, records: readonly ChildRecord[], now: number): Timeline {
    const children = treeOrder(records);
    const ids = new Set(children.map((r) => r.subagent_id));
    const marks = this.#sessions.get(scope.session_id);
    const mine = (m: { readonly generation: number; readonly subagent_id: string }) => m.generation === scope.generation && ids.has(m.subagent_id);
    return {
      session_id: scope.session_id,
      now: now / 1000,
      children: children.map((r) => ({
        subagent_id: r.subagent_id,
        parent_id: r.parent_id,
        depth: r.depth,
        goal: r.goal,
        status: r.status,
        created_at: r.created_at / 1000,
        started_at: seconds(r.started_at),
        finished_at: seconds(r.finished_at),
      })),
      steers: (marks?.steers.values() ?? [])
        .filter(mine)
        .map((s) => ({ steer_id: s.steer_id, subagent_id: s.subagent_id, fate: s.fate, queued_at: seconds(s.queued_at), at: seconds(s.at) })),
      interrupts: (marks?.interrupts ?? []).filter(mine).map((i) => ({ subagent_id: i.subagent_id, target_id: i.target_id, at: i.at / 1000 })),
    };
  }

  #marks(session_id: string): SessionMarks {
    let marks = this.#sessions.get(session_id);
    if (!marks) this.#sessions.set(session_id, (marks = { steers: new KeptMarks(MAX_TIMELINE_STEERS), interrupts: [] }));
    return marks;
  }

  #addSteer(owner: Owner, mark: SteerMark): void {
    if (mark.steer_id !== null) this.#queued.set(mark.steer_id, mark);
    // The oldest settled mark goes first, never the one just added (a refusal is settled at once);
    // with none settled before it, the oldest.
    const gone = this.#marks(owner.session_id).steers.add(mark, mark.fate !== 'queued');
    if (gone && gone.fate === 'queued' && gone.steer_id !== null) this.#queued.delete(gone.steer_id);
  }

  #settle(steer_id: string, fate: TimelineFate, at: number): void {
    const mark = this.#queued.get(steer_id);
    if (!mark) return;
    this.#queued.delete(steer_id);
    mark.fate = fate;
    mark.at = at;
    // A mark in #queued is in its session's list (eviction, reset and close take it out of both).
    this.#sessions.get(mark.session_id)?.steers.settled(mark);
  }
}

const seconds = (ms: number | null): number | null => (ms === null ? null : ms / 1000);

/** Depth first, siblings by creation (then task index); a child whose parent is not listed is a root. */
function treeOrder(records: readonly ChildRecord[]): ChildRecord[] {
  const listed = new Set(records.map((r) => r.subagent_id));
  const byParent = new Map<string | null, ChildRecord[]>();
  for (const r of records) {
    const parent = r.parent_id !== null && listed.has(r.parent_id) ? r.parent_id : null;
    const list = byParent.get(parent);
    if (list) list.push(r);
    else byParent.set(parent, [r]);
  }
  const order = (a: ChildRecord, b: ChildRecord) =>
    a.created_at - b.created_at || a.task_index - b.task_index || (a.subagent_id < b.subagent_id ? -1 : a.subagent_id > b.subagent_id ? 1 : 0);
  const out: ChildRecord[] = [];
  const visit = (parent: string | null): void => {
    for (const r of (byParent.get(parent) ?? []).sort(order)) {
      out.push(r);
      visit(r.subagent_id);
    }
  };
  visit(null);
  return out;
}
