// Every method of protocol section 4 over the in-memory transport: each reply parsed with its
// result schema, every error code and the check order of section 2, the steer lifecycle and the
// tail window of section 5, subtree interrupts, session close and parking, and the event stream
// of section 8. No sleeps: a test waits for events and replies; timed steps run on a manual clock.
import { Buffer } from 'node:buffer';
import { afterEach, describe, expect, it } from 'vitest';
import { NOT_OWNED_MESSAGE } from '../../src/server/errors.ts';
import { gatewayReadyPayloadSchema, wireEventSchema } from '../../src/contract/wire.ts';
import { CATALOG, METHODS, RpcServer, type ServerOptions } from '../../src/rpc/server.ts';
import { SERVER_NAME, VERSION } from '../../src/version.ts';
import { METHODS as TABLE } from '../../src/server/methods/table.ts';
import { ManualClock } from '../helpers/manual-clock.ts';
import { BusLog, connectMemory, fails, isEvent, ok, privateKeyLeaks, type ResultOf, type RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

type Step = Record<string, unknown>;
const agent = (...steps: Step[]) => ({ kind: 'scripted', steps });
const HANG = agent({ op: 'hang' });
/** Waits for steers (each wakes one round), saying something after each; then hangs. */
const WAITER = agent(...Array.from({ length: 8 }, (_, i) => [{ op: 'wait_steer' }, { op: 'say', text: `round ${i + 1}` }]).flat(), { op: 'hang' });

// ---- harness ----

interface Env {
  readonly server: RpcServer;
  readonly bus: BusLog;
  connect(): { client: RpcTestClient; drop(): Promise<void> };
}

const servers: RpcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
});

function env(options: ServerOptions = {}): Env {
  const server = new RpcServer(options);
  servers.push(server);
  const bus = new BusLog(server);
  return {
    server,
    bus,
    connect() {
      const ep = connectMemory(server);
      return {
        client: ep.client,
        drop: async () => {
          ep.close();
          await ep.conn.whenClosed;
        },
      };
    },
  };
}

async function session(c: RpcTestClient): Promise<ResultOf<'session.create'>> {
  return ok(c, 'session.create', {});
}

async function spawnOne(c: RpcTestClient, session_id: string, goal: string, a: unknown = WAITER): Promise<string> {
  const r = await ok(c, 'delegation.spawn', { session_id, tasks: [{ goal, agent: a }] });
  return r.subagent_ids[0] as string;
}

const startedGoal = (c: RpcTestClient, goal: string) =>
  c.waitForEvent((e) => e.type === 'subagent.start' && e.payload.goal === goal).then((e) => String(e.payload.subagent_id));

function queuedId(r: ResultOf<'subagent.steer'>): string {
  if (r.status !== 'queued') throw new Error(`steer was ${r.status}`);
  return r.steer_id;
}

type Entry = { status: string; summary: string; error?: string; missed_steer?: string; task_index: number; subagent_id: string };
const entryOf = (e: WireEvent) => wireEntry(e.payload) as Entry;

/** A round trip: every event sent to `c` before this reply has arrived. */
const barrier = (c: RpcTestClient) => ok(c, 'server.info');

// ---- server.info ----

describe('the method table', () => {
  it('takes idempotency keys on exactly the control methods docs/http.md names', () => {
    const keyed = Object.values(TABLE)
      .filter((m) => m.idempotent)
      .map((m) => m.name)
      .sort();
    expect(keyed).toEqual(['delegation.spawn', 'session.reset', 'subagent.interrupt', 'subagent.revive', 'subagent.steer']);
    // Each entry answers to its own name, and the table holds every method the catalog lists.
    expect(Object.entries(TABLE).every(([name, m]) => m.name === name)).toBe(true);
    expect(Object.keys(TABLE).sort()).toEqual([...CATALOG.methods]);
  });
});

describe('server.info', () => {
  it('names the server, speaks protocol 1, lists the registered methods, the catalog events and the limits', async () => {
    const { connect } = env({
      max_concurrent_children: 4,
      max_spawn_depth: 2,
      park_ttl_ms: 5000,
      max_message_bytes: 4096,
      max_batch: 50,
      max_reply_bytes: 65536,
    });
    const { client } = connect();
    const info = await ok(client, 'server.info');
    expect(await ok(client, 'server.info', {})).toEqual(info);
    expect(info.name).toBe(SERVER_NAME);
    expect(info.version).toBe(VERSION);
    expect(info.protocol_version).toBe(1);
    expect(info.methods).toEqual([...METHODS.keys()].sort());
    expect(info.events).toEqual([...CATALOG.events]);
    expect(info.limits).toEqual({
      max_message_bytes: 4096,
      max_batch: 50,
      max_reply_bytes: 65536,
      park_ttl_ms: 5000,
      replay_events: 1000,
      replay_bytes: 1048576,
      max_concurrent_children: 4,
      max_spawn_depth: 2,
      max_steer_bytes: 32768,
      tail_window_bytes: 16384,
    });
  });
});

// ---- session.* ----

