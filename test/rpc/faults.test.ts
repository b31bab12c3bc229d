// Faults, end to end: runners that throw, reject, never settle or ignore their abort signal (over
// the wire, with a manual clock for the interrupt grace); connections dropped in the middle of a
// steer and of a batch (in memory, where the drop can be placed exactly, and over real WebSockets
// on 127.0.0.1); exactly one response per request across handler failures, disconnects and
// shutdown; SIGTERM of a real server with a tree of running, queued and parked children; SIGKILL
// of a real client process. Every wait is on an event, a reply, a close or an exit.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineRunnerKind } from '../../src/delegation/runners/kinds.ts';
import type { RunOutcome, Runner, RunnerContext } from '../../src/types.ts';
import { ErrorCode, isSubrunError } from '../../src/errors.ts';
import { counterIds } from '../../src/ids.ts';
import { silentLogger } from '../../src/log.ts';
import type { EventEnvelope } from '../../src/registry/events.ts';
import { Connection } from '../../src/rpc/connection.ts';
import type { Services } from '../../src/server/context.ts';
import type { RpcMethod } from '../../src/rpc/connection.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { memoryPair } from '../../src/rpc/transports/memory.ts';
import { listenWs } from '../../src/rpc/transports/ws.ts';
import { ManualClock, flush } from '../helpers/manual-clock.ts';
import {
  call,
  connectWs as connectWsProc,
  killAll,
  nextEvent,
  ROOT,
  scriptedTask,
  startStdio,
  startWsServer,
  WAIT_MS,
  type Msg,
  type Peer,
  type Proc,
  type WireEvent as ProcEvent,
} from '../helpers/process.ts';
import { connectMemory, connectWs, isEvent, ok, RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

const GRACE = 5_000;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await killAll();
});

// ---------------------------------------------------------------------------------------------
// Faulty runners, reachable over the wire as `agent: {kind: "fault", mode, ...}`
// ---------------------------------------------------------------------------------------------

const faultSpec = z.object({
  kind: z.literal('fault'),
  mode: z.enum(['throw-sync', 'reject', 'never', 'ignore-abort']),
  /** ignore-abort: ticks of 100 ms before it returns `completed`. */
  ticks: z.number().int().positive().optional(),
});

interface Handles {
  /** Each fault runner's context, by subagent id: the test drives late effects through it. */
  readonly ctxs: Map<string, RunnerContext>;
  readonly ticks: Map<string, number>;
}

function faultKind(clock: ManualClock, h: Handles) {
  return defineRunnerKind(faultSpec, (spec): Runner => ({
    model: `fault-${spec.mode}`,
    run(ctx): Promise<RunOutcome> {
      h.ctxs.set(ctx.subagent_id, ctx);
      switch (spec.mode) {
        case 'throw-sync':
          ctx.text('about to throw');
          throw new TypeError('sync kaput');
        case 'reject':
          return (async () => {
            ctx.text('got this far');
            await ctx.steerArrived();
            // Takes the steer (as a model runner would, before a model call) and then blows up.
            ctx.takeSteers();
            await Promise.resolve();
            throw new Error('async kaput');
          })();
        case 'never':
          ctx.text('last words');
          ctx.startTool('before').finish('ok');
          return new Promise<RunOutcome>(() => undefined);
        case 'ignore-abort':
          return (async () => {
            // Works on the runtime's clock but never looks at ctx.signal.
            for (let i = 1; i <= (spec.ticks ?? 1_000); i++) {
              await new Promise<void>((resolve) => clock.setTimeout(resolve, 100));
              h.ticks.set(ctx.subagent_id, i);
              ctx.text(`tick ${i}`);
              ctx.startTool('work', { i }).finish('ok');
              ctx.deliverSteers();
            }
            return { status: 'completed', summary: 'finished anyway' };
          })();
      }
    },
  }));
}

function faultServer(options: { max_concurrent_children?: number; max_spawn_depth?: number } = {}) {
  const clock = new ManualClock();
  const h: Handles = { ctxs: new Map(), ticks: new Map() };
  const server = new RpcServer({
    clock,
    ids: counterIds(),
    max_concurrent_children: options.max_concurrent_children ?? 3,
    max_spawn_depth: options.max_spawn_depth ?? 1,
    runtime: { interrupt_grace_ms: GRACE, runner_kinds: { fault: faultKind(clock, h) } },
  });
  const bus: EventEnvelope[] = [];
  server.runtime.events.subscribe('**', (e) => {
    bus.push(e);
  });
  cleanups.push(async () => {
    // Whatever a test left running: shutdown waits out the grace on the manual clock.
    const done = server.shutdown();
    await clock.advance(GRACE);
    await done;
  });
  return { clock, h, server, bus };
}

async function sessionOn(client: RpcTestClient) {
  return ok(client, 'session.create', {});
}

const completesOf = (client: RpcTestClient, id: string) => client.eventsWhere(isEvent('subagent.complete', id));
const entryOf = (e: WireEvent) => wireEntry(e.payload) as unknown as Record<string, unknown>;
const noStack = (client: RpcTestClient) => expect(JSON.stringify(client.messages)).not.toMatch(/\n\s+at |    at /);

