// The oracle of the kill -9 tests: what ../shared/design/durability.md promises a host after any
// stop and a start on the same state directory, checked against what the hosts were told (the
// ledger of replies, and every event any host saw) and what the restarted server shows (the
// replay rings, live events, delegation.result). Pure functions over the merged history; the
// calls that gather it are in recovery.ts. Every violation names its promise.
import type { WireEvent } from '../helpers/rpc-client.ts';
import { wireEntry, type WireEntry } from '../helpers/wire-entry.ts';
import { canonical } from './harness.ts';
import type { Ledger, Task } from './schedule.ts';

export const P1 = 'promise 1 (every session survives with its key)';
export const P2 = 'promise 2 (every child has exactly one completion)';
export const P3 = 'promise 3 (every queued steer ends exactly once)';
export const P4 = 'promise 4 (the replay ring keeps every event sent: same seq, no gap, no duplicate, same epoch)';
export const P5 = 'promise 5 (delegation.result answers every delegation)';
export const P6 = 'promise 6 (an idempotency key replays its first answer)';
export const RECOVERED = 'recovered (gateway.ready and server.info count what the last start settled)';
export const QUIET = 'restart (a start settles what was lost and runs nothing)';

export const RESTART_ERROR = 'the server stopped while this subagent ran';

/** Collects violations; a phase that later phases build on throws them all at once. */
export class Violations {
  readonly found: string[] = [];
  readonly where: string;

  constructor(where: string) {
    this.where = where;
  }

  add(promise: string, detail: string): void {
    this.found.push(`${promise}: ${detail}`);
  }

  throwIfAny(phase: string): void {
    if (this.found.length === 0) return;
    const shown = this.found.slice(0, 12).map((f) => `  - ${f}`);
    const more = this.found.length > 12 ? [`  ... and ${this.found.length - 12} more`] : [];
    throw new Error([`${this.where}: ${this.found.length} violation(s) ${phase}:`, ...shown, ...more].join('\n'));
  }
}

export const short = (e: unknown): string => JSON.stringify(e).slice(0, 300);

/** Each session's events by seq, from every source: seen before the kill, replayed, live after. */
export type History = Map<string, Map<number, WireEvent>>;

/** Adds `events` to session `sid`'s history; two copies of one seq must be the same event. */
export function merge(history: History, sid: string, events: readonly WireEvent[], source: string, v: Violations): void {
  let bySeq = history.get(sid);
  if (!bySeq) history.set(sid, (bySeq = new Map()));
  for (const e of events) {
    const had = bySeq.get(e.seq);
    if (!had) bySeq.set(e.seq, e);
    else if (canonical(had) !== canonical(e)) v.add(P4, `session ${sid} seq ${e.seq}: ${source} has ${short(e)}, another copy has ${short(had)}`);
  }
}

export function ordered(history: History, sid: string): WireEvent[] {
  return [...(history.get(sid)?.values() ?? [])].sort((a, b) => a.seq - b.seq);
}

/** Seqs run 1, 2, 3, ... across the restart: a hole is an event lost, a repeat cannot be stored. */
export function checkSeqs(history: History, v: Violations): void {
  for (const sid of history.keys()) {
    ordered(history, sid).forEach((e, i) => {
      if (e.seq !== i + 1) v.add(P4, `session ${sid}: the event at position ${i + 1} has seq ${e.seq} (a hole before it)`);
    });
  }
}

interface Child {
  readonly id: string;
  readonly sid: string;
  goal?: string;
  parent_id?: string | null;
}

/** Every child announced to a host of the round, by a spawn reply or any event of its session. */
export function announced(ledger: Ledger, history: History): Map<string, Child> {
  const out = new Map<string, Child>();
  const note = (sid: string, id: string) => out.get(id) ?? out.set(id, { id, sid }).get(id)!;
  for (const s of ledger.spawns) for (const id of s.reply?.subagent_ids ?? []) note(s.session_id, id);
  for (const session of ledger.sessions) {
    for (const e of ordered(history, session.session_id)) {
      if (e.type === 'delegation.dispatched') for (const id of e.payload.subagent_ids as string[]) note(session.session_id, id);
      if (typeof e.payload.subagent_id !== 'string') continue;
      const child = note(session.session_id, e.payload.subagent_id);
      child.goal = e.payload.goal as string;
      child.parent_id = e.payload.parent_id as string | null;
    }
  }
  return out;
}

export function completions(history: History, child: Child): WireEvent[] {
  return ordered(history, child.sid).filter((e) => e.type === 'subagent.complete' && e.payload.subagent_id === child.id);
}