describe('session.*', () => {
  it('session.create returns a new session id, a secret key and generation 1', async () => {
    const { connect } = env();
    const { client } = connect();
    const a = await session(client);
    const b = await ok(client, 'session.create', { title: 'second' });
    expect(a.generation).toBe(1);
    expect(b.generation).toBe(1);
    expect(a.session_id).not.toBe(b.session_id);
    expect(a.session_key).not.toBe(b.session_key);
    const bad = await fails(client, 'session.create', { title: 42 });
    expect(bad.code).toBe(-32602);
    expect((bad.data as { issues: Array<{ path: string }> }).issues.map((i) => i.path)).toEqual(['title']);
  });

  it('session.attach returns the generation and the count of live children at all depths', async () => {
    const { connect } = env({ max_spawn_depth: 3 });
    const { client } = connect();
    const s = await session(client);
    await ok(client, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [
        { goal: 'root', agent: agent({ op: 'spawn', tasks: [{ goal: 'mid', agent: agent({ op: 'spawn', tasks: [{ goal: 'leaf', agent: HANG }] }) }] }) },
        { goal: 'sibling', agent: HANG },
        { goal: 'quick', agent: agent({ op: 'say', text: 'done' }) },
      ],
    });
    await startedGoal(client, 'leaf');
    await startedGoal(client, 'sibling');
    const quick = await client.waitForEvent((e) => e.type === 'subagent.complete' && e.payload.goal === 'quick');
    expect(entryOf(quick).status).toBe('completed');

    const other = connect().client;
    expect(await ok(other, 'session.attach', { session_id: s.session_id, session_key: s.session_key })).toEqual({
      session_id: s.session_id,
      generation: 1,
      live_subagents: 4,
    });
    await ok(client, 'session.reset', { session_id: s.session_id });
    expect(await ok(connect().client, 'session.attach', { session_id: s.session_id, session_key: s.session_key })).toEqual({
      session_id: s.session_id,
      generation: 2,
      live_subagents: 0,
    });
  });

  it('session.detach returns {detached: true}; session.reset returns the next generation each time', async () => {
    const { connect } = env();
    const { client } = connect();
    const s = await session(client);
    expect(await ok(client, 'session.reset', { session_id: s.session_id })).toEqual({ session_id: s.session_id, generation: 2 });
    expect(await ok(client, 'session.reset', { session_id: s.session_id })).toEqual({ session_id: s.session_id, generation: 3 });
    expect(await ok(client, 'session.detach', { session_id: s.session_id })).toEqual({ detached: true });
    expect(await fails(client, 'session.detach', { session_id: s.session_id })).toEqual({ code: 4001, message: NOT_OWNED_MESSAGE });
  });

  it('session.close stops every live child at every depth, counts them, and ends the session for good', async () => {
    const { connect, bus } = env({ max_spawn_depth: 3 });
    const { client } = connect();
    const s = await session(client);
    const other = connect().client;
    await ok(other, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    await ok(client, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [
        {
          goal: 'root',
          agent: agent({
            op: 'spawn',
            tasks: [
              { goal: 'mid', agent: agent({ op: 'spawn', tasks: [{ goal: 'leaf', agent: HANG }] }) },
              { goal: 'mid2', agent: HANG },
            ],
          }),
        },
        { goal: 'finished before close', agent: agent({ op: 'say', text: 'bye' }) },
      ],
    });
    await startedGoal(client, 'leaf');
    await startedGoal(client, 'mid2');
    await client.waitForEvent((e) => e.type === 'subagent.complete' && e.payload.goal === 'finished before close');
    const live = (await ok(client, 'subagent.list', { session_id: s.session_id })).subagents.map((x) => x.subagent_id);
    expect(live).toHaveLength(4);

    expect(await ok(client, 'session.close', { session_id: s.session_id })).toEqual({ closed: true, interrupted: 4 });
    for (const id of live) {
      const done = await bus.wait((e) => e.type === 'subagent.complete' && e.subagent_id === id);
      expect((done.entry as Entry).status).toBe('interrupted');
    }
    for (const c of [client, other]) {
      expect(await fails(c, 'subagent.list', { session_id: s.session_id })).toEqual({ code: 4001, message: NOT_OWNED_MESSAGE });
      expect(await fails(c, 'session.close', { session_id: s.session_id })).toMatchObject({ code: 4001 });
    }
    expect(await fails(connect().client, 'session.attach', { session_id: s.session_id, session_key: s.session_key })).toMatchObject({ code: 4001 });
  });

  it('a parked session is closed after the park limit (manual clock); attach before the limit keeps it', async () => {
    const clock = new ManualClock();
    const { connect, bus } = env({ clock, park_ttl_ms: 60_000 });
    const a = connect();
    const s1 = await session(a.client);
    const s2 = await session(a.client);
    const c1 = await spawnOne(a.client, s1.session_id, 'in s1', HANG);
    const c2 = await spawnOne(a.client, s2.session_id, 'in s2', HANG);
    await startedGoal(a.client, 'in s1');
    await startedGoal(a.client, 'in s2');
    await a.drop();

    await clock.advance(59_999);
    const b = connect().client;
    expect(await ok(b, 'session.attach', { session_id: s2.session_id, session_key: s2.session_key })).toMatchObject({ live_subagents: 1 });
    await clock.advance(1);
    expect(((await bus.wait((e) => e.type === 'subagent.complete' && e.subagent_id === c1)).entry as Entry).status).toBe('interrupted');
    expect(await fails(b, 'session.attach', { session_id: s1.session_id, session_key: s1.session_key })).toEqual({ code: 4001, message: NOT_OWNED_MESSAGE });

    // Attached again: no limit runs, however long.
    await clock.advance(10 * 60_000);
    expect((await ok(b, 'subagent.list', { session_id: s2.session_id })).subagents).toMatchObject([{ subagent_id: c2, status: 'running' }]);

    // Parked by a detach this time.
    await ok(b, 'session.detach', { session_id: s2.session_id });
    await clock.advance(60_000);
    await bus.wait((e) => e.type === 'subagent.complete' && e.subagent_id === c2);
    expect(await fails(b, 'session.attach', { session_id: s2.session_id, session_key: s2.session_key })).toMatchObject({ code: 4001 });
  });
});

// ---- delegation.* ----