describe('runner faults over the wire', () => {
  it('a runner that throws synchronously: its child completes `error` once, its sibling is untouched, the server answers on', async () => {
    const { server } = faultServer();
    const { client } = connectMemory(server);
    const { session_id } = await sessionOn(client);
    const spawned = await ok(client, 'delegation.spawn', {
      session_id,
      tasks: [
        { goal: 'throws', agent: { kind: 'fault', mode: 'throw-sync' } },
        scriptedTask('fine', [
          { op: 'tool', name: 'grep' },
          { op: 'finish', summary: 'fine' },
        ]),
      ],
    });
    const [bad, good] = spawned.subagent_ids as [string, string];
    const done = await client.waitForEvent(isEvent('delegation.complete'));
    expect((done.payload.results as Array<{ status: string }>).map((r) => r.status)).toEqual(['error', 'completed']);
    expect(completesOf(client, bad)).toHaveLength(1);
    expect(entryOf(completesOf(client, bad)[0] as WireEvent)).toMatchObject({
      status: 'error',
      error: 'sync kaput',
      summary: 'about to throw',
      model: 'fault-throw-sync',
    });
    expect(completesOf(client, good)).toHaveLength(1);
    expect(await ok(client, 'subagent.steer', { session_id, subagent_id: bad, text: 'too late' })).toMatchObject({ status: 'rejected' });
    expect(await ok(client, 'server.info')).toMatchObject({ name: 'subrun' });
    noStack(client);
  });

  it('a runner that rejects asynchronously after taking a steer: `error`, and the taken steer is in missed_steer', async () => {
    const { server, bus } = faultServer();
    const { client } = connectMemory(server);
    const { session_id } = await sessionOn(client);
    const { subagent_ids } = await ok(client, 'delegation.spawn', { session_id, tasks: [{ goal: 'rejects', agent: { kind: 'fault', mode: 'reject' } }] });
    const id = subagent_ids[0] as string;
    await client.waitForEvent(isEvent('subagent.text', id));
    expect(await ok(client, 'subagent.steer', { session_id, subagent_id: id, text: 'taken, never delivered' })).toMatchObject({ status: 'queued' });
    const complete = await client.waitForEvent(isEvent('subagent.complete', id));
    expect(entryOf(complete)).toMatchObject({
      status: 'error',
      summary: 'got this far',
      missed_steer: 'taken, never delivered',
      error: 'async kaput [steer did not land before the subagent stopped: taken, never delivered]',
    });
    expect(bus.filter((e) => e.type === 'subagent.steer.delivered')).toEqual([]);
    expect(completesOf(client, id)).toHaveLength(1);
    noStack(client);
  });

  it('a runner that never settles: the interrupt escalates after interrupt_grace_ms, the child completes `interrupted`, its slot frees, and nothing it does afterwards lands', async () => {
    const { server, clock, h, bus } = faultServer({ max_concurrent_children: 1, max_spawn_depth: 2 });
    const { client } = connectMemory(server);
    const { session_id } = await sessionOn(client);
    const first = await ok(client, 'delegation.spawn', { session_id, tasks: [{ goal: 'never returns', agent: { kind: 'fault', mode: 'never' } }] });
    const second = await ok(client, 'delegation.spawn', {
      session_id,
      tasks: [
        scriptedTask('waits for a slot', [
          { op: 'say', text: 'my turn' },
          { op: 'finish', summary: 'ran' },
        ]),
      ],
    });
    const stuck = first.subagent_ids[0] as string;
    const queued = second.subagent_ids[0] as string;
    await client.waitForEvent(isEvent('subagent.tool', stuck));
    expect(await ok(client, 'subagent.steer', { session_id, subagent_id: stuck, text: 'before the interrupt' })).toMatchObject({ status: 'queued' });
    expect(await ok(client, 'subagent.interrupt', { session_id, subagent_id: stuck })).toEqual({ found: true, subagent_id: stuck, interrupted: [stuck] });
    // Stopped, not yet finished: it still accepts steers (they will be missed), and holds its slot.
    expect(await ok(client, 'subagent.steer', { session_id, subagent_id: stuck, text: 'during the grace' })).toMatchObject({ status: 'queued' });
    expect(await ok(client, 'subagent.interrupt', { session_id, subagent_id: stuck })).toMatchObject({ found: false });
    await clock.advance(GRACE - 1);
    expect(completesOf(client, stuck)).toHaveLength(0);
    const mid = (await ok(client, 'subagent.list', { session_id })).subagents;
    expect(mid.map((s) => [s.subagent_id, s.status])).toEqual([
      [stuck, 'running'],
      [queued, 'queued'],
    ]);
    await clock.advance(1);
    const complete = await client.waitForEvent(isEvent('subagent.complete', stuck));
    expect(entryOf(complete)).toMatchObject({
      status: 'interrupted',
      summary: 'last words',
      missed_steer: 'before the interrupt\nduring the grace',
      tool_trace: [{ tool: 'before', status: 'ok' }],
    });
    // The slot it held is free: the queued sibling runs to its end.
    const secondDone = await client.waitForEvent(isEvent('subagent.complete', queued));
    expect(entryOf(secondDone)).toMatchObject({ status: 'completed', summary: 'ran' });

    // The abandoned runner wakes up and tries everything; none of it reaches anyone.
    const tail = await ok(client, 'subagent.tail', { session_id, subagent_id: stuck });
    const seen = client.events.length;
    const busSeen = bus.length;
    const ctx = h.ctxs.get(stuck) as RunnerContext;
    ctx.text('late text');
    ctx.thinking('late thought');
    ctx.textDelta('late delta');
    ctx.write('late write');
    ctx.startTool('late_tool', { x: 1 }).finish('late result');
    expect(ctx.deliverSteers()).toEqual([]);
    expect(ctx.takeSteers()).toEqual([]);
    ctx.confirmDelivered([{ steer_id: 'st_fake', text: 'x', seq: 1 }]);
    let refused: unknown;
    try {
      ctx.delegate([{ goal: 'orphan' }]);
    } catch (err) {
      refused = err;
    }
    expect(isSubrunError(refused, ErrorCode.RuntimeClosed)).toBe(true);
    await flush();
    expect(client.events.length).toBe(seen);
    expect(bus.length).toBe(busSeen);
    expect(await ok(client, 'subagent.tail', { session_id, subagent_id: stuck })).toEqual(tail);
    const after = (await ok(client, 'subagent.list', { session_id, include_finished: true })).subagents.find((s) => s.subagent_id === stuck);
    expect(after).toMatchObject({ status: 'interrupted', tool_count: 1, last_tool: 'before', accepting_steer: false });
    expect(await ok(client, 'subagent.steer', { session_id, subagent_id: stuck, text: 'after the end' })).toMatchObject({ status: 'rejected' });
    expect(completesOf(client, stuck)).toHaveLength(1);
  });

  it('a runner that ignores its abort and keeps working: abandoned after the grace; its later ticks, deliveries and its own `completed` are discarded', async () => {
    const { server, clock, h, bus } = faultServer();
    const { client } = connectMemory(server);
    const { session_id } = await sessionOn(client);
    const { subagent_ids } = await ok(client, 'delegation.spawn', {
      session_id,
      tasks: [{ goal: 'stubborn', agent: { kind: 'fault', mode: 'ignore-abort', ticks: 200 } }],
    });
    const id = subagent_ids[0] as string;
    await clock.advance(300);
    expect(h.ticks.get(id)).toBe(3);
    expect(await ok(client, 'subagent.interrupt', { session_id, subagent_id: id })).toMatchObject({ found: true });
    // Still working inside the grace: a steer now is taken at its next tick and delivered.
    const steer = await ok(client, 'subagent.steer', { session_id, subagent_id: id, text: 'inside the grace' });
    await clock.advance(100);
    expect(client.eventsWhere((e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === (steer as { steer_id: string }).steer_id)).toHaveLength(1);
    await clock.advance(GRACE - 100);
    const complete = await client.waitForEvent(isEvent('subagent.complete', id));
    // Its last tick before the abandonment is its summary (a tick due at the same instant may run
    // after it, into the closed context).
    const summary = String(entryOf(complete).summary);
    const ticksAtEnd = Number(/^tick (\d+)$/.exec(summary)?.[1]);
    expect(entryOf(complete)).toMatchObject({ status: 'interrupted' });
    expect(ticksAtEnd).toBeGreaterThanOrEqual(52);
    expect(entryOf(complete)).not.toHaveProperty('missed_steer');
    const seen = client.events.length;
    const busSeen = bus.length;
    const tail = await ok(client, 'subagent.tail', { session_id, subagent_id: id });
    // Twenty more seconds of its work, then its `completed`: all of it after the entry, all dropped.
    await clock.advance(20_000);
    expect(h.ticks.get(id)).toBe(200);
    await flush();
    expect(client.events.length).toBe(seen);
    expect(bus.length).toBe(busSeen);
    expect(await ok(client, 'subagent.tail', { session_id, subagent_id: id })).toEqual(tail);
    expect((await ok(client, 'subagent.list', { session_id, include_finished: true })).subagents[0]).toMatchObject({
      status: 'interrupted',
      tool_count: ticksAtEnd,
    });
    expect(completesOf(client, id)).toHaveLength(1);
  });

  it('a runner that ignores its abort but returns within the grace: `interrupted` (the abort decides), with the summary it returned', async () => {
    const { server, clock } = faultServer();
    const { client } = connectMemory(server);
    const { session_id } = await sessionOn(client);
    const { subagent_ids } = await ok(client, 'delegation.spawn', {
      session_id,
      tasks: [{ goal: 'late return', agent: { kind: 'fault', mode: 'ignore-abort', ticks: 5 } }],
    });
    const id = subagent_ids[0] as string;
    await clock.advance(200);
    await ok(client, 'subagent.interrupt', { session_id, subagent_id: id });
    await clock.advance(300);
    const complete = await client.waitForEvent(isEvent('subagent.complete', id));
    expect(entryOf(complete)).toMatchObject({
      status: 'interrupted',
      summary: 'finished anyway',
      tool_trace: Array.from({ length: 5 }, () => ({ tool: 'work', status: 'ok' })),
    });
  });

  it('shutdown with a runner that never settles ends after the grace, and the completion is sent before the connection closes', async () => {
    const { server, clock } = faultServer();
    const { client } = connectMemory(server);
    const { session_id } = await sessionOn(client);
    const { subagent_ids } = await ok(client, 'delegation.spawn', { session_id, tasks: [{ goal: 'never', agent: { kind: 'fault', mode: 'never' } }] });
    const id = subagent_ids[0] as string;
    await client.waitForEvent(isEvent('subagent.tool', id));
    let finished = false;
    const done = server.shutdown().then(() => (finished = true));
    await clock.advance(GRACE - 1);
    expect(finished).toBe(false);
    expect(client.isClosed).toBe(false);
    await clock.advance(1);
    await done;
    expect(completesOf(client, id)).toHaveLength(1);
    expect(entryOf(completesOf(client, id)[0] as WireEvent)).toMatchObject({ status: 'interrupted' });
    expect(client.isClosed).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Connections dropped mid-steer and mid-batch
// ---------------------------------------------------------------------------------------------

/** A memory connection that the "network" drops the instant the server has read a matching message. */
function connectDroppingAfter(server: RpcServer, match: (text: string) => boolean) {
  const pair = memoryPair();
  const client = new RpcTestClient((t) => pair.client.send(t));
  pair.client.onmessage = (t) => client.receive(t);
  pair.client.onclose = () => client.handleClosed();
  server.connect(pair.server);
  const deliver = pair.server.onmessage as (text: string) => void;
  let dropped = false;
  pair.server.onmessage = (text) => {
    deliver(text);
    if (!dropped && match(text)) {
      dropped = true;
      pair.client.close();
    }
  };
  return client;
}

/** Every way a steer text can have landed: delivered events and missed_steer entries (the runtime's own log). */
function fates(bus: readonly EventEnvelope[], text: string): { delivered: number; missed: number } {
  const delivered = bus.filter((e) => e.type === 'subagent.steer.delivered' && e.text === text).length;
  const missed = bus
    .filter((e) => e.type === 'subagent.complete')
    .flatMap((e) => ((e.entry as { missed_steer?: string }).missed_steer ?? '').split('\n'))
    .filter((t) => t === text).length;
  return { delivered, missed };
}

describe('a connection dropped in the middle of a steer', () => {
  it.each([
    ['waiting for a steer (it is delivered while the session is parked)', [{ op: 'wait_steer' }, { op: 'say', text: 'got it' }, { op: 'hang' }], 'delivered'],
    ['hanging (it waits, and is missed when the child is stopped)', [{ op: 'hang' }], 'missed'],
  ] as const)('the steer was applied, its reply was lost; after re-attach the child %s, exactly once', async (_name, steps, fate) => {
    const { server, bus } = faultServer();
    const a = connectMemory(server);
    const { session_id, session_key } = await sessionOn(a.client);
    const { subagent_ids } = await ok(a.client, 'delegation.spawn', { session_id, tasks: [scriptedTask('steered', [...steps])] });
    const id = subagent_ids[0] as string;
    await a.client.waitForEvent(isEvent('subagent.start', id));
    a.close();
    const text = `mid-steer ${fate}`;
    const dropping = connectDroppingAfter(server, (t) => t.includes('subagent.steer'));
    await ok(dropping, 'session.attach', { session_id, session_key });
    await expect(dropping.call('subagent.steer', { session_id, subagent_id: id, text })).rejects.toThrow(/connection closed/);
    await flush();
    // Parked, not closed: a new connection attaches and sees the steer's one fate.
    const b = connectMemory(server);
    expect(await ok(b.client, 'session.attach', { session_id, session_key })).toMatchObject({ live_subagents: 1 });
    const tail = await ok(b.client, 'subagent.tail', { session_id, subagent_id: id });
    expect(tail.text.split('\n').filter((l) => l === `[steer] ${text}`)).toHaveLength(fate === 'delivered' ? 1 : 0);
    await ok(b.client, 'subagent.interrupt', { session_id, subagent_id: id });
    const complete = await b.client.waitForEvent(isEvent('subagent.complete', id));
    if (fate === 'missed') expect(entryOf(complete).missed_steer).toBe(text);
    else expect(entryOf(complete)).not.toHaveProperty('missed_steer');
    expect(fates(bus, text)).toEqual(fate === 'delivered' ? { delivered: 1, missed: 0 } : { delivered: 0, missed: 1 });
  });

  it('over real WebSockets: steers sent and the socket killed at once each land at most once, in order, and only as delivered or missed', async () => {
    const { server, bus } = faultServer();
    const listener = await listenWs(
      { host: '127.0.0.1', port: 0, token: 'faults', allow_origins: [], max_message_bytes: 1 << 20, logger: silentLogger },
      (t) => void server.connect(t),
    );
    cleanups.push(() => listener.close());
    const a = await connectWs(listener.url, 'faults');
    const { session_id, session_key } = await ok(a.client, 'session.create', {});
    const { subagent_ids } = await ok(a.client, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('hangs', [{ op: 'hang' }]), scriptedTask('waits', [...Array.from({ length: 40 }, () => ({ op: 'wait_steer' })), { op: 'hang' }])],
    });
    await a.close();
    const texts: string[] = [];
    for (let i = 0; i < 40; i++) {
      const ep = await connectWs(listener.url, 'faults');
      await ok(ep.client, 'session.attach', { session_id, session_key });
      const text = `ws-drop-${i}`;
      texts.push(text);
      const frame = JSON.stringify({ jsonrpc: '2.0', id: 1_000 + i, method: 'subagent.steer', params: { session_id, subagent_id: subagent_ids[i % 2], text } });
      const gone = ep.client.closed;
      // Half are killed before the frame is flushed, half right after it was handed to the kernel.
      if (i % 4 < 2) {
        ep.ws.send(frame);
        ep.ws.terminate();
      } else {
        ep.ws.send(frame, () => ep.ws.terminate());
      }
      await gone;
    }
    const b = await connectWs(listener.url, 'faults');
    cleanups.push(() => b.close());
    await ok(b.client, 'session.attach', { session_id, session_key });
    for (const id of subagent_ids) await ok(b.client, 'subagent.interrupt', { session_id, subagent_id: id });
    await Promise.all(subagent_ids.map((id) => b.client.waitForEvent(isEvent('subagent.complete', id))));
    const landed = texts.filter((t) => {
      const f = fates(bus, t);
      expect(f.delivered + f.missed, t).toBeLessThanOrEqual(1);
      return f.delivered + f.missed === 1;
    });
    // Per child, what landed keeps the order it was sent in.
    for (const [k, id] of subagent_ids.entries()) {
      const mine = texts.filter((_t, i) => i % 2 === k && landed.includes(texts[i] as string));
      const seen = [
        ...bus.filter((e) => e.type === 'subagent.steer.delivered' && e.subagent_id === id).map((e) => e.text as string),
        ...bus
          .filter((e) => e.type === 'subagent.complete' && e.subagent_id === id)
          .flatMap((e) => ((e.entry as { missed_steer?: string }).missed_steer ?? '').split('\n'))
          .filter((t) => t !== ''),
      ];
      expect(seen).toEqual(mine);
    }
    console.log(`[faults] ws mid-steer drops: ${landed.length} of ${texts.length} steers reached the server before the drop; each landed exactly once`);
  });
});

describe('a connection dropped in the middle of a batch', () => {
  it('in memory, dropped the instant the batch was read: no reply, no crash, and every call of it took its whole effect', async () => {
    const { server, bus } = faultServer();
    const a = connectMemory(server);
    const { session_id, session_key } = await sessionOn(a.client);
    const { subagent_ids } = await ok(a.client, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('one', [{ op: 'hang' }]), scriptedTask('two', [{ op: 'hang' }]), scriptedTask('three', [{ op: 'hang' }])],
    });
    const [one, two, three] = subagent_ids as [string, string, string];
    a.close();
    const dropping = connectDroppingAfter(server, (t) => t.startsWith('['));
    await ok(dropping, 'session.attach', { session_id, session_key });
    const batch = [
      { jsonrpc: '2.0', id: 'b1', method: 'subagent.steer', params: { session_id, subagent_id: one, text: 'batch steer one' } },
      {
        jsonrpc: '2.0',
        id: 'b2',
        method: 'delegation.spawn',
        params: { session_id, tasks: [scriptedTask('batch child', [{ op: 'hang' }]), scriptedTask('batch child', [{ op: 'hang' }])] },
      },
      { jsonrpc: '2.0', id: 'b3', method: 'subagent.interrupt', params: { session_id, subagent_id: three } },
      { jsonrpc: '2.0', id: 'b4', method: 'subagent.steer', params: { session_id, subagent_id: two, text: 'batch steer two' } },
      { jsonrpc: '2.0', id: 'b5', method: 'subagent.list', params: { session_id } },
      { jsonrpc: '2.0', method: 'delegation.pause', params: { session_id, paused: false } },
    ];
    const replies = () => dropping.messages.filter((m) => Array.isArray(m) || (typeof m === 'object' && m !== null && 'id' in m)).length;
    const before = replies();
    dropping.sendRaw(JSON.stringify(batch));
    await dropping.closed;
    await flush();
    // (The spawn's events went out while the batch ran; its reply never did.)
    expect(replies()).toBe(before);
    const b = connectMemory(server);
    await ok(b.client, 'session.attach', { session_id, session_key });
    const list = (await ok(b.client, 'subagent.list', { session_id, include_finished: true })).subagents;
    expect(list.filter((s) => s.goal === 'batch child')).toHaveLength(2);
    expect(list.find((s) => s.subagent_id === three)?.status).toBe('interrupted');
    for (const id of [one, two]) await ok(b.client, 'subagent.interrupt', { session_id, subagent_id: id });
    await flush();
    expect(fates(bus, 'batch steer one')).toEqual({ delivered: 0, missed: 1 });
    expect(fates(bus, 'batch steer two')).toEqual({ delivered: 0, missed: 1 });
    expect(await ok(b.client, 'server.info')).toMatchObject({ name: 'subrun' });
  });

  it('over real WebSockets, killed right after sending: each call of the batch has its whole effect or none (here: the whole batch, or none of it)', async () => {
    const { server, bus } = faultServer({ max_concurrent_children: 3 });
    const listener = await listenWs(
      { host: '127.0.0.1', port: 0, token: 'faults', allow_origins: [], max_message_bytes: 1 << 20, logger: silentLogger },
      (t) => void server.connect(t),
    );
    cleanups.push(() => listener.close());
    const outcomes: string[] = [];
    for (let i = 0; i < 12; i++) {
      const a = await connectWs(listener.url, 'faults');
      const { session_id, session_key } = await ok(a.client, 'session.create', {});
      const { subagent_ids } = await ok(a.client, 'delegation.spawn', {
        session_id,
        tasks: [scriptedTask('s', [{ op: 'hang' }]), scriptedTask('i', [{ op: 'hang' }])],
      });
      const [steered, stopped] = subagent_ids as [string, string];
      const text = `ws batch ${i}`;
      const batch = [
        { jsonrpc: '2.0', id: 1, method: 'subagent.steer', params: { session_id, subagent_id: steered, text } },
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'delegation.spawn',
          params: { session_id, tasks: [scriptedTask(`pair ${i}`, [{ op: 'hang' }]), scriptedTask(`pair ${i}`, [{ op: 'hang' }])] },
        },
        { jsonrpc: '2.0', id: 3, method: 'subagent.interrupt', params: { session_id, subagent_id: stopped } },
      ];
      const gone = a.client.closed;
      if (i % 2 === 0) {
        a.ws.send(JSON.stringify(batch));
        a.ws.terminate();
      } else {
        a.ws.send(JSON.stringify(batch), () => a.ws.terminate());
      }
      await gone;
      const b = await connectWs(listener.url, 'faults');
      await ok(b.client, 'session.attach', { session_id, session_key });
      const list = (await ok(b.client, 'subagent.list', { session_id, include_finished: true })).subagents;
      const pair = list.filter((s) => s.goal === `pair ${i}`).length;
      const interrupted = list.find((s) => s.subagent_id === stopped)?.status === 'interrupted';
      await ok(b.client, 'session.close', { session_id });
      await flush();
      const f = fates(bus, text);
      expect([0, 2]).toContain(pair);
      expect(f.delivered).toBe(0);
      const applied = [f.missed === 1, pair === 2, interrupted];
      // One message is handled in one synchronous step: all of its calls, or (never read) none.
      expect(new Set(applied).size, `batch ${i}: ${JSON.stringify(applied)}`).toBe(1);
      outcomes.push(applied[0] ? 'applied' : 'lost');
      await b.close();
    }
    console.log(`[faults] ws mid-batch drops: ${outcomes.filter((o) => o === 'applied').length} of ${outcomes.length} batches reached the server, each whole`);
  });
});

