// One kill -9 round's random schedule, drawn from a seeded PRNG: 1-3 hosts, 1-2 sessions, then,
// until the kill, spawns of scripted children (some keyed, some retried with the same key),
// steers from every attached host, interrupts and the odd new session, each sent without waiting
// for the previous one's reply. The ledger keeps every request with the reply it got, or none if
// the kill came first: only answered requests oblige the server (the oracle holds what hosts were
// told). Timing is the machine's; the seed fixes every choice, so a failing seed can be rerun.
import { setTimeout as pause } from 'node:timers/promises';
import type { RpcErrorObject } from '../helpers/rpc-client.ts';
import { callOrLost, lastSeen, mustCall, sessionEvents, type Host } from './harness.ts';

export interface Rng {
  /** In [0, 1). */
  next(): number;
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

/** mulberry32: tiny, fast and good enough to draw a schedule from a 32-bit seed. */
export function seededRng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  return { next, int, pick: (items) => items[int(0, items.length - 1)]!, chance: (p) => next() < p };
}

export type Step = { op: string } & Record<string, unknown>;
export interface Task {
  readonly goal: string;
  readonly agent: { readonly kind: 'scripted'; readonly steps: Step[] };
}

export interface SessionRec {
  readonly session_id: string;
  readonly session_key: string;
  /** The hosts attached to it before the kill (its creator first). */
  readonly hosts: number[];
}

export interface SpawnRec {
  readonly session_id: string;
  readonly host: number;
  readonly params: { session_id: string; tasks: Task[]; idempotency_key?: string };
  reply?: { delegation_id: string; subagent_ids: string[]; idempotent_replay?: boolean };
  error?: RpcErrorObject;
}

export interface SteerRec {
  readonly session_id: string;
  readonly subagent_id: string;
  readonly text: string;
  reply?: { status: string; steer_id?: string };
  error?: RpcErrorObject;
}

export interface InterruptRec {
  readonly session_id: string;
  readonly subagent_id: string;
  reply?: { found: boolean; interrupted: string[] };
}

export interface Ledger {
  readonly seed: number;
  /** The hosts of the round, as they were before the kill: their events are what was seen. */
  readonly hosts: Host[];
  readonly sessions: SessionRec[];
  /** session.create requests the kill cut off: such a session may exist, unknown to any host. */
  createsLost: number;
  readonly spawns: SpawnRec[];
  readonly steers: SteerRec[];
  readonly interrupts: InterruptRec[];
  /** Every task sent, grandchildren included, by its goal (goals are unique). */
  readonly tasks: Map<string, Task>;
}

export function newLedger(seed: number, hosts: Host[]): Ledger {
  return { seed, hosts, sessions: [], createsLost: 0, spawns: [], steers: [], interrupts: [], tasks: new Map() };
}

/** Short steps: a round lasts 50-400 ms before the kill, so some children finish and some do not. */
function steps(r: Rng, goal: string, depth: number, ledger: Ledger): Step[] {
  const out: Step[] = [];
  for (let i = r.int(1, 4); i > 0; i--) {
    const roll = r.next();
    if (roll < 0.15) out.push({ op: 'say', text: `${goal} says ${i}` });
    else if (roll < 0.25) out.push({ op: 'think', text: `${goal} thinks ${i}` });
    else if (roll < 0.5) out.push({ op: 'tool', name: 'read_file', args: { path: `f${i}.md` }, ms: r.int(5, 60) });
    else if (roll < 0.6) out.push({ op: 'sleep', ms: r.int(5, 60) });
    else if (roll < 0.85) out.push(r.chance(0.7) ? { op: 'wait_steer', timeout_ms: r.int(10, 120) } : { op: 'wait_steer' });
    else if (depth === 0) out.push({ op: 'spawn', tasks: Array.from({ length: r.int(1, 2) }, (_, g) => task(r, `${goal}.${i}g${g}`, 1, ledger)) });
  }
  const end = r.next();
  if (end < 0.35) out.push({ op: 'finish', summary: `${goal} done` });
  else if (end < 0.5) out.push({ op: 'fail', error: `${goal} failed` });
  else if (end < 0.8) out.push({ op: 'hang' });
  return out;
}

function task(r: Rng, goal: string, depth: number, ledger: Ledger): Task {
  const t: Task = { goal, agent: { kind: 'scripted', steps: steps(r, goal, depth, ledger) } };
  ledger.tasks.set(goal, t);
  return t;
}

/** Every child id the hosts know of in session `sid`: from spawn replies and from events. */
export function knownChildren(ledger: Ledger, sid: string): string[] {
  const ids = new Set<string>();
  for (const s of ledger.spawns) if (s.session_id === sid) for (const id of s.reply?.subagent_ids ?? []) ids.add(id);
  for (const h of ledger.hosts) {
    for (const e of sessionEvents(h, sid)) if (typeof e.payload.subagent_id === 'string') ids.add(e.payload.subagent_id);
  }
  return [...ids];
}

/** Round-scoped names, so that goals, keys and steer texts never collide across rounds. */
function namer(seed: number): (kind: string) => string {
  let n = 0;
  const tag = seed.toString(36);
  return (kind) => `k9-${tag}-${kind}${n++}`;
}