describe('delegation.*', () => {
  it('delegation.spawn answers at once with the ids; the children run in the background', async () => {
    const { connect } = env();
    const { client } = connect();
    const s = await session(client);
    const r = await ok(client, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [
        { goal: 'one', agent: HANG },
        { goal: 'two', context: 'some context', agent: HANG },
      ],
    });
    expect(r.status).toBe('dispatched');
    expect(r.count).toBe(2);
    expect(r.subagent_ids).toHaveLength(2);
    const dispatched = await client.waitForEvent(isEvent('delegation.dispatched'));
    expect(dispatched.payload).toEqual({ delegation_id: r.delegation_id, subagent_ids: r.subagent_ids, count: 2 });
    const requested = client.eventsWhere(isEvent('subagent.spawn_requested'));
    expect(
      requested.map((e) => [e.payload.subagent_id, e.payload.task_index, e.payload.task_count, e.payload.goal, e.payload.depth, e.payload.parent_id]),
    ).toEqual([
      [r.subagent_ids[0], 0, 2, 'one', 0, null],
      [r.subagent_ids[1], 1, 2, 'two', 0, null],
    ]);
    // Still running: the reply did not wait for them.
    for (const id of r.subagent_ids) await client.waitForEvent(isEvent('subagent.start', id));
    const list = await ok(client, 'subagent.list', { session_id: s.session_id });
    expect(list.subagents.map((x) => x.status)).toEqual(['running', 'running']);
    expect(client.eventsWhere(isEvent('subagent.complete'))).toEqual([]);
  });

  it('refuses a bad batch with 4000 / -32602 naming the field / 4012, and spawns nothing', async () => {
    const { connect } = env({ max_concurrent_children: 3 });
    const { client } = connect();
    const s = await session(client);
    const sid = s.session_id;
    const before = client.mark();

    expect(await fails(client, 'delegation.spawn', { session_id: sid })).toEqual({ code: 4000, message: 'tasks required' });
    expect(await fails(client, 'delegation.spawn', { session_id: sid, tasks: [] })).toEqual({ code: 4000, message: 'tasks required' });
    expect(await fails(client, 'delegation.spawn', { tasks: [{ goal: 'x' }] })).toEqual({ code: 4001, message: NOT_OWNED_MESSAGE });

    const invalid: Array<[unknown, Record<string, unknown>, string]> = [
      // A value of the wrong type is a shape error naming the field; only a missing one is 4000.
      ['not a list', {}, 'tasks'],
      [{ goal: 'an object, not a list' }, {}, 'tasks'],
      [7, {}, 'tasks'],
      [[{ goal: '' }], {}, 'tasks.0.goal'],
      [[{ goal: '   ' }], {}, 'tasks.0.goal'],
      [[{ context: 'no goal' }], {}, 'tasks.0.goal'],
      [[{ goal: 'ok' }, { goal: 7 }], {}, 'tasks.1.goal'],
      [[{ goal: 'ok', context: 5 }], {}, 'tasks.0.context'],
      [['just a string'], {}, 'tasks.0'],
      [[{ goal: 'ok', agent: 'scripted' }], {}, 'tasks.0.agent'],
      [[{ goal: 'ok', agent: { kind: 'no-such-kind' } }], {}, 'tasks.0.agent.kind'],
      [[{ goal: 'ok', agent: agent({ op: 'say', text: 3 }) }], {}, 'tasks.0.agent.steps.0.text'],
      [[{ goal: 'ok' }], { timeout_ms: 'soon' }, 'timeout_ms'],
      [[{ goal: 'ok' }], { timeout_ms: 0 }, 'timeout_ms'],
    ];
    for (const [tasks, extra, path] of invalid) {
      const err = await fails(client, 'delegation.spawn', { session_id: sid, tasks, ...extra });
      expect(err.code, JSON.stringify(tasks)).toBe(-32602);
      const issues = (err.data as { issues: Array<{ path: string; message: string }> }).issues;
      expect(
        issues.map((i) => i.path),
        JSON.stringify(tasks),
      ).toContain(path);
      for (const i of issues) expect(typeof i.message).toBe('string');
    }

    const four = Array.from({ length: 4 }, (_, i) => ({ goal: `t${i}`, agent: HANG }));
    expect(await fails(client, 'delegation.spawn', { session_id: sid, tasks: four })).toMatchObject({ code: 4012, message: 'too many tasks' });

    await barrier(client);
    expect(client.events.slice(before)).toEqual([]);
    expect((await ok(client, 'subagent.list', { session_id: sid, include_finished: true })).subagents).toEqual([]);
    // The limit itself is allowed.
    expect((await ok(client, 'delegation.spawn', { session_id: sid, tasks: four.slice(0, 3) })).count).toBe(3);
  });

  it('delegation.result never forgets a live delegation, however many newer ones finish; finished ones are kept up to 256', async () => {
    const { connect } = env();
    const { client } = connect();
    const s = await session(client);
    const live = await ok(client, 'delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'long', agent: WAITER }] });
    const FINISHED = 300;
    const ids: string[] = [];
    for (let i = 0; i < FINISHED; i++) {
      const r = await ok(client, 'delegation.spawn', { session_id: s.session_id, tasks: [{ goal: `quick ${i}`, agent: agent({ op: 'say', text: `${i}` }) }] });
      ids.push(r.delegation_id);
    }
    const last = ids[FINISHED - 1] as string;
    await client.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === last);

    // 300 newer delegations later, the live one is still there, not done.
    expect(await ok(client, 'delegation.result', { session_id: s.session_id, delegation_id: live.delegation_id })).toEqual({
      delegation_id: live.delegation_id,
      done: false,
      results: [],
    });
    // Of the finished ones, the newest 256 are kept and the older ones are let go.
    for (const [i, id] of ids.entries()) {
      const reply = await client.call('delegation.result', { session_id: s.session_id, delegation_id: id });
      if (i < FINISHED - 256) expect(reply.error, `#${i}`).toEqual({ code: 4004, message: 'delegation not found' });
      else expect((reply.result as { done: boolean }).done, `#${i}`).toBe(true);
    }
    // Once it finishes, the live one joins the finished and is answered in full.
    await ok(client, 'subagent.interrupt', { session_id: s.session_id, subagent_id: live.subagent_ids[0] });
    await client.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === live.delegation_id);
    const done = await ok(client, 'delegation.result', { session_id: s.session_id, delegation_id: live.delegation_id });
    expect(done.done).toBe(true);
    expect(done.results.map((e) => e.status)).toEqual(['interrupted']);
    // ...and pushes the oldest kept one out.
    expect(await fails(client, 'delegation.result', { session_id: s.session_id, delegation_id: ids[FINISHED - 256] as string })).toMatchObject({ code: 4004 });
  });

  it('delegation.pause stops every spawn of that session (4011, and a nested spawn step fails); other sessions go on', async () => {
    const { connect, bus } = env({ max_spawn_depth: 2 });
    const a = connect().client;
    const b = connect().client;
    const sa = await session(a);
    const sb = await session(b);
    const parent = await spawnOne(
      a,
      sa.session_id,
      'parent',
      agent(
        { op: 'wait_steer' },
        { op: 'spawn', tasks: [{ goal: 'nested while paused', agent: HANG }] },
        { op: 'say', text: 'went on' },
        { op: 'wait_steer' },
        { op: 'spawn', tasks: [{ goal: 'nested after resume', agent: agent({ op: 'say', text: 'hi' }) }] },
        { op: 'say', text: 'all done' },
        { op: 'hang' },
      ),
    );
    await a.waitForEvent(isEvent('subagent.start', parent));

    expect(await ok(a, 'delegation.pause', { session_id: sa.session_id })).toEqual({ paused: true });
    const status = await ok(a, 'delegation.status', { session_id: sa.session_id });
    expect(status.paused).toBe(true);
    expect(await fails(a, 'delegation.spawn', { session_id: sa.session_id, tasks: [{ goal: 'refused', agent: HANG }] })).toEqual({
      code: 4011,
      message: 'spawning is paused',
    });
    // Another session is untouched.
    expect((await ok(b, 'delegation.status', { session_id: sb.session_id })).paused).toBe(false);
    const bChild = await spawnOne(b, sb.session_id, 'b goes on', agent({ op: 'say', text: 'fine' }));
    expect(entryOf(await b.waitForEvent(isEvent('subagent.complete', bChild))).status).toBe('completed');

    // A nested spawn step while paused fails that step; the child goes on.
    await ok(a, 'subagent.steer', { session_id: sa.session_id, subagent_id: parent, text: 'spawn now' });
    await a.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === 'went on');
    const tail = await ok(a, 'subagent.tail', { session_id: sa.session_id, subagent_id: parent });
    expect(tail.text).toContain('[spawn refused] spawning is paused');
    expect(bus.events.filter((e) => e.goal === 'nested while paused' || e.goal === 'refused')).toEqual([]);
    expect((await ok(a, 'subagent.list', { session_id: sa.session_id })).subagents).toMatchObject([{ subagent_id: parent, status: 'running' }]);

    expect(await ok(a, 'delegation.pause', { session_id: sa.session_id, paused: false })).toEqual({ paused: false });
    await ok(a, 'subagent.steer', { session_id: sa.session_id, subagent_id: parent, text: 'spawn again' });
    const nested = await a.waitForEvent((e) => e.type === 'subagent.complete' && e.payload.goal === 'nested after resume');
    expect(nested.payload).toMatchObject({ parent_id: parent, depth: 1 });
    await a.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === 'all done');
  });

  it('delegation.result: not done while running, then every entry by task_index; 4004 for ids this session did not spawn', async () => {
    const { connect } = env();
    const { client } = connect();
    const other = connect().client;
    const s = await session(client);
    const so = await session(other);
    const r = await ok(client, 'delegation.spawn', {
      session_id: s.session_id,
      tasks: [
        { goal: 'slow', agent: WAITER },
        { goal: 'fast', agent: agent({ op: 'say', text: 'fast done' }) },
      ],
    });
    const [slow, fast] = r.subagent_ids as [string, string];
    await client.waitForEvent(isEvent('subagent.complete', fast));
    const partial = await ok(client, 'delegation.result', { session_id: s.session_id, delegation_id: r.delegation_id });
    expect(partial.delegation_id).toBe(r.delegation_id);
    expect(partial.done).toBe(false);
    expect(partial.results.map((e) => e.subagent_id)).toEqual([fast]);

    await ok(client, 'subagent.interrupt', { session_id: s.session_id, subagent_id: slow });
    const complete = await client.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === r.delegation_id);
    const full = await ok(client, 'delegation.result', { session_id: s.session_id, delegation_id: r.delegation_id });
    expect(full.done).toBe(true);
    expect(full.results.map((e) => [e.task_index, e.subagent_id, e.status])).toEqual([
      [0, slow, 'interrupted'],
      [1, fast, 'completed'],
    ]);
    expect(full.results).toEqual(complete.payload.results);
    expect(full.results[1]).toEqual(entryOf(await client.waitForEvent(isEvent('subagent.complete', fast))));

    expect(await fails(client, 'delegation.result', { session_id: s.session_id, delegation_id: 'dg_unknown' })).toEqual({
      code: 4004,
      message: 'delegation not found',
    });
    // Another session's delegation, asked through that other session: not found.
    expect(await fails(other, 'delegation.result', { session_id: so.session_id, delegation_id: r.delegation_id })).toEqual({
      code: 4004,
      message: 'delegation not found',
    });
    expect(await fails(client, 'delegation.result', { session_id: s.session_id })).toMatchObject({ code: 4000 });
    expect(await fails(client, 'delegation.result', { delegation_id: r.delegation_id })).toEqual({ code: 4001, message: NOT_OWNED_MESSAGE });
  });

  it("delegation.status lists this session's live children at every depth and never another session's", async () => {
    const { connect } = env({ max_spawn_depth: 2, max_concurrent_children: 2 });
    const a = connect().client;
    const b = connect().client;
    const sa = await session(a);
    const sb = await session(b);
    const root = await spawnOne(a, sa.session_id, 'root', agent({ op: 'spawn', tasks: [{ goal: 'nested', agent: HANG }] }));
    const nested = await startedGoal(a, 'nested');
    const foreign = await spawnOne(b, sb.session_id, 'foreign', HANG);
    await b.waitForEvent(isEvent('subagent.start', foreign));

    const st = await ok(a, 'delegation.status', { session_id: sa.session_id });
    expect(st.paused).toBe(false);
    expect(st.max_spawn_depth).toBe(2);
    expect(st.max_concurrent_children).toBe(2);
    expect(st.active.map((x) => [x.subagent_id, x.parent_id, x.depth, x.status]).sort()).toEqual(
      [
        [root, null, 0, 'running'],
        [nested, root, 1, 'running'],
      ].sort(),
    );
    expect((await ok(b, 'delegation.status', { session_id: sb.session_id })).active.map((x) => x.subagent_id)).toEqual([foreign]);
  });
});