// ---------------------------------------------------------------------------------------------
// Exactly one response per request
// ---------------------------------------------------------------------------------------------

describe('exactly one response per request', () => {
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  const def = (call: () => unknown): RpcMethod => ({ call });
  const METHODS = new Map<string, RpcMethod>([
    ['ok', def(() => ({ fine: true }))],
    [
      'throws',
      def(() => {
        throw new Error('sync failure with a /secret/path.ts');
      }),
    ],
    ['rejects', def(() => Promise.reject(new RangeError('async failure')))],
    ['bigint', def(() => ({ n: 10n }))],
    ['circular', def(() => circular)],
    ['nothing', def(() => undefined)],
    ['slow', def(() => new Promise((resolve) => setImmediate(() => resolve('slow'))))],
  ]);
  const NAMES = [...METHODS.keys(), 'missing'];

  type Item = { kind: 'request'; method: string } | { kind: 'notification'; method: string } | { kind: 'invalid' };
  const itemArb: fc.Arbitrary<Item> = fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('request' as const), method: fc.constantFrom(...NAMES) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('notification' as const), method: fc.constantFrom(...NAMES) }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'invalid' as const }) },
  );

  function harness() {
    const { server, client } = memoryPair();
    const texts: string[] = [];
    let afterClose = 0;
    let closed = false;
    client.onmessage = (t) => {
      if (closed) afterClose += 1;
      texts.push(t);
    };
    const conn = new Connection('tr_fault', server, METHODS, {} as Services, silentLogger, () => undefined);
    conn.start();
    return {
      conn,
      texts,
      close() {
        closed = true;
        conn.close();
      },
      get afterClose() {
        return afterClose;
      },
    };
  }

  it('across handler failures (sync throw, async reject, a BigInt or a cycle in the result, no result, a slow one): one reply per request, in batches and alone', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(itemArb, { minLength: 1, maxLength: 8 }), fc.boolean(), async (items, asBatch) => {
        const h = harness();
        const ids: number[] = [];
        const msgs = items.map((it) => {
          if (it.kind === 'invalid') {
            const id = ++n;
            ids.push(id);
            return { jsonrpc: '1.0', id, method: 'ok' };
          }
          if (it.kind === 'notification') return { jsonrpc: '2.0', method: it.method };
          const id = ++n;
          ids.push(id);
          return { jsonrpc: '2.0', id, method: it.method };
        });
        if (asBatch) await h.conn.handle(JSON.stringify(msgs));
        else for (const m of msgs) await h.conn.handle(JSON.stringify(m));
        const replies = h.texts.map((t) => JSON.parse(t) as unknown).flatMap((m) => (Array.isArray(m) ? m : [m])) as Array<Record<string, unknown>>;
        expect(replies.map((r) => r.id).sort()).toEqual([...ids].sort());
        for (const r of replies) {
          expect(Object.hasOwn(r, 'result') !== Object.hasOwn(r, 'error'), JSON.stringify(r)).toBe(true);
          const method = (msgs.find((m) => 'id' in m && m.id === r.id) as { method: string; jsonrpc: string }).method;
          if (
            ['throws', 'rejects', 'bigint', 'circular'].includes(method) &&
            (msgs.find((m) => 'id' in m && m.id === r.id) as { jsonrpc: string }).jsonrpc === '2.0'
          ) {
            expect(r.error).toEqual({ code: -32603, message: 'Internal error' });
          }
        }
        expect(h.texts.join('\n')).not.toMatch(/secret|    at /);
        if (asBatch) expect(h.texts.length).toBeLessThanOrEqual(1);
      }),
      { numRuns: 300 },
    );
  });

  it('across disconnects: requests in flight when the connection closes get no reply and nothing is written after the close', async () => {
    const h = harness();
    const pending = [
      h.conn.handle('{"jsonrpc":"2.0","id":1,"method":"slow"}'),
      h.conn.handle('[{"jsonrpc":"2.0","id":2,"method":"slow"},{"jsonrpc":"2.0","id":3,"method":"ok"}]'),
      h.conn.handle('{"jsonrpc":"2.0","id":4,"method":"ok"}'),
    ];
    h.close();
    await Promise.all(pending);
    await flush();
    expect(h.afterClose).toBe(0);
    // Request 4 resolved synchronously enough to be written before the close, or not at all; never twice.
    const ids = h.texts.map((t) => JSON.parse(t) as { id?: number }).map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => id === 4)).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Shutdown: a batch sent right before SIGTERM; SIGTERM with a tree of children running