/** Creates 1-2 sessions and attaches other hosts to them with the key (all awaited: the setup). */
async function setup(r: Rng, ledger: Ledger): Promise<void> {
  for (let i = r.int(1, 2); i > 0; i--) {
    const creator = r.pick(ledger.hosts);
    const s = await mustCall<{ session_id: string; session_key: string }>(creator, 'session.create', { title: `kill9 ${ledger.seed}` });
    const rec: SessionRec = { session_id: s.session_id, session_key: s.session_key, hosts: [creator.index] };
    for (const h of ledger.hosts) {
      if (h === creator || !r.chance(0.7)) continue;
      await mustCall(h, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
      rec.hosts.push(h.index);
    }
    ledger.sessions.push(rec);
  }
}

type Act = (r: Rng, ledger: Ledger, name: (kind: string) => string) => Promise<void>;

const spawn: Act = async (r, ledger, name) => {
  const s = r.pick(ledger.sessions);
  const tasks = Array.from({ length: r.int(1, 3) }, () => task(r, name('c'), 0, ledger));
  const params: SpawnRec['params'] = { session_id: s.session_id, tasks, ...(r.chance(0.4) ? { idempotency_key: name('key') } : {}) };
  await sendSpawn(ledger, { session_id: s.session_id, host: r.pick(s.hosts), params });
};

/** The same params and key again, from any host of the session (a host retrying a lost reply). */
const retry: Act = async (r, ledger) => {
  const keyed = ledger.spawns.filter((s) => s.params.idempotency_key !== undefined);
  if (keyed.length === 0) return;
  const first = r.pick(keyed);
  const s = ledger.sessions.find((x) => x.session_id === first.session_id)!;
  await sendSpawn(ledger, { session_id: first.session_id, host: r.pick(s.hosts), params: first.params });
};

async function sendSpawn(ledger: Ledger, rec: SpawnRec): Promise<void> {
  ledger.spawns.push(rec);
  const reply = await callOrLost(ledger.hosts[rec.host]!, 'delegation.spawn', rec.params);
  if (reply?.error) rec.error = reply.error;
  else if (reply) rec.reply = reply.result as SpawnRec['reply'];
}

const steer: Act = async (r, ledger, name) => {
  const s = r.pick(ledger.sessions);
  const children = knownChildren(ledger, s.session_id);
  if (children.length === 0) return;
  const rec: SteerRec = { session_id: s.session_id, subagent_id: r.pick(children), text: name('steer') };
  ledger.steers.push(rec);
  const reply = await callOrLost(ledger.hosts[r.pick(s.hosts)]!, 'subagent.steer', {
    session_id: rec.session_id,
    subagent_id: rec.subagent_id,
    text: rec.text,
  });
  if (reply?.error) rec.error = reply.error;
  else if (reply) rec.reply = reply.result as SteerRec['reply'];
};

const interrupt: Act = async (r, ledger) => {
  const s = r.pick(ledger.sessions);
  const children = knownChildren(ledger, s.session_id);
  if (children.length === 0) return;
  const rec: InterruptRec = { session_id: s.session_id, subagent_id: r.pick(children) };
  ledger.interrupts.push(rec);
  const reply = await callOrLost(ledger.hosts[r.pick(s.hosts)]!, 'subagent.interrupt', { session_id: rec.session_id, subagent_id: rec.subagent_id });
  if (reply && !reply.error) rec.reply = reply.result as InterruptRec['reply'];
};

const create: Act = async (r, ledger) => {
  const host = r.pick(ledger.hosts);
  const reply = await callOrLost(host, 'session.create', { title: `kill9 ${ledger.seed}` });
  if (!reply) ledger.createsLost += 1;
  else if (!reply.error) {
    const s = reply.result as { session_id: string; session_key: string };
    ledger.sessions.push({ session_id: s.session_id, session_key: s.session_key, hosts: [host.index] });
  }
};

/** Weighted: steers dominate (the ledger is the point), spawns keep children coming. */
const ACTS: ReadonlyArray<readonly [number, Act]> = [
  [3, spawn],
  [4, steer],
  [1, interrupt],
  [1, retry],
  [0.3, create],
];

function pickAct(r: Rng): Act {
  let roll = r.next() * ACTS.reduce((sum, [w]) => sum + w, 0);
  for (const [w, act] of ACTS) if ((roll -= w) < 0) return act;
  return spawn;
}

/**
 * Runs the round until `kill` (called after a random 50-400 ms) has killed the server and every
 * host saw its socket close: whatever reached a host before that is in its events.
 */
export async function runSchedule(r: Rng, ledger: Ledger, kill: () => Promise<void>): Promise<void> {
  await setup(r, ledger);
  const name = namer(ledger.seed);
  let stopping = false;
  const sent: Promise<void>[] = [];
  const killed = pause(r.int(50, 400)).then(async () => {
    stopping = true;
    // A burst written right before the signal: the server may have read, done or persisted any
    // part of it, and answered none. Such requests are what the kill must not half-do.
    for (let i = r.int(0, 3); i > 0; i--) sent.push(pickAct(r)(r, ledger, name));
    await kill();
  });
  while (!stopping) {
    sent.push(pickAct(r)(r, ledger, name));
    // Pacing, not synchronisation: requests overlap, and some are in flight at the kill.
    await pause(r.int(0, 20));
  }
  await killed;
  await Promise.all(ledger.hosts.map((h) => h.client.closed));
  await Promise.all(sent);
}

/** The watermark each host holds for each session it was attached to: its highest seq seen. */
export function watermarks(ledger: Ledger): Array<{ session: SessionRec; host: number; last_seen: number }> {
  return ledger.sessions.flatMap((session) => session.hosts.map((host) => ({ session, host, last_seen: lastSeen(ledger.hosts[host]!, session.session_id) })));
}
