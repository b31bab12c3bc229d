// Authority fuzzing (protocol section 3): fast-check generates op lists that run sequentially
// against one RpcServer (in-memory transports, a manual clock) across three connection slots:
// create, attach (the right key and six wrong ones), detach, drop (close the connection; a fresh
// one takes the slot), reset, close and park expiry, with spawns, steers, tails, lists, statuses
// and interrupts in between, aimed at sessions and children of every kind (own, foreign, retired,
// finished, unknown). A small model says who is attached to what and which generation each child
// belongs to, and predicts every reply: each refused call must be refused exactly so, each allowed
// call must do what it says. After every op the model's view is checked through an authorized
// connection (list with finished children, statuses); every event any connection receives must be
// for a session it is attached to, about a child of that session's current generation; and at the
// end (server shutdown) the runtime's own event log must account for every accepted steer exactly
// once (delivered, or in missed_steer, in order) and show no trace of any refused one.
// Every call also carries spoofed authority params (owner_transport, transport_id, owner,
// generation), which must change nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { counterIds } from '../../src/ids.ts';
import type { EventEnvelope } from '../../src/registry/events.ts';
import { NOT_OWNED_MESSAGE } from '../../src/server/errors.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { memoryPair } from '../../src/rpc/transports/memory.ts';
import { ManualClock, flush } from '../helpers/manual-clock.ts';
import { RpcTestClient, type RpcReply } from '../helpers/rpc-client.ts';

const RUNS = 500;
const CONNS = 3;
const PARK_MS = 60_000;
/** Children wait for a steer, say something, and again; then hang: they end only when stopped. */
const WAITER = {
  kind: 'scripted',
  steps: [...Array.from({ length: 4 }, (_, i) => [{ op: 'wait_steer' }, { op: 'say', text: `round ${i + 1}` }]).flat(), { op: 'hang' }],
};
const SPOOF = { owner_transport: 'tr_1', transport_id: 'tr_1', owner: { session_id: 'ses_1', transport: 'tr_1', generation: 1 }, generation: 1 };

// ---- ops ----

type KeyKind = 'right' | 'flip' | 'longer' | 'shorter' | 'other' | 'empty' | 'number';
/**
 * `aim` (0-9): below 7, the op goes through an attached connection to its own session (and, for
 * child ops, to one of its live children) when there is one; otherwise `c`, `s` and `k` pick
 * blindly among everything (so refusals of every kind happen too).
 */
type Aimed = { readonly aim: number };
type Op =
  | { readonly op: 'create'; readonly c: number }
  | ({ readonly op: 'attach'; readonly c: number; readonly s: number; readonly key: KeyKind } & Aimed)
  | ({ readonly op: 'detach'; readonly c: number; readonly s: number } & Aimed)
  | { readonly op: 'drop'; readonly c: number }
  | ({ readonly op: 'reset'; readonly c: number; readonly s: number } & Aimed)
  | ({ readonly op: 'close'; readonly c: number; readonly s: number } & Aimed)
  | { readonly op: 'expire' }
  | ({ readonly op: 'spawn'; readonly c: number; readonly s: number; readonly n: number } & Aimed)
  | ({ readonly op: 'steer'; readonly c: number; readonly s: number; readonly k: number } & Aimed)
  | ({ readonly op: 'tail'; readonly c: number; readonly s: number; readonly k: number } & Aimed)
  | ({ readonly op: 'list'; readonly c: number; readonly s: number; readonly finished: boolean } & Aimed)
  | ({ readonly op: 'status'; readonly c: number; readonly s: number } & Aimed)
  | ({ readonly op: 'interrupt'; readonly c: number; readonly s: number; readonly k: number } & Aimed);

const c = fc.nat(CONNS - 1);
const s = fc.nat(20);
const k = fc.nat(40);
const aim = fc.nat(9);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constant('create' as const), c }) },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('attach' as const),
      aim,
      c,
      s,
      key: fc.constantFrom<KeyKind>('right', 'right', 'right', 'flip', 'longer', 'shorter', 'other', 'empty', 'number'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('detach' as const), aim, c, s }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('drop' as const), c }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reset' as const), aim, c, s }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('close' as const), aim, c, s }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('expire' as const) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('spawn' as const), aim, c, s, n: fc.integer({ min: 1, max: 2 }) }) },
  { weight: 6, arbitrary: fc.record({ op: fc.constant('steer' as const), aim, c, s, k }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('tail' as const), aim, c, s, k }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('list' as const), aim, c, s, finished: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('status' as const), aim, c, s }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('interrupt' as const), aim, c, s, k }) },
);
/** Every run starts with a session and two children, so the random ops have something to aim at. */
const opsArb = fc.array(opArb, { minLength: 5, maxLength: 40 }).map((ops): Op[] => [{ op: 'create', c: 0 }, { op: 'spawn', aim: 0, c: 0, s: 0, n: 2 }, ...ops]);