// ---------------------------------------------------------------------------------------------

/** What a peer got for `ids` after its stream ended: the batch replies, and anything stray. */
function repliesFor(all: readonly unknown[], ids: readonly string[]): { batches: Msg[][]; stray: unknown[] } {
  const batches: Msg[][] = [];
  const stray: unknown[] = [];
  for (const m of all) {
    if (Array.isArray(m)) batches.push(m as Msg[]);
    else if (typeof m === 'object' && m !== null && 'id' in m && ids.includes((m as Msg).id as string)) stray.push(m);
  }
  return { batches, stray };
}

function expectAllOrClosed(all: readonly unknown[], ids: readonly string[], what: string): 'answered' | 'closed' {
  const { batches, stray } = repliesFor(all, ids);
  expect(stray, what).toEqual([]);
  expect(batches.length, what).toBeLessThanOrEqual(1);
  if (batches.length === 0) return 'closed';
  const got = (batches[0] as Msg[]).map((r) => r.id as string);
  expect([...got].sort(), what).toEqual([...ids].sort());
  for (const r of batches[0] as Msg[]) {
    if (r.error) expect([-32000, 4001], `${what}: ${JSON.stringify(r)}`).toContain(r.error.code);
  }
  return 'answered';
}

function shutdownBatch(session_id: string, tag: string): { text: string; ids: string[] } {
  const msgs = [
    { method: 'server.info', params: {} },
    { method: 'subagent.list', params: { session_id } },
    { method: 'delegation.status', params: { session_id } },
    { method: 'delegation.spawn', params: { session_id, tasks: [scriptedTask('late', [{ op: 'hang' }])] } },
    { method: 'subagent.steer', params: { session_id, subagent_id: 'sa_x', text: 'x' } },
  ].map((m, i) => ({ jsonrpc: '2.0', id: `${tag}-${i}`, ...m }));
  return { text: JSON.stringify(msgs), ids: msgs.map((m) => m.id) };
}

