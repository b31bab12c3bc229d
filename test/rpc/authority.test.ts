// The authority matrix of protocol section 3, over the in-memory transport and over real
// WebSockets on 127.0.0.1. Every refusal is followed by the owner's own look at its child (list,
// status, tail, then a steer of its own that must be the only one ever delivered, and finally the
// completion entry, which must carry no missed steer): a refused call must leave no trace.
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.ts';
import type { Connection } from '../../src/rpc/connection.ts';
import { NOT_OWNED_MESSAGE } from '../../src/server/errors.ts';
import { RpcServer, type ServerOptions } from '../../src/rpc/server.ts';
import { listenWs, type WsListener } from '../../src/rpc/transports/ws.ts';
import { ManualClock } from '../helpers/manual-clock.ts';
import { BusLog, connectMemory, connectWs, fails, isEvent, ok, privateKeyLeaks, type RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

const TOKEN = 'authority-test-token';
const FOREIGN = 'FOREIGN steer';

/** A child that waits for a steer, says something, and does so again, many times; then hangs. */
const WAITER = {
  kind: 'scripted',
  steps: [...Array.from({ length: 12 }, (_, i) => [{ op: 'wait_steer' }, { op: 'say', text: `round ${i + 1}` }]).flat(), { op: 'hang' }],
};
const HANG = { kind: 'scripted', steps: [{ op: 'hang' }] };

// ---- harness: the same cases over both transports ----

type Kind = 'memory' | 'ws';

interface Peer {
  readonly client: RpcTestClient;
  /** The server's side of this connection. */
  readonly conn: Connection;
  /** Drops the connection from the client's side; resolves once the server has seen it close. */
  drop(): Promise<void>;
}

interface Harness {
  readonly server: RpcServer;
  open(): Promise<Peer>;
  /** Every event the runtime published in-process (also those routed to nobody). */
  readonly bus: BusLog;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(kind: Kind, options: ServerOptions = {}): Promise<Harness> {
  const server = new RpcServer({ max_spawn_depth: 2, ...options });
  const bus = new BusLog(server);
  const conns: Connection[] = [];
  let listener: WsListener | undefined;
  if (kind === 'ws') {
    listener = await listenWs({ host: '127.0.0.1', port: 0, token: TOKEN, allow_origins: [], max_message_bytes: 1024 * 1024, logger: silentLogger }, (t) => {
      conns.push(server.connect(t));
    });
  }
  const closers: Array<() => Promise<void>> = [];
  const clients: RpcTestClient[] = [];
  cleanups.push(async () => {
    // Whatever the case did, nothing private ever reached any connection.
    const leaks = clients.flatMap(privateKeyLeaks);
    for (const close of closers) await close();
    await server.shutdown();
    await listener?.close();
    expect(leaks).toEqual([]);
  });
  return {
    server,
    bus,
    async open(): Promise<Peer> {
      if (kind === 'memory') {
        const ep = connectMemory(server);
        clients.push(ep.client);
        closers.push(async () => ep.close());
        return {
          client: ep.client,
          conn: ep.conn,
          drop: async () => {
            ep.close();
            await ep.conn.whenClosed;
          },
        };
      }
      const ep = await connectWs((listener as WsListener).url, TOKEN);
      clients.push(ep.client);
      // connect() greets before anything else: once gateway.ready is here, its connection exists.
      await ep.client.waitForEvent(isEvent('gateway.ready'));
      const conn = conns.at(-1) as Connection;
      closers.push(() => ep.close());
      return {
        client: ep.client,
        conn,
        drop: async () => {
          ep.ws.terminate();
          await Promise.all([conn.whenClosed, ep.client.closed]);
        },
      };
    },
  };
}

// ---- small steps ----

async function createSession(c: RpcTestClient): Promise<{ session_id: string; session_key: string }> {
  return ok(c, 'session.create', {});
}

async function spawnOne(c: RpcTestClient, session_id: string, goal: string, agent: unknown = WAITER) {
  const r = await ok(c, 'delegation.spawn', { session_id, tasks: [{ goal, agent }] });
  const id = r.subagent_ids[0] as string;
  return { id, delegation_id: r.delegation_id };
}

const started = (c: RpcTestClient, id: string) => c.waitForEvent(isEvent('subagent.start', id));

async function expectNotOwned(c: RpcTestClient, method: string, params: Record<string, unknown>): Promise<void> {
  const err = await fails(c, method, params);
  expect(err, `${method} ${JSON.stringify(params)}`).toEqual({ code: 4001, message: NOT_OWNED_MESSAGE });
}

/** Every session-scoped call, each naming `session_id`: all must be 4001 for `c`. */
async function expectAllNotOwned(
  c: RpcTestClient,
  session_id: string,
  child: string,
  delegation_id: string,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const calls: Array<[string, Record<string, unknown>]> = [
    ['subagent.list', { session_id, include_finished: true }],
    ['subagent.tail', { session_id, subagent_id: child }],
    ['subagent.steer', { session_id, subagent_id: child, text: FOREIGN }],
    ['subagent.interrupt', { session_id, subagent_id: child }],
    ['delegation.spawn', { session_id, tasks: [{ goal: 'FOREIGN spawn', agent: WAITER }] }],
    ['delegation.result', { session_id, delegation_id }],
    ['delegation.status', { session_id }],
    ['delegation.pause', { session_id, paused: true }],
    ['session.reset', { session_id }],
    ['session.detach', { session_id }],
    ['session.close', { session_id }],
  ];
  for (const [method, params] of calls) await expectNotOwned(c, method, { ...params, ...extra });
}

let round = 0;

/**
 * The owner's own proof that nothing changed for `child`: it is listed as running and accepting
 * steers, the session is not paused and has exactly `expected` children, the transcript holds no
 * foreign text, and a steer of the owner's own is delivered, with no other steer ever delivered.
 */
async function expectUntouched(owner: RpcTestClient, session_id: string, child: string, expected: readonly string[]): Promise<void> {
  const list = await ok(owner, 'subagent.list', { session_id });
  expect(list.subagents.map((s) => s.subagent_id).sort()).toEqual([...expected].sort());
  expect(list.subagents.find((s) => s.subagent_id === child)).toMatchObject({ status: 'running', accepting_steer: true });
  const status = await ok(owner, 'delegation.status', { session_id });
  expect(status.paused).toBe(false);
  const tail = await ok(owner, 'subagent.tail', { session_id, subagent_id: child });
  expect(tail.available).toBe(true);
  expect(tail.text).not.toContain('FOREIGN');
  const text = `owner check ${++round}`;
  const steer = await ok(owner, 'subagent.steer', { session_id, subagent_id: child, text });
  expect(steer.status).toBe('queued');
  const steer_id = steer.status === 'queued' ? steer.steer_id : '';
  await owner.waitForEvent((e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === steer_id);
  for (const e of owner.eventsWhere(isEvent('subagent.steer.delivered', child))) {
    expect(String(e.payload.text)).toMatch(/^owner check \d+$/);
  }
}

/** The owner interrupts its child: found, and the entry carries no steer that did not land. */
async function expectCleanEnd(owner: RpcTestClient, session_id: string, child: string): Promise<void> {
  const r = await ok(owner, 'subagent.interrupt', { session_id, subagent_id: child });
  expect(r).toEqual({ found: true, subagent_id: child, interrupted: [child] });
  const done = await owner.waitForEvent(isEvent('subagent.complete', child));
  const entry = wireEntry(done.payload) as unknown as Record<string, unknown>;
  expect(entry.status).toBe('interrupted');
  expect(entry).not.toHaveProperty('missed_steer');
  expect(String(entry.error)).not.toContain('FOREIGN');
}

/** A round trip: every event the server sent `c` before this reply has arrived. */
async function barrier(c: RpcTestClient): Promise<void> {
  await ok(c, 'server.info');
}

const aboutSession = (session_id: string) => (e: WireEvent) => e.session_id === session_id;

// ---- the matrix ----

describe.each<Kind>(['memory', 'ws'])('authority matrix over %s', (kind) => {
  it('a foreign session: every call naming a session the caller is not attached to is 4001, and changes nothing', async () => {
    const h = await setup(kind);
    const a = await h.open();
    const b = await h.open();
    const sa = await createSession(a.client);
    await createSession(b.client);
    const child = await spawnOne(a.client, sa.session_id, 'a child');
    await started(a.client, child.id);

    await expectAllNotOwned(b.client, sa.session_id, child.id, child.delegation_id);

    await expectUntouched(a.client, sa.session_id, child.id, [child.id]);
    await barrier(b.client);
    expect(b.client.eventsWhere(aboutSession(sa.session_id))).toEqual([]);
    // The owner still controls everything: its session was neither reset, paused nor closed.
    expect((await ok(a.client, 'delegation.result', { session_id: sa.session_id, delegation_id: child.delegation_id })).done).toBe(false);
    await expectCleanEnd(a.client, sa.session_id, child.id);
  });

  it('the right session from a transport that is not attached is 4001, and changes nothing', async () => {
    const h = await setup(kind);
    const a = await h.open();
    const stranger = await h.open();
    const sa = await createSession(a.client);
    const child = await spawnOne(a.client, sa.session_id, 'a child');
    await started(a.client, child.id);

    await expectAllNotOwned(stranger.client, sa.session_id, child.id, child.delegation_id);
    // An unknown session is the same answer: no oracle.
    await expectNotOwned(stranger.client, 'subagent.list', { session_id: 'ses_doesnotexist' });

    await expectUntouched(a.client, sa.session_id, child.id, [child.id]);
    await barrier(stranger.client);
    expect(stranger.client.eventsWhere(aboutSession(sa.session_id))).toEqual([]);
    await expectCleanEnd(a.client, sa.session_id, child.id);
  });

  it('a retired generation: after session.reset the old children are interrupted, unreachable, and silent', async () => {
    const h = await setup(kind);
    const a = await h.open();
    const sa = await createSession(a.client);
    const q = await spawnOne(a.client, sa.session_id, 'old waiter');
    const p = await spawnOne(a.client, sa.session_id, 'old parent', {
      kind: 'scripted',
      steps: [{ op: 'spawn', tasks: [{ goal: 'old grandchild', agent: HANG }] }, { op: 'hang' }],
    });
    const gStart = await a.client.waitForEvent((e) => e.type === 'subagent.start' && e.payload.goal === 'old grandchild');
    const g = { id: String(gStart.payload.subagent_id), delegation_id: String(gStart.payload.delegation_id) };
    await started(a.client, q.id);
    const old = [q, p, g];
    const oldIds = new Set(old.map((c) => c.id));
    const oldDelegations = new Set(old.map((c) => c.delegation_id));

    // Every old child is now waiting (for a steer, its children, or forever): from here on, any
    // event about them would be one the reset caused, and none may reach the session.
    const beforeReset = a.client.mark();
    const reset = await ok(a.client, 'session.reset', { session_id: sa.session_id });
    expect(reset).toEqual({ session_id: sa.session_id, generation: 2 });

    // Interrupted (seen in-process: nothing of theirs is routed any more), delegations closed too.
    for (const c of old) expect(((await h.bus.completed(c.id)).entry as { status: string }).status).toBe('interrupted');
    for (const d of oldDelegations) await h.bus.wait((e) => e.type === 'delegation.complete' && e.delegation_id === d);

    for (const c of old) {
      expect(await ok(a.client, 'subagent.tail', { session_id: sa.session_id, subagent_id: c.id })).toEqual({
        subagent_id: c.id,
        available: false,
        text: '',
        truncated: false,
        offset: 0,
      });
      expect(await ok(a.client, 'subagent.steer', { session_id: sa.session_id, subagent_id: c.id, text: 'hello old' })).toEqual({
        status: 'rejected',
        subagent_id: c.id,
        text: 'hello old',
        reason: 'not_found',
      });
      expect(await ok(a.client, 'subagent.interrupt', { session_id: sa.session_id, subagent_id: c.id })).toEqual({
        found: false,
        subagent_id: c.id,
        interrupted: [],
      });
    }
    for (const d of oldDelegations) {
      expect(await fails(a.client, 'delegation.result', { session_id: sa.session_id, delegation_id: d })).toMatchObject({ code: 4004 });
    }
    const list = await ok(a.client, 'subagent.list', { session_id: sa.session_id, include_finished: true });
    expect(list.subagents.filter((s) => oldIds.has(s.subagent_id))).toEqual([]);
    expect((await ok(a.client, 'delegation.status', { session_id: sa.session_id })).active).toEqual([]);

    // The new generation works, and its events follow on with no gap.
    const fresh = await spawnOne(a.client, sa.session_id, 'new child');
    await started(a.client, fresh.id);
    await expectUntouched(a.client, sa.session_id, fresh.id, [fresh.id]);
    await barrier(a.client);
    const leaked = a.client.events
      .slice(beforeReset)
      .filter((e) => oldIds.has(String(e.payload.subagent_id)) || oldDelegations.has(String(e.payload.delegation_id)));
    expect(leaked).toEqual([]);
    const seqs = a.client.eventsWhere(aboutSession(sa.session_id)).map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));

    // A transport attaching now sees the new generation only.
    const late = await h.open();
    expect(await ok(late.client, 'session.attach', { session_id: sa.session_id, session_key: sa.session_key })).toEqual({
      session_id: sa.session_id,
      generation: 2,
      live_subagents: 1,
    });
    await expectCleanEnd(a.client, sa.session_id, fresh.id);
  });

  it('a detached transport controls nothing and hears nothing; detaching when not attached is 4001', async () => {
    const h = await setup(kind);
    const a = await h.open();
    const a2 = await h.open();
    const stranger = await h.open();
    const s = await createSession(a.client);
    const child = await spawnOne(a.client, s.session_id, 'a child');
    await started(a.client, child.id);
    await ok(a2.client, 'session.attach', { session_id: s.session_id, session_key: s.session_key });

    expect(await ok(a.client, 'session.detach', { session_id: s.session_id })).toEqual({ detached: true });
    const afterDetach = a.client.mark();
    await expectAllNotOwned(a.client, s.session_id, child.id, child.delegation_id);
    await expectNotOwned(a.client, 'session.detach', { session_id: s.session_id });
    await expectNotOwned(stranger.client, 'session.detach', { session_id: s.session_id });

    await expectUntouched(a2.client, s.session_id, child.id, [child.id]);
    await barrier(a.client);
    expect(a.client.events.slice(afterDetach).filter(aboutSession(s.session_id))).toEqual([]);

    // Attaching again with the key restores control.
    await ok(a.client, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    await expectUntouched(a.client, s.session_id, child.id, [child.id]);
    await expectCleanEnd(a2.client, s.session_id, child.id);
  });

  it('after a drop, a transport attaching with the key controls children from before and after the drop; the old one controls nothing', async () => {
    const clock = new ManualClock();
    const h = await setup(kind, { clock });
    const a = await h.open();
    const s = await createSession(a.client);
    const before = await spawnOne(a.client, s.session_id, 'spawned before the drop');
    const parent = await spawnOne(a.client, s.session_id, 'spawns while parked', {
      kind: 'scripted',
      steps: [{ op: 'sleep', ms: 1000 }, { op: 'spawn', tasks: [{ goal: 'spawned while parked', agent: WAITER }] }, { op: 'hang' }],
    });
    await started(a.client, before.id);
    await started(a.client, parent.id);
    const seenByA = a.client.events.length;

    await a.drop();
    // The session is parked: its children go on, and one of them spawns a grandchild now.
    await clock.advance(1000);
    const parkedStart = await h.bus.wait((e) => e.type === 'subagent.start' && e.goal === 'spawned while parked');
    const during = String(parkedStart.subagent_id);
    expect(a.client.events.length).toBe(seenByA);

    // Reconnecting is not authority; the key is.
    const b = await h.open();
    await expectAllNotOwned(b.client, s.session_id, before.id, before.delegation_id);
    expect(await ok(b.client, 'session.attach', { session_id: s.session_id, session_key: s.session_key })).toEqual({
      session_id: s.session_id,
      generation: 1,
      live_subagents: 3,
    });
    const after = await spawnOne(b.client, s.session_id, 'spawned after the drop');
    await started(b.client, after.id);

    const all = [before.id, parent.id, during, after.id];
    await expectUntouched(b.client, s.session_id, before.id, all);
    await expectUntouched(b.client, s.session_id, during, all);
    await expectUntouched(b.client, s.session_id, after.id, all);
    for (const id of all) {
      expect((await ok(b.client, 'subagent.tail', { session_id: s.session_id, subagent_id: id })).available).toBe(true);
    }
    await expectCleanEnd(b.client, s.session_id, after.id);
    await expectCleanEnd(b.client, s.session_id, before.id);
    const r = await ok(b.client, 'subagent.interrupt', { session_id: s.session_id, subagent_id: parent.id });
    expect(r).toEqual({ found: true, subagent_id: parent.id, interrupted: [parent.id, during] });
    await b.client.waitForEvent(isEvent('subagent.complete', parent.id));

    // The old connection is gone for good: it heard nothing after the drop and cannot call.
    expect(a.client.isClosed).toBe(true);
    expect(a.client.events.length).toBe(seenByA);
    await expect(a.client.call('subagent.list', { session_id: s.session_id })).rejects.toThrow(/closed/);
    expect(h.server.sessions.get(s.session_id)?.slot).toEqual(new Set([b.conn.id]));
  });

  it('a wrong session_key is 4001 and attaches nothing; the right key still works', async () => {
    const h = await setup(kind);
    const a = await h.open();
    const b = await h.open();
    const sa = await createSession(a.client);
    const sb = await createSession(b.client);
    const child = await spawnOne(a.client, sa.session_id, 'a child');
    await started(a.client, child.id);

    const wrong: Array<Record<string, unknown>> = [
      { session_id: sa.session_id, session_key: 'not-the-key-not-the-key' },
      { session_id: sa.session_id, session_key: sb.session_key },
      { session_id: sa.session_id, session_key: `${sa.session_key}x` },
      { session_id: sa.session_id, session_key: sa.session_key.slice(0, -1) },
      { session_id: sa.session_id, session_key: '' },
      { session_id: sa.session_id },
      { session_id: sa.session_id, session_key: 12345 },
      { session_id: sb.session_id, session_key: sa.session_key },
      { session_id: 'ses_unknown', session_key: sa.session_key },
      { session_key: sa.session_key },
    ];
    for (const params of wrong) {
      await expectNotOwned(b.client, 'session.attach', params);
      await expectNotOwned(b.client, 'subagent.list', { session_id: sa.session_id });
    }
    await expectUntouched(a.client, sa.session_id, child.id, [child.id]);
    await barrier(b.client);
    expect(b.client.eventsWhere(aboutSession(sa.session_id))).toEqual([]);

    expect(await ok(b.client, 'session.attach', { session_id: sa.session_id, session_key: sa.session_key })).toEqual({
      session_id: sa.session_id,
      generation: 1,
      live_subagents: 1,
    });
    await expectUntouched(b.client, sa.session_id, child.id, [child.id]);
    // Both transports of the slot got that steer's delivery.
    const lastB = b.client.eventsWhere(isEvent('subagent.steer.delivered', child.id)).at(-1);
    await a.client.waitForEvent((e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === lastB?.payload.steer_id);
    await expectCleanEnd(a.client, sa.session_id, child.id);
  });

  it('spoofed owner params (owner_transport, transport_id, owner, generation) are ignored', async () => {
    const h = await setup(kind);
    const a = await h.open();
    const b = await h.open();
    const sa = await createSession(a.client);
    const sb = await createSession(b.client);
    const child = await spawnOne(a.client, sa.session_id, 'a child');
    await started(a.client, child.id);
    const spoof = {
      owner_transport: a.conn.id,
      transport_id: a.conn.id,
      transport: a.conn.id,
      owner: { session_id: sa.session_id, transport: a.conn.id, generation: 1 },
      generation: 1,
      session_key: sa.session_key.slice(1),
    };

    // Naming A's session from B: still 4001.
    await expectAllNotOwned(b.client, sa.session_id, child.id, child.delegation_id, spoof);
    await expectNotOwned(b.client, 'session.attach', { session_id: sa.session_id, ...spoof, session_key: 'wrong-key-wrong-key' });
    // Through B's own session, A's child stays foreign.
    const own = { session_id: sb.session_id, subagent_id: child.id, ...spoof };
    expect(await ok(b.client, 'subagent.steer', { ...own, text: FOREIGN })).toEqual({
      status: 'rejected',
      subagent_id: child.id,
      text: FOREIGN,
      reason: 'not_found',
    });
    expect(await ok(b.client, 'subagent.interrupt', own)).toEqual({ found: false, subagent_id: child.id, interrupted: [] });
    expect((await ok(b.client, 'subagent.tail', own)).available).toBe(false);
    expect((await ok(b.client, 'subagent.list', { ...own, include_finished: true })).subagents).toEqual([]);
    // A spawn through B's session with an owner claim (in params and in the task) belongs to B.
    const bChild = await ok(b.client, 'delegation.spawn', {
      session_id: sb.session_id,
      ...spoof,
      tasks: [{ goal: 'spoofed task', agent: WAITER, owner: spoof.owner, runner: { model: 'x' }, session_id: sa.session_id }],
    });
    const bId = bChild.subagent_ids[0] as string;
    await started(b.client, bId);
    expect((await ok(b.client, 'subagent.list', { session_id: sb.session_id })).subagents.map((s) => s.subagent_id)).toEqual([bId]);
    expect((await ok(b.client, 'subagent.list', { session_id: sb.session_id })).subagents[0]?.model).toBe('scripted');
    // The owner's own calls with a wrong claimed generation still act on its real generation.
    expect((await ok(a.client, 'subagent.list', { session_id: sa.session_id, generation: 7 })).subagents.map((s) => s.subagent_id)).toEqual([child.id]);

    await expectUntouched(a.client, sa.session_id, child.id, [child.id]);
    await barrier(b.client);
    expect(b.client.eventsWhere(aboutSession(sa.session_id))).toEqual([]);
    expect(a.client.events.filter((e) => e.payload.subagent_id === bId)).toEqual([]);
    await expectCleanEnd(a.client, sa.session_id, child.id);
    await expectCleanEnd(b.client, sb.session_id, bId);
  });

  it("two sessions steering each other's children are both refused as not found (rejected, not 4001)", async () => {
    const h = await setup(kind);
    const a = await h.open();
    const b = await h.open();
    const sa = await createSession(a.client);
    const sb = await createSession(b.client);
    const ca = await spawnOne(a.client, sa.session_id, 'child of A');
    const cb = await spawnOne(b.client, sb.session_id, 'child of B');
    await started(a.client, ca.id);
    await started(b.client, cb.id);

    for (const [me, mine, theirs] of [
      [a.client, sa.session_id, cb],
      [b.client, sb.session_id, ca],
    ] as const) {
      const p = { session_id: mine, subagent_id: theirs.id };
      expect(await ok(me, 'subagent.steer', { ...p, text: `  ${FOREIGN}  ` })).toEqual({
        status: 'rejected',
        subagent_id: theirs.id,
        text: FOREIGN,
        reason: 'not_found',
      });
      expect(await ok(me, 'subagent.tail', p)).toEqual({ subagent_id: theirs.id, available: false, text: '', truncated: false, offset: 0 });
      expect(await ok(me, 'subagent.interrupt', p)).toEqual({ found: false, subagent_id: theirs.id, interrupted: [] });
      expect((await ok(me, 'subagent.list', { session_id: mine, include_finished: true })).subagents.map((s) => s.subagent_id)).not.toContain(theirs.id);
      expect(await fails(me, 'delegation.result', { session_id: mine, delegation_id: theirs.delegation_id })).toMatchObject({ code: 4004 });
    }

    // Even a transport attached to both sessions reaches a child only through its own session.
    const both = await h.open();
    await ok(both.client, 'session.attach', { session_id: sa.session_id, session_key: sa.session_key });
    await ok(both.client, 'session.attach', { session_id: sb.session_id, session_key: sb.session_key });
    expect(await ok(both.client, 'subagent.steer', { session_id: sb.session_id, subagent_id: ca.id, text: FOREIGN })).toMatchObject({ status: 'rejected' });
    expect(await ok(both.client, 'subagent.interrupt', { session_id: sa.session_id, subagent_id: cb.id })).toMatchObject({ found: false });
    expect((await ok(both.client, 'subagent.tail', { session_id: sb.session_id, subagent_id: ca.id })).available).toBe(false);

    await expectUntouched(a.client, sa.session_id, ca.id, [ca.id]);
    await expectUntouched(b.client, sb.session_id, cb.id, [cb.id]);
    await expectUntouched(both.client, sa.session_id, ca.id, [ca.id]);
    await barrier(a.client);
    await barrier(b.client);
    expect(a.client.events.filter((e) => e.session_id === sb.session_id || e.payload.subagent_id === cb.id)).toEqual([]);
    expect(b.client.events.filter((e) => e.session_id === sa.session_id || e.payload.subagent_id === ca.id)).toEqual([]);
    await expectCleanEnd(a.client, sa.session_id, ca.id);
    await expectCleanEnd(b.client, sb.session_id, cb.id);
  });
});