// ---- subagent.* ----

describe('subagent.* check order', () => {
  it('subagent_id (4000), then text (4002/4003), then session (4001); a missing session_id is 4001', async () => {
    const { connect } = env();
    const { client } = connect();
    const s = await session(client);
    const child = await spawnOne(client, s.session_id, 'target');
    await client.waitForEvent(isEvent('subagent.start', child));
    const sid = s.session_id;
    const long = 'a'.repeat(32769);
    const E4000 = { code: 4000, message: 'subagent_id required' };
    const E4001 = { code: 4001, message: NOT_OWNED_MESSAGE };
    const E4002 = { code: 4002, message: 'text is required' };
    const E4003 = { code: 4003, message: 'text too long' };
    const ENotString = { code: -32602, message: 'invalid params: text: expected a string', data: { issues: [{ path: 'text', message: 'expected a string' }] } };
    const cases: Array<[string, Record<string, unknown>, object]> = [
      ['subagent.steer', {}, E4000],
      ['subagent.steer', { session_id: sid, text: 'hi' }, E4000],
      ['subagent.steer', { session_id: sid, subagent_id: '', text: 'hi' }, E4000],
      ['subagent.steer', { session_id: sid, subagent_id: '  ', text: 'hi' }, E4000],
      ['subagent.steer', { session_id: sid, subagent_id: 42, text: 'hi' }, E4000],
      ['subagent.steer', { text: '' }, E4000],
      ['subagent.steer', { text: long }, E4000],
      ['subagent.steer', { subagent_id: child }, E4002],
      ['subagent.steer', { subagent_id: child, text: '' }, E4002],
      ['subagent.steer', { subagent_id: child, text: ' \n\t ' }, E4002],
      // There, not a string: a shape error, before every coded check (test/rpc/nested-text.test.ts).
      ['subagent.steer', { subagent_id: child, text: 7 }, ENotString],
      ['subagent.steer', { text: [[7]] }, ENotString],
      ['subagent.steer', { session_id: 'ses_nope', subagent_id: child, text: '   ' }, E4002],
      ['subagent.steer', { subagent_id: child, text: long }, E4003],
      ['subagent.steer', { session_id: 'ses_nope', subagent_id: child, text: long }, E4003],
      ['subagent.steer', { subagent_id: child, text: 'fine' }, E4001],
      ['subagent.steer', { session_id: 'ses_nope', subagent_id: child, text: 'fine' }, E4001],
      ['subagent.steer', { session_id: 42, subagent_id: child, text: 'fine' }, E4001],
      ['subagent.tail', {}, E4000],
      ['subagent.tail', { session_id: 'ses_nope' }, E4000],
      ['subagent.tail', { subagent_id: child }, E4001],
      ['subagent.tail', { session_id: 'ses_nope', subagent_id: child }, E4001],
      ['subagent.interrupt', {}, E4000],
      ['subagent.interrupt', { session_id: 'ses_nope' }, E4000],
      ['subagent.interrupt', { subagent_id: child }, E4001],
      ['subagent.list', {}, E4001],
      ['subagent.list', { session_id: 'ses_nope' }, E4001],
      // Without a session these two cover the caller's sessions (hermes' form); a named one must be its own.
      ['delegation.status', { session_id: 'ses_nope' }, E4001],
      ['delegation.pause', { session_id: 'ses_nope' }, E4001],
      ['session.resume', {}, E4001],
      ['session.resume', { session_id: sid }, E4001],
      ['session.activate', { session_id: sid, session_key: 'wrong' }, E4001],
      ['session.detach', {}, E4001],
      ['session.reset', {}, E4001],
      ['session.close', {}, E4001],
      ['session.attach', {}, E4001],
    ];
    for (const [method, params, expected] of cases) {
      expect(await fails(client, method, params), `${method} ${JSON.stringify(params).slice(0, 80)}`).toEqual(expected);
    }
    // None of those refusals reached the child: nothing queued, nothing stopped.
    const snap = (await ok(client, 'subagent.list', { session_id: sid })).subagents[0];
    expect(snap).toMatchObject({ subagent_id: child, status: 'running', accepting_steer: true });
    const r = await ok(client, 'subagent.steer', { session_id: sid, subagent_id: child, text: 'the only steer' });
    const delivered = await client.waitForEvent(isEvent('subagent.steer.delivered', child));
    expect(delivered.payload).toMatchObject({ steer_id: queuedId(r), text: 'the only steer' });
  });
});