// ---- the model ----

interface MSession {
  readonly id: string;
  readonly key: string;
  gen: number;
  closed: boolean;
  /** Serials of the connections attached now. */
  readonly slot: Set<number>;
}

interface MChild {
  readonly id: string;
  readonly session: MSession;
  readonly gen: number;
  done: boolean;
  /** Steer texts answered `queued`, in order. */
  readonly accepted: string[];
}

/** Outcome tallies over every run: how often each op was allowed and refused (figures for the docs). */
const tally = new Map<string, { allowed: number; refused: number }>();
function count(op: string, allowed: boolean): void {
  const t = tally.get(op) ?? { allowed: 0, refused: 0 };
  if (allowed) t.allowed += 1;
  else t.refused += 1;
  tally.set(op, t);
}
let totalOps = 0;
let totalAccepted = 0;
let totalDelivered = 0;
let totalMissed = 0;

interface Conn {
  readonly serial: number;
  readonly client: RpcTestClient;
  close(): void;
}

async function runOps(ops: readonly Op[], run: number): Promise<string[]> {
  const clock = new ManualClock();
  const server = new RpcServer({ clock, ids: counterIds(), max_concurrent_children: 3, park_ttl_ms: PARK_MS });
  const bus: EventEnvelope[] = [];
  server.runtime.events.subscribe('**', (e) => {
    bus.push(e);
  });
  const violations: string[] = [];
  const fail = (msg: string): void => {
    violations.push(msg);
  };
  const sessions: MSession[] = [];
  const children: MChild[] = [];
  const refusedSteers: string[] = [];
  const lastSeq = new Map<string, number>();
  const completedSeen = new Set<string>();
  let serials = 0;
  let steerN = 0;

  const sessionById = (id: unknown) => sessions.find((x) => x.id === id);
  const childById = (id: unknown) => children.find((x) => x.id === id);

  /** Checks every event a connection receives, at the moment it arrives. */
  const inspect = (serial: number, text: string) => {
    const msg = JSON.parse(text) as { method?: string; params?: { type: string; session_id?: string; seq: number; payload: Record<string, unknown> } };
    if (msg.method !== 'event' || !msg.params || msg.params.session_id === undefined) return;
    const e = msg.params;
    const where = `conn ${serial} got ${e.type} seq ${e.seq} of ${e.session_id}`;
    const session = sessionById(e.session_id);
    if (!session || session.closed) return fail(`${where}: the session is closed or unknown`);
    if (!session.slot.has(serial)) return fail(`${where}: the connection is not attached`);
    const seqKey = `${serial}/${session.id}`;
    if (e.seq <= (lastSeq.get(seqKey) ?? 0)) fail(`${where}: seq did not rise`);
    lastSeq.set(seqKey, e.seq);
    // The children an event is about may be unknown to the model until the spawn's reply arrives
    // (a spawn's events can come first): checked once the op is over, against the generation the
    // session had when the event arrived.
    deferred.push({ serial, e, where, session, gen: session.gen });
  };
  const deferred: Array<{ serial: number; e: { type: string; payload: Record<string, unknown> }; where: string; session: MSession; gen: number }> = [];
  const drain = () => {
    for (const { serial, e, where, session, gen } of deferred.splice(0)) {
      const ids = [e.payload.subagent_id, ...((e.payload.subagent_ids as unknown[] | undefined) ?? [])].filter((x) => x !== undefined);
      for (const id of ids) {
        const child = childById(id);
        if (!child) {
          fail(`${where}: about ${String(id)}, a child the model does not know`);
          continue;
        }
        if (child.session !== session) fail(`${where}: about ${child.id}, a child of another session`);
        else if (child.gen !== gen) fail(`${where}: about ${child.id}, a child of retired generation ${child.gen}`);
        if (completedSeen.has(`${serial}/${child.id}`)) fail(`${where}: about ${child.id}, after its subagent.complete`);
      }
      if (e.type === 'subagent.complete') completedSeen.add(`${serial}/${String(e.payload.subagent_id)}`);
    }
  };

  const open = (): Conn => {
    const serial = ++serials;
    const pair = memoryPair();
    const client = new RpcTestClient((t) => pair.client.send(t));
    pair.client.onmessage = (t) => {
      inspect(serial, t);
      client.receive(t);
    };
    pair.client.onclose = () => client.handleClosed();
    server.connect(pair.server);
    return { serial, client, close: () => pair.client.close() };
  };
  const conns: Conn[] = Array.from({ length: CONNS }, open);

  const pickSession = (i: number) => (i % (sessions.length + 1) === sessions.length ? undefined : sessions[i % (sessions.length + 1)]);
  const pickChild = (i: number) => (i % (children.length + 1) === children.length ? undefined : children[i % (children.length + 1)]);
  const authorized = (conn: Conn, session: MSession | undefined) => session !== undefined && !session.closed && session.slot.has(conn.serial);
  const visible = (session: MSession, child: MChild | undefined) => child !== undefined && child.session === session && child.gen === session.gen;
  const liveOf = (session: MSession) => children.filter((x) => x.session === session && !x.done);
  const callOn = (conn: Conn, method: string, params: Record<string, unknown>): Promise<RpcReply> => conn.client.call(method, { ...SPOOF, ...params });

  const expectNotOwned = (what: string, r: RpcReply) => {
    if (r.error?.code !== 4001 || r.error.message !== NOT_OWNED_MESSAGE) fail(`${what}: expected 4001, got ${JSON.stringify(r)}`);
  };
  const expectResult = (what: string, r: RpcReply, check: (result: Record<string, unknown>) => string | undefined) => {
    if (r.error) return fail(`${what}: expected a result, got ${JSON.stringify(r.error)}`);
    const problem = check(r.result as Record<string, unknown>);
    if (problem) fail(`${what}: ${problem}; got ${JSON.stringify(r.result)}`);
  };
  const same = (a: readonly string[], b: readonly string[]) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

  const apply = async (op: Op, i: number): Promise<void> => {
    const what = `run ${run} op ${i} ${JSON.stringify(op)}`;
    totalOps += 1;
    if (op.op === 'expire') {
      for (const x of sessions) {
        if (x.closed || x.slot.size > 0) continue;
        x.closed = true;
        for (const ch of liveOf(x)) ch.done = true;
      }
      await clock.advance(PARK_MS);
      return;
    }
    if (op.op === 'drop') {
      const conn = conns[op.c] as Conn;
      conn.close();
      for (const x of sessions) x.slot.delete(conn.serial);
      conns[op.c] = open();
      return;
    }
    let conn = conns[op.c] as Conn;
    if (op.op === 'create') {
      const r = await callOn(conn, 'session.create', { title: `s${sessions.length}` });
      count('create', true);
      const res = r.result as { session_id: string; session_key: string; generation: number } | undefined;
      if (!res || res.generation !== 1) return void fail(`${what}: ${JSON.stringify(r)}`);
      sessions.push({ id: res.session_id, key: res.session_key, gen: 1, closed: false, slot: new Set([conn.serial]) });
      return;
    }
    let session = pickSession(op.s);
    const pairs = conns.flatMap((cn) => sessions.filter((x) => authorized(cn, x)).map((x) => [cn, x] as const));
    // A right-key attach aims at a session the connection is not attached to yet.
    const aimed = op.op === 'attach' ? conns.flatMap((cn) => sessions.filter((x) => !x.closed && !x.slot.has(cn.serial)).map((x) => [cn, x] as const)) : pairs;
    if (op.aim < 7 && aimed.length > 0) [conn, session] = aimed[(op.c * 7 + op.s) % aimed.length] as readonly [Conn, MSession];
    const sid = session?.id ?? 'ses_unknown';
    const childFor = (i: number) => {
      const mine = session ? liveOf(session).filter((x) => x.gen === session?.gen) : [];
      return op.aim < 7 && mine.length > 0 ? mine[i % mine.length] : pickChild(i);
    };
    const ok = authorized(conn, session);
    switch (op.op) {
      case 'attach': {
        const other = sessions.find((x) => x !== session)?.key ?? 'x'.repeat(32);
        const right = session?.key ?? 'y'.repeat(32);
        const key: unknown = {
          right,
          flip: `${right.slice(0, -1)}${right.endsWith('A') ? 'B' : 'A'}`,
          longer: `${right}A`,
          shorter: right.slice(1),
          other,
          empty: '',
          number: 12345,
        }[op.key];
        const target = session !== undefined && !session.closed && op.key === 'right' ? session : undefined;
        if (target) target.slot.add(conn.serial);
        const r = await callOn(conn, 'session.attach', { session_id: sid, session_key: key });
        count(`attach (${op.key === 'right' ? 'right key' : 'wrong key'})`, target !== undefined);
        if (!target) return expectNotOwned(what, r);
        const live = liveOf(target).filter((x) => x.gen === target.gen).length;
        return expectResult(what, r, (x) =>
          x.generation === target.gen && x.live_subagents === live ? undefined : `expected generation ${target.gen}, ${live} live`,
        );
      }
      case 'detach': {
        const r = await callOn(conn, 'session.detach', { session_id: sid });
        count('detach', ok);
        if (!ok) return expectNotOwned(what, r);
        session?.slot.delete(conn.serial);
        return expectResult(what, r, (x) => (x.detached === true ? undefined : 'expected detached'));
      }
      case 'reset': {
        if (ok) {
          for (const ch of liveOf(session as MSession)) ch.done = true;
          (session as MSession).gen += 1;
        }
        const r = await callOn(conn, 'session.reset', { session_id: sid });
        count('reset', ok);
        if (!ok) return expectNotOwned(what, r);
        return expectResult(what, r, (x) => (x.generation === session?.gen && x.session_id === sid ? undefined : `expected generation ${session?.gen}`));
      }
      case 'close': {
        const live = ok ? liveOf(session as MSession).length : 0;
        const r = await callOn(conn, 'session.close', { session_id: sid });
        count('close', ok);
        if (!ok) return expectNotOwned(what, r);
        // Committed at the reply, not before: a child still queued completes synchronously inside
        // the close, while the session is still open, and its completion reaches the slot.
        (session as MSession).closed = true;
        (session as MSession).slot.clear();
        for (const ch of liveOf(session as MSession)) ch.done = true;
        return expectResult(what, r, (x) => (x.closed === true && x.interrupted === live ? undefined : `expected ${live} interrupted`));
      }
      case 'spawn': {
        const tasks = Array.from({ length: op.n }, (_, j) => ({ goal: `g${i}.${j}`, agent: WAITER }));
        const r = await callOn(conn, 'delegation.spawn', { session_id: sid, tasks });
        count('spawn', ok);
        if (!ok) return expectNotOwned(what, r);
        const res = r.result as { subagent_ids?: string[] } | undefined;
        if (!res?.subagent_ids || res.subagent_ids.length !== op.n) return void fail(`${what}: ${JSON.stringify(r)}`);
        for (const id of res.subagent_ids) children.push({ id, session: session as MSession, gen: (session as MSession).gen, done: false, accepted: [] });
        return;
      }
      case 'steer': {
        const child = childFor(op.k);
        const target = child?.id ?? 'sa_unknown';
        const text = `~r${run}s${++steerN}~`;
        const r = await callOn(conn, 'subagent.steer', { session_id: sid, subagent_id: target, text: `  ${text} ` });
        if (!ok) {
          count('steer', false);
          refusedSteers.push(text);
          return expectNotOwned(what, r);
        }
        const queued = visible(session as MSession, child) && !child?.done;
        count(queued ? 'steer' : 'steer (foreign, retired, finished or unknown child)', queued);
        if (!queued) {
          refusedSteers.push(text);
          // The caller's own finished child is `finished`; any other it cannot see, `not_found`.
          const reason = visible(session as MSession, child) ? 'finished' : 'not_found';
          return expectResult(what, r, (x) =>
            same(Object.keys(x), ['status', 'subagent_id', 'text', 'reason']) && x.status === 'rejected' && x.text === text && x.reason === reason
              ? undefined
              : `expected rejected (${reason})`,
          );
        }
        child?.accepted.push(text);
        totalAccepted += 1;
        return expectResult(what, r, (x) =>
          x.status === 'queued' && x.text === text && typeof x.steer_id === 'string' && !('delivered' in x) ? undefined : 'expected queued',
        );
      }
      case 'tail': {
        const child = childFor(op.k);
        const target = child?.id ?? 'sa_unknown';
        const r = await callOn(conn, 'subagent.tail', { session_id: sid, subagent_id: target });
        if (!ok) {
          count('tail', false);
          return expectNotOwned(what, r);
        }
        const seen = visible(session as MSession, child);
        count(seen ? 'tail' : 'tail (foreign, retired or unknown child)', seen);
        return expectResult(what, r, (x) =>
          seen
            ? // A child still queued has written nothing yet; a started one begins with its start line;
              // one stopped while it was still queued holds only its final line.
              x.available === true && (x.text === '' || (x.text as string).startsWith('[start]') || x.text === '[interrupted] interrupted before it started\n')
              ? undefined
              : 'expected the transcript'
            : JSON.stringify(x) === JSON.stringify({ subagent_id: target, available: false, text: '', truncated: false, offset: 0 })
              ? undefined
              : 'expected the not-found tail',
        );
      }
      case 'list': {
        const r = await callOn(conn, 'subagent.list', { session_id: sid, include_finished: op.finished });
        count('list', ok);
        if (!ok) return expectNotOwned(what, r);
        const want = children.filter((x) => x.session === session && x.gen === session?.gen && (op.finished || !x.done)).map((x) => x.id);
        return expectResult(what, r, (x) =>
          same(
            (x.subagents as Array<{ subagent_id: string }>).map((y) => y.subagent_id),
            want,
          )
            ? undefined
            : `expected ${want.join(',')}`,
        );
      }
      case 'status': {
        const r = await callOn(conn, 'delegation.status', { session_id: sid });
        count('status', ok);
        if (!ok) return expectNotOwned(what, r);
        const want = liveOf(session as MSession)
          .filter((x) => x.gen === session?.gen)
          .map((x) => x.id);
        return expectResult(what, r, (x) =>
          same(
            (x.active as Array<{ subagent_id: string }>).map((y) => y.subagent_id),
            want,
          ) && x.paused === false
            ? undefined
            : `expected ${want.join(',')}`,
        );
      }
      case 'interrupt': {
        const child = childFor(op.k);
        const target = child?.id ?? 'sa_unknown';
        const r = await callOn(conn, 'subagent.interrupt', { session_id: sid, subagent_id: target });
        if (!ok) {
          count('interrupt', false);
          return expectNotOwned(what, r);
        }
        const found = visible(session as MSession, child) && !child?.done;
        count(found ? 'interrupt' : 'interrupt (foreign, retired, finished or unknown child)', found);
        if (found) (child as MChild).done = true;
        return expectResult(what, r, (x) =>
          JSON.stringify(x) === JSON.stringify({ found, subagent_id: target, interrupted: found ? [target] : [] }) ? undefined : `expected found ${found}`,
        );
      }
    }
  };

  /** The model's view, checked through an authorized connection for every session that has one. */
  const verify = async (i: number): Promise<void> => {
    for (const x of sessions) {
      if (x.closed) continue;
      const conn = conns.find((cn) => x.slot.has(cn.serial));
      if (!conn) continue;
      const r = await conn.client.call('subagent.list', { session_id: x.id, include_finished: true });
      const got = (r.result as { subagents?: Array<{ subagent_id: string; status: string }> } | undefined)?.subagents;
      if (!got) {
        fail(`after op ${i}: list of ${x.id} through an attached connection failed: ${JSON.stringify(r)}`);
        continue;
      }
      const want = children.filter((ch) => ch.session === x && ch.gen === x.gen);
      if (
        !same(
          got.map((y) => y.subagent_id),
          want.map((ch) => ch.id),
        )
      ) {
        fail(`after op ${i}: ${x.id} lists ${got.map((y) => y.subagent_id).join(',')}, the model says ${want.map((ch) => ch.id).join(',')}`);
        continue;
      }
      for (const ch of want) {
        const status = got.find((y) => y.subagent_id === ch.id)?.status;
        const okStatus = ch.done ? status === 'interrupted' : status === 'queued' || status === 'running';
        if (!okStatus) fail(`after op ${i}: ${ch.id} is ${status}, the model says ${ch.done ? 'interrupted' : 'live'}`);
      }
    }
  };

  try {
    for (const [i, op] of ops.entries()) {
      await apply(op, i);
      await flush();
      drain();
      await verify(i);
      drain();
      if (violations.length > 0) break;
    }
    if (violations.length > 0) return violations;
    // The end: shutdown stops everything; the runtime's own event log is the ground truth.
    await server.shutdown();
    await flush();
    const busText = JSON.stringify(bus);
    for (const text of refusedSteers) if (busText.includes(text)) fail(`refused steer ${text} left a trace`);
    const spawned = bus.filter((e) => e.type === 'subagent.spawn_requested').map((e) => e.subagent_id as string);
    if (
      !same(
        spawned,
        children.map((ch) => ch.id),
      )
    )
      fail(`the runtime spawned ${spawned.join(',')}, the model knows ${children.map((ch) => ch.id).join(',')}`);
    for (const ch of children) {
      const completes = bus.filter((e) => e.type === 'subagent.complete' && e.subagent_id === ch.id);
      if (completes.length !== 1) {
        fail(`${ch.id}: ${completes.length} completion events`);
        continue;
      }
      const entry = (completes[0] as EventEnvelope & { entry: { status: string; missed_steer?: string } }).entry;
      if (entry.status !== 'interrupted') fail(`${ch.id}: completed ${entry.status}`);
      const delivered = bus.filter((e) => e.type === 'subagent.steer.delivered' && e.subagent_id === ch.id).map((e) => e.text as string);
      const missed = entry.missed_steer === undefined ? [] : entry.missed_steer.split('\n');
      totalDelivered += delivered.length;
      totalMissed += missed.length;
      if (JSON.stringify([...delivered, ...missed]) !== JSON.stringify(ch.accepted)) {
        fail(`${ch.id}: accepted ${ch.accepted.join(' ')}, delivered ${delivered.join(' ')}, missed ${missed.join(' ')}`);
      }
      const after = bus.slice(bus.indexOf(completes[0] as EventEnvelope) + 1).filter((e) => e.subagent_id === ch.id);
      if (after.length > 0) fail(`${ch.id}: ${after.map((e) => e.type).join(',')} after its completion`);
    }
    return violations;
  } finally {
    for (const conn of conns) conn.close();
  }
}