const isRestart = (e: WireEvent): boolean => e.payload.exit_reason === 'server_restart';

/** A script that cannot end by itself: it reaches `hang`, or a `spawn` of such a task, first. */
function stuck(task: Task | undefined, tasks: Map<string, Task>): boolean {
  for (const step of task?.agent.steps ?? []) {
    if (step.op === 'hang') return true;
    if (step.op === 'finish' || step.op === 'fail') return false;
    if (step.op === 'spawn' && (step.tasks as Task[]).some((t) => stuck(tasks.get(t.goal), tasks))) return true;
  }
  return false;
}

/** How a script ends when nobody stops it. */
function natural(task: Task): string {
  const end = task.agent.steps.find((s) => s.op === 'finish' || s.op === 'fail');
  return end?.op === 'fail' ? 'failed' : 'completed';
}

/** An interrupt (answered or not) may have reached the child: it targeted it or an ancestor. */
function maybeStopped(targets: Set<string>, kids: Map<string, Child>, child: Child): boolean {
  for (let c: Child | undefined = child; c; c = c.parent_id ? kids.get(c.parent_id) : undefined) if (targets.has(c.id)) return true;
  return false;
}

/** An interrupt targeted one of its descendants: a `spawn` step it waits in may then end. */
function descendantStopped(targets: Set<string>, kids: Map<string, Child>, child: Child): boolean {
  return [...kids.values()].some((k) => k.parent_id === child.id && (targets.has(k.id) || descendantStopped(targets, kids, k)));
}

/** Promise 2, and that each child ends as its script and the interrupts say. */
export function checkChildren(ledger: Ledger, history: History, v: Violations): void {
  const kids = announced(ledger, history);
  const targets = new Set(ledger.interrupts.map((i) => i.subagent_id));
  const reached = new Set(ledger.interrupts.flatMap((i) => (i.reply?.found ? i.reply.interrupted : [])));
  for (const child of kids.values()) {
    const done = completions(history, child);
    if (done.length !== 1) {
      v.add(P2, `child ${child.id} (${child.goal ?? 'goal unknown'}) has ${done.length} subagent.complete events (seqs ${done.map((e) => e.seq).join(', ')})`);
      continue;
    }
    const c = done[0]!.payload;
    const what = `child ${child.id} (${child.goal}) ended ${String(c.status)}/${String(c.exit_reason)}`;
    if (child.goal === undefined) v.add(P2, `child ${child.id} was announced but its session's ring holds no event about it`);
    if (isRestart(done[0]!) && (c.status !== 'error' || typeof c.error !== 'string' || !c.error.startsWith(RESTART_ERROR))) {
      v.add(P2, `${what} with error ${JSON.stringify(c.error)}: a child lost by the restart ends status error, an error starting "${RESTART_ERROR}"`);
    }
    const task = ledger.tasks.get(child.goal ?? '');
    if (!task) continue;
    if (reached.has(child.id)) {
      if (c.status !== 'interrupted' && !isRestart(done[0]!)) v.add(P2, `${what}, though an interrupt answered that it reached it`);
    } else if (!maybeStopped(targets, kids, child) && !isRestart(done[0]!)) {
      if (stuck(task, ledger.tasks) && !descendantStopped(targets, kids, child))
        v.add(P2, `${what}: its script cannot end by itself, only the restart could end it`);
      else if (c.status !== natural(task)) v.add(P2, `${what}, its script ends ${natural(task)} and nothing stopped it`);
    }
  }
}