describe('subagent.list', () => {
  it('returns snapshots (queued children too), delegations always [], and finished ones only with include_finished', async () => {
    const { connect } = env({ max_concurrent_children: 1 });
    const { client } = connect();
    const s = await session(client);
    const sid = s.session_id;
    const first = await spawnOne(client, sid, 'first', HANG);
    await client.waitForEvent(isEvent('subagent.start', first));
    const second = await spawnOne(client, sid, 'second', WAITER);

    const list = await ok(client, 'subagent.list', { session_id: sid });
    expect(list.delegations).toEqual([]);
    const byId = new Map(list.subagents.map((x) => [x.subagent_id, x]));
    expect(byId.get(first)).toMatchObject({
      status: 'running',
      depth: 0,
      parent_id: null,
      goal: 'first',
      model: 'scripted',
      tool_count: 0,
      last_tool: '',
      accepting_steer: true,
    });
    expect(typeof byId.get(first)?.started_at).toBe('number');
    expect(byId.get(second)).toMatchObject({ status: 'queued', started_at: null, accepting_steer: true });
    expect(byId.get(second)).not.toHaveProperty('finished_at');

    // A queued child already accepts a steer; it lands at its first delivery point.
    const r = await ok(client, 'subagent.steer', { session_id: sid, subagent_id: second, text: 'waiting in line' });
    await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: first });
    const delivered = await client.waitForEvent(isEvent('subagent.steer.delivered', second));
    expect(delivered.payload.steer_id).toBe(queuedId(r));

    await client.waitForEvent(isEvent('subagent.complete', first));
    expect((await ok(client, 'subagent.list', { session_id: sid })).subagents.map((x) => x.subagent_id)).toEqual([second]);
    const all = await ok(client, 'subagent.list', { session_id: sid, include_finished: true });
    const done = all.subagents.find((x) => x.subagent_id === first);
    expect(done).toMatchObject({ status: 'interrupted', accepting_steer: false });
    expect(typeof done?.finished_at).toBe('number');
  });
});