describe('authority fuzzing: random create/attach/detach/drop/reset/close/expire with steers, tails, lists and interrupts', () => {
  it(`matches the model on every reply, every event and every steer over ${RUNS} generated op lists`, async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(opsArb, async (ops) => {
        const violations = await runOps(ops, ++run);
        expect(violations).toEqual([]);
      }),
      { numRuns: RUNS },
    );
    const rows = [...tally.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([op, t]) => `${op}: ${t.allowed} allowed, ${t.refused} refused`);
    console.log(
      `[fuzz.authority] ${run} runs, ${totalOps} ops; ${totalAccepted} steers accepted (${totalDelivered} delivered, ${totalMissed} missed)\n  ${rows.join('\n  ')}`,
    );
    // The runs really exercised both sides of every rule.
    for (const op of ['attach (right key)', 'detach', 'reset', 'close', 'spawn', 'steer', 'tail', 'list', 'status', 'interrupt']) {
      expect(tally.get(op)?.allowed ?? 0, `${op} allowed`).toBeGreaterThan(0);
      expect(tally.get(op)?.refused ?? 0, `${op} refused`).toBeGreaterThan(0);
    }
    expect(tally.get('attach (wrong key)')?.refused ?? 0).toBeGreaterThan(0);
    expect(tally.get('attach (wrong key)')?.allowed ?? 0).toBe(0);
    for (const op of [
      'steer (foreign, retired, finished or unknown child)',
      'tail (foreign, retired or unknown child)',
      'interrupt (foreign, retired, finished or unknown child)',
    ]) {
      expect(tally.get(op)?.refused ?? 0, op).toBeGreaterThan(0);
    }
    expect(totalDelivered).toBeGreaterThan(0);
    expect(totalMissed).toBeGreaterThan(0);
  }, 60_000);

  it('the checker catches a broken server: a steer accepted through a foreign session shows up as a violation', async () => {
    // A canary for the harness itself: run a fixed op list against a server whose runtime answers
    // a foreign child's steer (scoping switched off). The model must notice.
    const original = RpcServer.prototype.connect;
    const ops: Op[] = [
      { op: 'create', c: 0 },
      { op: 'spawn', aim: 9, c: 0, s: 0, n: 1 },
      { op: 'create', c: 1 },
      { op: 'steer', aim: 9, c: 1, s: 1, k: 0 },
    ];
    let patched = 0;
    RpcServer.prototype.connect = function (this: RpcServer, t) {
      if (patched++ === 0) {
        const scoped = this.runtime.scoped as { steer: (scope: unknown, id: string, text: string) => unknown };
        scoped.steer = (_scope, id, text) => this.runtime.steer(id, text);
      }
      return original.call(this, t);
    };
    try {
      const violations = await runOps(ops, 0);
      expect(violations.join('\n')).toMatch(/op 3 .*expected rejected/);
    } finally {
      RpcServer.prototype.connect = original;
    }
  });
});