type Timing = 'before-flush' | 'after-flush' | 'signal-first';
const TIMINGS: Timing[] = ['before-flush', 'after-flush', 'signal-first'];

describe('shutdown: a batch sent right before SIGTERM gets all its responses or the connection closes, never a duplicate or a stray', () => {
  it('over stdio', async () => {
    const results = await Promise.all(
      TIMINGS.map(async (timing) => {
        const { proc, peer } = await startStdio();
        const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
        await call(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('running', [{ op: 'hang' }])] });
        const { text, ids } = shutdownBatch(session_id, timing);
        if (timing === 'signal-first') proc.child.kill('SIGTERM');
        if (timing === 'after-flush') await new Promise<void>((resolve) => proc.child.stdin.write(`${text}\n`, () => resolve()));
        else proc.child.stdin.write(`${text}\n`);
        if (timing !== 'signal-first') proc.child.kill('SIGTERM');
        expect(await proc.waitExit()).toEqual({ code: 0, signal: null });
        await peer.inbox.whenEnded();
        return `${timing}: ${expectAllOrClosed(peer.inbox.all, ids, `stdio ${timing}`)}`;
      }),
    );
    console.log(`[faults] stdio batch before SIGTERM: ${results.join('; ')}`);
  });

  it('over WebSocket', async () => {
    const results = await Promise.all(
      TIMINGS.map(async (timing) => {
        const server = await startWsServer();
        const { peer } = await connectWsProc(server);
        const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
        await call(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('running', [{ op: 'hang' }])] });
        const { text, ids } = shutdownBatch(session_id, timing);
        if (timing === 'signal-first') server.proc.child.kill('SIGTERM');
        if (timing === 'after-flush') await new Promise<void>((resolve) => peer.ws.send(text, () => resolve()));
        else peer.ws.send(text);
        if (timing !== 'signal-first') server.proc.child.kill('SIGTERM');
        expect(await server.proc.waitExit()).toEqual({ code: 0, signal: null });
        await peer.closed;
        return `${timing}: ${expectAllOrClosed(peer.inbox.all, ids, `ws ${timing}`)}`;
      }),
    );
    console.log(`[faults] ws batch before SIGTERM: ${results.join('; ')}`);
  });
});