/** Promise 3: every steer answered queued ends once, delivered or missed, on its own child. */
export function checkSteers(ledger: Ledger, history: History, v: Violations): void {
  const endings = new Map<string, string[]>();
  const texts = new Set<string>();
  const end = (steer_id: string, child: string, how: string, text: string) => {
    endings.set(steer_id, [...(endings.get(steer_id) ?? []), `${how} on ${child}`]);
    texts.add(text);
  };
  for (const session of ledger.sessions) {
    for (const e of ordered(history, session.session_id)) {
      const child = e.payload.subagent_id as string;
      if (e.type === 'subagent.steer.delivered') end(e.payload.steer_id as string, child, `delivered (seq ${e.seq})`, e.payload.text as string);
      if (e.type !== 'subagent.complete') continue;
      const missed = (e.payload.missed_steer_detail ?? []) as Array<{ steer_id: string; text: string }>;
      for (const m of missed) end(m.steer_id, child, `missed (seq ${e.seq})`, m.text);
    }
  }
  for (const [steer_id, ends] of endings) if (ends.length > 1) v.add(P3, `steer ${steer_id} ended ${ends.length} times: ${ends.join('; ')}`);
  for (const s of ledger.steers) {
    const id = s.reply?.steer_id;
    if (s.reply?.status === 'rejected' && texts.has(s.text)) v.add(P3, `steer "${s.text}" was rejected, yet a delivery or a missed detail carries its text`);
    if (s.reply?.status !== 'queued' || id === undefined) continue;
    const ends = endings.get(id) ?? [];
    if (ends.length === 0) v.add(P3, `steer ${id} ("${s.text}" to ${s.subagent_id}) was answered queued and never delivered nor missed`);
    else if (ends.length === 1 && !ends[0]!.endsWith(` on ${s.subagent_id}`)) v.add(P3, `steer ${id} to ${s.subagent_id} ended ${ends[0]}`);
  }
}

/** After the first child the restart settled, only the settlement follows: nothing runs on. */
export function checkQuiet(ledger: Ledger, history: History, v: Violations): void {
  const settlement = new Set(['subagent.complete', 'delegation.complete', 'session.idle', 'message.complete']);
  for (const session of ledger.sessions) {
    const events = ordered(history, session.session_id);
    const from = events.findIndex((e) => e.type === 'subagent.complete' && isRestart(e));
    if (from < 0) continue;
    for (const e of events.slice(from)) {
      if (!settlement.has(e.type) || (e.type === 'subagent.complete' && !isRestart(e))) {
        v.add(
          QUIET,
          `session ${session.session_id} seq ${e.seq}: ${e.type} ${short(e.payload)} after the restart's settlement began (seq ${events[from]!.seq})`,
        );
      }
    }
  }
}

/** Every delegation dispatched (nested ones too) completes exactly once, the restart's included. */
export function checkDelegationsComplete(ledger: Ledger, history: History, v: Violations): void {
  for (const session of ledger.sessions) {
    const events = ordered(history, session.session_id);
    for (const d of events.filter((e) => e.type === 'delegation.dispatched')) {
      const id = d.payload.delegation_id as string;
      const n = events.filter((e) => e.type === 'delegation.complete' && e.payload.delegation_id === id).length;
      if (n !== 1) v.add(P5, `delegation ${id} (session ${session.session_id}) has ${n} delegation.complete events`);
    }
  }
}

/** The facts an entry and its child's wire completion share (fields a store may add aside). */
export function entryFacts(entry: WireEntry): Record<string, unknown> {
  const { subagent_id, task_index, status, exit_reason, summary, error, tool_trace, missed_steer, missed_steer_detail } = entry;
  return { subagent_id, task_index, status, exit_reason, summary, error, tool_trace, missed_steer, missed_steer_detail };
}

export function completionFacts(e: WireEvent): Record<string, unknown> {
  return entryFacts(wireEntry(e.payload));
}

export interface Recovered {
  sessions: number;
  children_settled: number;
  steers_missed: number;
}

/** What this start settled, as the round's histories show it: the children lost and their steers. */
export function settledByRestart(ledger: Ledger, history: History): { children: number; steers: number } {
  const lost = ledger.sessions.flatMap((s) => ordered(history, s.session_id)).filter((e) => e.type === 'subagent.complete' && isRestart(e));
  return { children: lost.length, steers: lost.reduce((n, e) => n + ((e.payload.missed_steer_detail as unknown[] | undefined)?.length ?? 0), 0) };
}

/** `recovered` must be there and match: sessions within [min, max], the rest exactly. */
export function checkRecovered(where: string, got: unknown, want: { min: number; max: number; children: number; steers: number }, v: Violations): void {
  const r = got as Partial<Recovered> | undefined;
  if (typeof r !== 'object' || r === null) return v.add(RECOVERED, `${where} has no recovered object (got ${JSON.stringify(got)})`);
  const sessions = r.sessions ?? -1;
  if (sessions < want.min || sessions > want.max) v.add(RECOVERED, `${where}: recovered.sessions ${r.sessions}, the open sessions are ${want.min}-${want.max}`);
  if (r.children_settled !== want.children) v.add(RECOVERED, `${where}: recovered.children_settled ${r.children_settled}, this start settled ${want.children}`);
  if (r.steers_missed !== want.steers) v.add(RECOVERED, `${where}: recovered.steers_missed ${r.steers_missed}, this start moved ${want.steers} to missed`);
}