describe('subagent.steer', () => {
  it('trims the text, counts UTF-8 bytes: 32768 accepted, 32769 is 4003; a queued reply has no delivered key', async () => {
    const { connect } = env();
    const { client } = connect();
    const s = await session(client);
    const sid = s.session_id;
    const child = await spawnOne(client, sid, 'target');
    await client.waitForEvent(isEvent('subagent.start', child));
    const steer = (text: unknown) => client.call('subagent.steer', { session_id: sid, subagent_id: child, text });

    const trimmed = await ok(client, 'subagent.steer', { session_id: sid, subagent_id: child, text: '  \n go left \t ' });
    expect(trimmed).toEqual({ status: 'queued', subagent_id: child, text: 'go left', steer_id: queuedId(trimmed) });
    expect(Object.keys(trimmed)).not.toContain('delivered');

    const twoByte = 'é'.repeat(16384); // 32768 bytes, 16384 UTF-16 units
    const fourByte = '😀'.repeat(8192); // 32768 bytes
    const accepted = [twoByte, fourByte, `   ${'a'.repeat(32768)}\n\n`];
    for (const text of accepted) {
      const reply = await steer(text);
      expect(reply.error).toBeUndefined();
      const result = reply.result as { status: string; text: string };
      expect(result.status).toBe('queued');
      expect(result.text).toBe(text.trim());
      expect(Buffer.byteLength(result.text, 'utf8')).toBe(32768);
      expect(Object.keys(result)).not.toContain('delivered');
    }
    for (const text of [`${twoByte}a`, `${fourByte}a`, `${'a'.repeat(32767)}é`, `${'é'.repeat(16383)}😀`]) {
      expect(Buffer.byteLength(text, 'utf8')).toBeGreaterThan(32768);
      expect((await steer(text)).error).toEqual({ code: 4003, message: 'text too long' });
    }
    // Everything accepted was delivered in order, nothing refused was.
    const delivered = await client.waitForEvent((e) => e.type === 'subagent.steer.delivered' && e.payload.text === accepted[2]?.trim());
    expect(delivered).toBeDefined();
    expect(client.eventsWhere(isEvent('subagent.steer.delivered', child)).map((e) => e.payload.text)).toEqual(['go left', ...accepted.map((t) => t.trim())]);
  });

  it('queued → subagent.steer.delivered with the same steer_id, in acceptance order', async () => {
    const { connect } = env();
    const { client } = connect();
    const s = await session(client);
    const child = await spawnOne(
      client,
      s.session_id,
      'target',
      agent({ op: 'tool', name: 'read', ms: 0 }, { op: 'wait_steer' }, { op: 'say', text: 'after' }, { op: 'hang' }),
    );
    await client.waitForEvent(isEvent('subagent.tool', child));
    const first = queuedId(await ok(client, 'subagent.steer', { session_id: s.session_id, subagent_id: child, text: 'one' }));
    const d1 = await client.waitForEvent(isEvent('subagent.steer.delivered', child));
    expect(d1.payload).toMatchObject({ subagent_id: child, steer_id: first, text: 'one' });
    await client.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === 'after');
    const tail = await ok(client, 'subagent.tail', { session_id: s.session_id, subagent_id: child });
    expect(tail.text).toContain('[steer] one\n');
  });

  it("a steer during a finishing child's last step (after its last delivery point) is missed_steer on the entry; after completion it is rejected", async () => {
    const clock = new ManualClock();
    const { connect } = env({ clock });
    const { client } = connect();
    const s = await session(client);
    const sid = s.session_id;
    // [tool, sleep, finish]; the `think` only marks "past the tool's delivery point" on the wire.
    const child = await spawnOne(
      client,
      sid,
      'finisher',
      agent(
        { op: 'tool', name: 'probe' },
        { op: 'think', text: 'past the last delivery point' },
        { op: 'sleep', ms: 1000 },
        { op: 'finish', summary: 'all done' },
      ),
    );
    await client.waitForEvent(isEvent('subagent.thinking', child));
    const s1 = queuedId(await ok(client, 'subagent.steer', { session_id: sid, subagent_id: child, text: 'too late' }));
    const s2 = queuedId(await ok(client, 'subagent.steer', { session_id: sid, subagent_id: child, text: 'also too late' }));
    expect(s1).not.toBe(s2);
    await clock.advance(1000);
    const done = await client.waitForEvent(isEvent('subagent.complete', child));
    const entry = entryOf(done);
    expect(entry.status).toBe('completed');
    expect(entry.missed_steer).toBe('too late\nalso too late');
    expect(entry.summary).toBe('all done\n\n[steer did not land — the subagent finished before it could be delivered: too late\nalso too late]');
    expect(client.eventsWhere(isEvent('subagent.steer.delivered', child))).toEqual([]);

    const before = await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child });
    expect(await ok(client, 'subagent.steer', { session_id: sid, subagent_id: child, text: '  after the end ' })).toEqual({
      status: 'rejected',
      subagent_id: child,
      text: 'after the end',
      reason: 'finished',
    });
    // A rejected steer leaves no trace.
    expect(await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child })).toEqual(before);
    const [result] = (await ok(client, 'delegation.result', { session_id: sid, delegation_id: String(done.payload.delegation_id) })).results;
    expect(result).toEqual(entry);
  });
});