/** Parses the server's pino lines on stderr. */
const logLines = (proc: Proc) =>
  proc.stderr.all.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });

describe('SIGTERM with children running', () => {
  it('interrupts every child (running, queued, grandchildren, a parked session’s), sends every completion, closes and exits 0 within the bound', async () => {
    const BOUND_MS = 10_000;
    const server = await startWsServer(['--log-level', 'info', '--max-spawn-depth', '2', '--max-concurrent-children', '2']);
    const { peer: a } = await connectWsProc(server);
    const { session_id } = await call<{ session_id: string }>(a, 'session.create');
    const parentSteps = [{ op: 'spawn', tasks: [scriptedTask('grandchild', [{ op: 'hang' }]), scriptedTask('grandchild', [{ op: 'hang' }])] }, { op: 'hang' }];
    const first = await call<{ subagent_ids: string[]; delegation_id: string }>(a, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('parent', parentSteps), scriptedTask('parent', parentSteps)],
    });
    const second = await call<{ subagent_ids: string[]; delegation_id: string }>(a, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('queued', [{ op: 'hang' }])],
    });
    // Two parents and four grandchildren start; the third first-level child waits for a slot.
    const starts: ProcEvent[] = [];
    for (let i = 0; i < 6; i++) starts.push(await nextEvent(a, (e) => e.type === 'subagent.start', WAIT_MS, 'six starts'));
    const grandchildren = starts.filter((e) => e.payload.depth === 1).map((e) => e.payload.subagent_id as string);
    expect(grandchildren).toHaveLength(4);
    const listed = await call<{ subagents: Array<{ subagent_id: string; status: string }> }>(a, 'subagent.list', { session_id });
    expect(listed.subagents.find((s) => s.subagent_id === second.subagent_ids[0])?.status).toBe('queued');
    const sessionA = [...first.subagent_ids, ...second.subagent_ids, ...grandchildren];

    // A second session, parked: its creator is gone, its children run on.
    const { peer: b } = await connectWsProc(server);
    const sb = await call<{ session_id: string }>(b, 'session.create');
    const parked = await call<{ subagent_ids: string[] }>(b, 'delegation.spawn', {
      session_id: sb.session_id,
      tasks: [scriptedTask('parked', [{ op: 'hang' }]), scriptedTask('parked', [{ op: 'hang' }])],
    });
    await nextEvent(b, (e) => e.type === 'subagent.start');
    await nextEvent(b, (e) => e.type === 'subagent.start');
    await b.close();

    const t0 = Date.now();
    server.proc.child.kill('SIGTERM');
    const completes = new Map<string, ProcEvent>();
    const order: string[] = [];
    while (completes.size < sessionA.length) {
      const e = await nextEvent(a, (x) => x.type === 'subagent.complete', WAIT_MS, 'every completion');
      const id = e.payload.subagent_id as string;
      expect(completes.has(id), `a second completion for ${id}`).toBe(false);
      completes.set(id, e);
      order.push(id);
    }
    const delegations = new Set<string>();
    for (let i = 0; i < 4; i++)
      delegations.add((await nextEvent(a, (x) => x.type === 'delegation.complete', WAIT_MS, 'every delegation')).payload.delegation_id as string);
    expect(delegations.has(first.delegation_id) && delegations.has(second.delegation_id)).toBe(true);
    const closed = await (a as Peer & { closed: Promise<{ code: number }> }).closed;
    const exit = await server.proc.waitExit(BOUND_MS);
    const elapsed = Date.now() - t0;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(elapsed).toBeLessThan(BOUND_MS);
    expect(closed.code).toBe(1001);
    expect([...completes.keys()].sort()).toEqual([...sessionA].sort());
    for (const e of completes.values()) expect(wireEntry(e.payload).status).toBe('interrupted');
    // Post-order: each grandchild's completion before its parent's.
    for (const g of grandchildren) {
      const parent = completes.get(g)?.payload.parent_id as string;
      expect(order.indexOf(g)).toBeLessThan(order.indexOf(parent));
    }
    // The parked session's children were stopped too: the log has their completions.
    await server.proc.stderr.whenEnded();
    const logs = logLines(server.proc);
    for (const id of [...parked.subagent_ids, ...sessionA]) {
      expect(
        logs.filter((l) => l.msg === 'child completed' && l.subagent_id === id).map((l) => l.status),
        id,
      ).toEqual(['interrupted']);
    }
    console.log(
      `[faults] SIGTERM with ${sessionA.length + parked.subagent_ids.length} children (running, queued, grandchildren, parked): exit 0 after ${elapsed} ms (bound ${BOUND_MS} ms)`,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// SIGKILL of a client process
// ---------------------------------------------------------------------------------------------

/** A client in its own process: creates a session, spawns, prints the session and stays connected. */
const CLIENT = `
import WebSocket from ${JSON.stringify(new URL('node_modules/ws/wrapper.mjs', `file://${ROOT}`).href)};
const [url, token] = process.argv.slice(1);
const ws = new WebSocket(url, { headers: { Authorization: 'Bearer ' + token } });
let n = 0;
const pending = new Map();
ws.on('message', (data) => {
  const m = JSON.parse(String(data));
  if (m.id !== undefined && pending.has(m.id)) pending.get(m.id)(m);
});
const call = (method, params) => new Promise((resolve) => { const id = ++n; pending.set(id, resolve); ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params })); });
ws.on('open', async () => {
  const s = (await call('session.create', {})).result;
  const tasks = [
    { goal: 'waits', agent: { kind: 'scripted', steps: [{ op: 'wait_steer' }, { op: 'say', text: 'steered' }, { op: 'hang' }] } },
    { goal: 'works', agent: { kind: 'scripted', steps: [...Array.from({ length: 400 }, () => ({ op: 'tool', name: 'tick', ms: 25 })), { op: 'hang' }] } },
  ];
  const d = (await call('delegation.spawn', { session_id: s.session_id, tasks })).result;
  process.stdout.write(JSON.stringify({ ...s, subagent_ids: d.subagent_ids }) + '\\n');
});
`;

describe('SIGKILL of a client process', () => {
  let client: ChildProcessWithoutNullStreams | undefined;
  afterEach(() => {
    if (client && client.exitCode === null && client.signalCode === null) client.kill('SIGKILL');
  });

  it('the server keeps serving, the session is parked with its children running, and a new connection attaches with the key and controls them', async () => {
    const server = await startWsServer(['--log-level', 'info']);
    client = spawn(process.execPath, ['--input-type=module', '-e', CLIENT, server.url, server.token], { stdio: ['pipe', 'pipe', 'pipe'] });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => client?.once('exit', (_code, signal) => resolve(signal)));
    const line = await new Promise<string>((resolve, reject) => {
      let buf = '';
      client?.stdout.on('data', (d: Buffer) => {
        buf += d.toString();
        if (buf.includes('\n')) resolve(buf.slice(0, buf.indexOf('\n')));
      });
      client?.once('exit', () => reject(new Error(`client exited early: ${buf}`)));
    });
    const { session_id, session_key, subagent_ids } = JSON.parse(line) as { session_id: string; session_key: string; subagent_ids: [string, string] };
    const [waits, works] = subagent_ids;
    // The server's number for the client's connection, from its log line (stderr may lag stdout).
    const created = await server.proc.stderr.take((l) => l.includes('"msg":"session created"') && l.includes(session_id), WAIT_MS, 'the session’s log line');
    const opened = (JSON.parse(created) as { transport?: string }).transport;
    expect(opened).toMatch(/^tr_\d+$/);

    client.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    // The server saw the connection go (the kernel closed the socket), and parked the session.
    await server.proc.stderr.take(
      (l) => l.includes('"msg":"connection closed"') && l.includes(`"transport":"${String(opened)}"`),
      WAIT_MS,
      'the dead client’s connection to close',
    );

    const { peer } = await connectWsProc(server);
    expect(await call(peer, 'server.info')).toMatchObject({ name: 'subrun' });
    const attached = await call<{ live_subagents: number }>(peer, 'session.attach', { session_id, session_key });
    expect(attached.live_subagents).toBe(2);
    // Still running: the working child's tool events flow to the new connection.
    const tick = await nextEvent(peer, (e) => e.type === 'subagent.tool' && e.payload.subagent_id === works, WAIT_MS, 'a tick of the working child');
    expect(tick.session_id).toBe(session_id);
    const steer = await call<{ status: string; steer_id: string }>(peer, 'subagent.steer', { session_id, subagent_id: waits, text: 'after the crash' });
    expect(steer.status).toBe('queued');
    const delivered = await nextEvent(peer, (e) => e.type === 'subagent.steer.delivered', WAIT_MS, 'the delivery');
    expect(delivered.payload).toMatchObject({ subagent_id: waits, steer_id: steer.steer_id, text: 'after the crash' });
    for (const id of subagent_ids) {
      expect(await call(peer, 'subagent.interrupt', { session_id, subagent_id: id })).toMatchObject({ found: true });
      const done = await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, WAIT_MS, 'the completion');
      expect(wireEntry(done.payload).status).toBe('interrupted');
    }
    expect(server.proc.child.exitCode).toBeNull();
    await peer.close();
  });
});