describe('subagent.tail', () => {
  const UNIT = 'é€😀'; // 2 + 3 + 4 bytes
  const enc = new TextEncoder();
  const say = (i: number) => `${i}:${UNIT.repeat(30)}`;

  it('gives the last 16384 bytes, cut on a character boundary, with truncated and an offset; since gives only newer bytes', async () => {
    const goal = 'tail';
    const later = Array.from({ length: 5 }, (_, i) => say(1000 + i));
    // Pad the last line so that the window's first byte falls inside a multi-byte character.
    let first: string[] = [];
    let bytes = new Uint8Array();
    for (let pad = 0; pad < 9; pad++) {
      first = Array.from({ length: 100 }, (_, i) => (i === 99 ? `${say(i)}${'x'.repeat(pad)}` : say(i)));
      bytes = enc.encode(`[start] ${goal}\n${first.map((t) => `[text] ${t}\n`).join('')}`);
      if (((bytes[bytes.length - 16384] ?? 0) & 0xc0) === 0x80) break;
    }
    const cut = bytes.length - 16384;
    expect((bytes[cut] ?? 0) & 0xc0).toBe(0x80);
    let skip = 0;
    while (((bytes[cut + skip] ?? 0) & 0xc0) === 0x80) skip++;
    const expectedWindow = new TextDecoder().decode(bytes.subarray(cut + skip));

    const { connect } = env();
    const { client } = connect();
    const s = await session(client);
    const sid = s.session_id;
    const child = await spawnOne(
      client,
      sid,
      goal,
      agent(...first.map((text) => ({ op: 'say', text })), { op: 'wait_steer' }, ...later.map((text) => ({ op: 'say', text })), { op: 'hang' }),
    );
    await client.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === first.at(-1));

    const t1 = await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child });
    expect(t1.available).toBe(true);
    expect(t1.truncated).toBe(true);
    expect(t1.offset).toBe(bytes.length);
    expect(Buffer.byteLength(t1.text, 'utf8')).toBeLessThanOrEqual(16384);
    expect(Buffer.byteLength(t1.text, 'utf8')).toBe(16384 - skip);
    expect(t1.text.codePointAt(0)).not.toBe(0xfffd);
    expect(t1.text).not.toContain('\uFFFD');
    expect(t1.text).toBe(expectedWindow);
    expect(await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child, since: 0 })).toEqual(t1);
    expect(await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child, since: t1.offset })).toEqual({
      subagent_id: child,
      available: true,
      text: '',
      truncated: false,
      offset: t1.offset,
    });

    await ok(client, 'subagent.steer', { session_id: sid, subagent_id: child, text: 'more please' });
    await client.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === later.at(-1));
    const newer = `[steer] more please\n${later.map((t) => `[text] ${t}\n`).join('')}`;
    const t2 = await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child, since: t1.offset });
    expect(t2).toEqual({ subagent_id: child, available: true, text: newer, truncated: false, offset: t1.offset + enc.encode(newer).length });
    // Asking from a point that already left the window: truncated.
    const t3 = await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child, since: 10 });
    expect(t3.truncated).toBe(true);
    expect(t3.text.endsWith(newer)).toBe(true);

    // A finished (retained) child still gives its final window.
    await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: child });
    await client.waitForEvent(isEvent('subagent.complete', child));
    const t4 = await ok(client, 'subagent.tail', { session_id: sid, subagent_id: child, since: t2.offset });
    expect(t4.available).toBe(true);
    expect(t4.text).toMatch(/^\[interrupted\]/);
    // Unknown: exactly the not-found shape.
    expect(await ok(client, 'subagent.tail', { session_id: sid, subagent_id: 'sa_nope' })).toEqual({
      subagent_id: 'sa_nope',
      available: false,
      text: '',
      truncated: false,
      offset: 0,
    });
  });
});

describe('subagent.interrupt', () => {
  const tree = (tag: string) =>
    agent({
      op: 'spawn',
      tasks: [
        { goal: `${tag} C1`, agent: agent({ op: 'spawn', tasks: [{ goal: `${tag} G1`, agent: HANG }] }) },
        { goal: `${tag} C2`, agent: HANG },
      ],
    });

  it('stops a three-level subtree: every descendant ends interrupted, children complete before their parent', async () => {
    const { connect } = env({ max_spawn_depth: 3 });
    const { client } = connect();
    const s = await session(client);
    const sid = s.session_id;
    const root = await spawnOne(client, sid, 'T root', tree('T'));
    const g1 = await startedGoal(client, 'T G1');
    const c2 = await startedGoal(client, 'T C2');
    const c1 = await startedGoal(client, 'T C1');
    const snaps = (await ok(client, 'subagent.list', { session_id: sid })).subagents;
    expect(snaps.map((x) => [x.subagent_id, x.depth, x.parent_id]).sort()).toEqual(
      [
        [root, 0, null],
        [c1, 1, root],
        [c2, 1, root],
        [g1, 2, c1],
      ].sort(),
    );

    const r = await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: root });
    expect(r.found).toBe(true);
    expect(r.subagent_id).toBe(root);
    expect(r.interrupted[0]).toBe(root);
    expect([...r.interrupted].sort()).toEqual([root, c1, c2, g1].sort());

    await client.waitForEvent(isEvent('subagent.complete', root));
    const completes = client.eventsWhere(isEvent('subagent.complete'));
    const at = (id: string) => completes.findIndex((e) => e.payload.subagent_id === id);
    for (const id of [root, c1, c2, g1]) expect(entryOf(completes[at(id)] as WireEvent).status).toBe('interrupted');
    expect(at(g1)).toBeLessThan(at(c1));
    expect(at(c1)).toBeLessThan(at(root));
    expect(at(c2)).toBeLessThan(at(root));

    expect(await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: root })).toEqual({ found: false, subagent_id: root, interrupted: [] });
    expect(await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: g1 })).toEqual({ found: false, subagent_id: g1, interrupted: [] });
    expect(await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: 'sa_nope' })).toEqual({
      found: false,
      subagent_id: 'sa_nope',
      interrupted: [],
    });
    expect((await ok(client, 'subagent.list', { session_id: sid })).subagents).toEqual([]);
  });

  it('stopping a middle child stops only its subtree; its parent goes on', async () => {
    const { connect } = env({ max_spawn_depth: 3 });
    const { client } = connect();
    const s = await session(client);
    const sid = s.session_id;
    const root = await spawnOne(client, sid, 'M root', tree('M'));
    const g1 = await startedGoal(client, 'M G1');
    const c2 = await startedGoal(client, 'M C2');
    const c1 = await startedGoal(client, 'M C1');
    expect(await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: c1 })).toEqual({ found: true, subagent_id: c1, interrupted: [c1, g1] });
    await client.waitForEvent(isEvent('subagent.complete', c1));
    expect((await ok(client, 'subagent.list', { session_id: sid })).subagents.map((x) => x.subagent_id).sort()).toEqual([root, c2].sort());
    expect(await ok(client, 'subagent.interrupt', { session_id: sid, subagent_id: root })).toEqual({ found: true, subagent_id: root, interrupted: [root, c2] });
    await client.waitForEvent(isEvent('subagent.complete', root));
  });
});

// ---- events ----

describe('events', () => {
  it('gateway.ready comes first on every connection: seq 0, no session_id', async () => {
    const { connect } = env();
    const { client } = connect();
    expect(client.messages).toHaveLength(1);
    const first = client.events[0] as WireEvent;
    expect(client.messages[0]).toEqual({ jsonrpc: '2.0', method: 'event', params: first });
    expect(first.type).toBe('gateway.ready');
    expect(first.seq).toBe(0);
    expect(first).not.toHaveProperty('session_id');
    expect(wireEventSchema.parse(first)).toEqual(first);
    expect(gatewayReadyPayloadSchema.parse(first.payload)).toEqual({
      protocol_version: 1,
      replay_epoch: expect.stringMatching(/^ep_/),
      server: { name: SERVER_NAME, version: VERSION },
      skin: {},
      change_events: false,
      heartbeat: true,
      // A server without a store has nothing to recover.
      recovered: { sessions: 0, children_settled: 0, steers_missed: 0 },
    });
  });

  it("numbers each session's events 1, 2, 3…, sends them to every transport in its slot and to no other, valid and leak-free", async () => {
    const { connect } = env({ max_spawn_depth: 2 });
    const a = connect().client;
    const a2 = connect().client;
    const u = connect().client;
    const n = connect().client;
    const s = await session(a);
    const su = await session(u);

    const busy = agent(
      { op: 'think', text: 'hmm' },
      { op: 'say', text: 'hello' },
      { op: 'tool', name: 'read', args: { path: 'x' } },
      { op: 'wait_steer' },
      { op: 'spawn', tasks: [{ goal: 'grandchild', agent: agent({ op: 'say', text: 'deep' }) }] },
      { op: 'finish', summary: 'busy done' },
    );
    const spawned = await ok(a, 'delegation.spawn', {
      session_id: s.session_id,
      // Extra keys a client might try to smuggle in: none may come back.
      tasks: [{ goal: 'busy', agent: busy, owner: { session_id: su.session_id }, transport: 'tr_1', session_key: su.session_key, runner: { model: 'x' } }],
    });
    const busyId = spawned.subagent_ids[0] as string;
    await a.waitForEvent(isEvent('subagent.tool', busyId));
    const uChild = await spawnOne(u, su.session_id, 'unrelated', agent({ op: 'say', text: 'mine' }));

    const attach = await ok(a2, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    expect(attach.live_subagents).toBe(1);
    const steer = queuedId(await ok(a2, 'subagent.steer', { session_id: s.session_id, subagent_id: busyId, text: 'go deeper' }));
    for (const c of [a, a2]) {
      await c.waitForEvent((e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === steer);
      await c.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === spawned.delegation_id);
    }
    await u.waitForEvent((e) => e.type === 'delegation.complete' && (e.payload.results as Entry[])[0]?.subagent_id === uChild);
    await ok(a, 'subagent.list', { session_id: s.session_id, include_finished: true });
    await ok(a2, 'delegation.status', { session_id: s.session_id });
    await ok(a, 'subagent.tail', { session_id: s.session_id, subagent_id: busyId });
    for (const c of [a, a2, u, n]) await barrier(c);

    // Each connection: gateway.ready, then only its sessions' events.
    for (const c of [a, a2, u, n]) {
      expect(c.events[0]?.type).toBe('gateway.ready');
      expect(c.events.filter((e) => e.type === 'gateway.ready')).toHaveLength(1);
      for (const e of c.events) expect(() => wireEventSchema.parse(e)).not.toThrow();
    }
    const ofS = (c: RpcTestClient) => c.events.slice(1);
    expect(ofS(a).every((e) => e.session_id === s.session_id)).toBe(true);
    expect(ofS(a).map((e) => e.seq)).toEqual(ofS(a).map((_, i) => i + 1));
    expect(ofS(a2).every((e) => e.session_id === s.session_id)).toBe(true);
    // The late joiner gets exactly the same events from its attach on: a contiguous suffix.
    const joined = ofS(a).findIndex((e) => e.seq === ofS(a2)[0]?.seq);
    expect(joined).toBeGreaterThan(0);
    expect(ofS(a2)).toEqual(ofS(a).slice(joined));
    expect(ofS(a2).map((e) => e.type)).toContain('subagent.steer.delivered');
    expect(ofS(u).every((e) => e.session_id === su.session_id)).toBe(true);
    expect(ofS(u).map((e) => e.seq)).toEqual(ofS(u).map((_, i) => i + 1));
    expect(ofS(u).some((e) => e.payload.subagent_id === busyId)).toBe(false);
    expect(ofS(n)).toEqual([]);
    // Every subagent.* payload names its child fully.
    for (const e of ofS(a).filter((x) => x.type.startsWith('subagent.'))) {
      for (const k of ['subagent_id', 'parent_id', 'depth', 'delegation_id', 'task_index', 'task_count', 'goal']) expect(e.payload).toHaveProperty(k);
    }
    expect(new Set(ofS(a).map((e) => e.type))).toEqual(
      new Set([
        'subagent.spawn_requested',
        'delegation.dispatched',
        'subagent.start',
        'subagent.thinking',
        'subagent.text',
        'subagent.tool',
        'subagent.steer.delivered',
        'subagent.complete',
        'delegation.complete',
        'session.idle',
      ]),
    );

    // No reply and no event anywhere carries owner, transport, session_key or runner — except
    // the session_key that session.create exists to hand out.
    for (const c of [a, a2, u, n]) {
      expect(privateKeyLeaks(c)).toEqual([]);
      expect(c.unparsable).toEqual([]);
      expect(c.unmatched).toEqual([]);
    }
  });
});
