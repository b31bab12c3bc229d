// session.events.since over the wire: a host that dropped while events flowed gets exactly the
// envelopes it missed (byte for byte as sent, none twice), from a ring bounded per session and
// kept while the session is parked; `truncated` once the gap is older than the ring.
import { afterEach, describe, expect, it } from 'vitest';
import { gatewayReadyPayloadSchema, resultSchemas } from '../../src/contract/wire.ts';
import { RpcServer, type ServerOptions } from '../../src/rpc/server.ts';
import { connectMemory, fails, ok, type RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';

const servers: RpcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
});

function start(options: ServerOptions = {}) {
  const server = new RpcServer(options);
  servers.push(server);
  return server;
}

/** Ten children that each say one line per steer round, so events flow while we are away. */
const talker = (rounds: number) => ({
  kind: 'scripted',
  steps: [...Array.from({ length: rounds }, (_, i) => [{ op: 'wait_steer' }, { op: 'say', text: `round ${i}` }]).flat(), { op: 'hang' }],
});

/** The session's event envelopes a client received, re-serialised (gateway.ready belongs to none). */
const texts = (c: RpcTestClient) =>
  c.messages
    .filter((m) => (m as { method?: string }).method === 'event' && (m as { params: { type: string } }).params.type !== 'gateway.ready')
    .map((m) => JSON.stringify((m as { params: unknown }).params));

describe('session.events.since', () => {
  it('gives a host that dropped exactly the events it missed, as they were sent, before it re-attaches', async () => {
    const server = start();
    const a = connectMemory(server);
    const s = await ok(a.client, 'session.create', {});
    const spawn = await ok(a.client, 'delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'talks', agent: talker(6) }] });
    const child = spawn.subagent_ids[0] as string;
    await a.client.waitForEvent((e) => e.type === 'subagent.start');
    await ok(a.client, 'subagent.steer', { session_id: s.session_id, subagent_id: child, text: 'one' });
    await a.client.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === 'round 0');
    const seen = a.client.events.at(-1)?.seq as number;
    const sentToA = texts(a.client);
    a.close();
    await a.conn.whenClosed;

    // While parked, the session goes on: a second host with the key steers it twice.
    const b = connectMemory(server);
    const watch = connectMemory(server);
    await ok(watch.client, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    for (const text of ['two', 'three']) {
      await ok(watch.client, 'subagent.steer', { session_id: s.session_id, subagent_id: child, text });
      await watch.client.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === (text === 'two' ? 'round 1' : 'round 2'));
    }
    const sentToWatch = texts(watch.client);

    // Not attached: the key is the authority; a wrong one is the same 4001 as an unknown session.
    expect((await fails(b.client, 'session.events.since', { session_id: s.session_id, last_seen: seen })).code).toBe(4001);
    expect((await fails(b.client, 'session.events.since', { session_id: s.session_id, session_key: `${s.session_key}x`, last_seen: seen })).code).toBe(4001);
    const r = await ok(b.client, 'session.events.since', { session_id: s.session_id, session_key: s.session_key, last_seen: seen });
    expect(resultSchemas['session.events.since'].parse(r)).toBeTruthy();
    const replayed = r.events.map((e) => JSON.stringify(e));
    // Exactly what A missed: everything after its watermark, which is what the watcher saw.
    expect(replayed).toEqual(sentToWatch);
    expect(r.events.map((e: WireEvent) => e.seq)).toEqual(Array.from({ length: r.count }, (_, i) => seen + 1 + i));
    expect(r).toMatchObject({ truncated: false, latest_seq: seen + r.count, open_requests: [] });
    // And everything up to the watermark is what A had.
    const all = await ok(b.client, 'session.events.since', { session_id: s.session_id, session_key: s.session_key });
    expect(all.events.map((e) => JSON.stringify(e))).toEqual([...sentToA, ...sentToWatch]);
    // The epoch is the one gateway.ready named.
    const ready = gatewayReadyPayloadSchema.parse(b.client.events[0]?.payload);
    expect(r.epoch).toBe(ready.replay_epoch);
  });

  it('is bounded per session and says truncated once the gap is older than the ring', async () => {
    const server = start({ replay_events: 5 });
    const a = connectMemory(server);
    const s = await ok(a.client, 'session.create', {});
    const spawn = await ok(a.client, 'delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'talks', agent: talker(8) }] });
    await a.client.waitForEvent((e) => e.type === 'subagent.start');
    for (let i = 0; i < 8; i++) {
      await ok(a.client, 'subagent.steer', { session_id: s.session_id, subagent_id: spawn.subagent_ids[0], text: `go ${i}` });
      await a.client.waitForEvent((e) => e.type === 'subagent.text' && e.payload.text === `round ${i}`);
    }
    const latest = a.client.events.at(-1)?.seq as number;
    const r = await ok(a.client, 'session.events.since', { session_id: s.session_id, last_seen: 0 });
    expect(r.count).toBe(5);
    expect(r.truncated).toBe(true);
    expect(r.events.map((e: WireEvent) => e.seq)).toEqual([latest - 4, latest - 3, latest - 2, latest - 1, latest]);
    const recent = await ok(a.client, 'session.events.since', { session_id: s.session_id, last_seen: latest - 2 });
    expect(recent).toMatchObject({ count: 2, truncated: false });
  });

  it('two servers have two epochs; a closed session has no ring left to read', async () => {
    const one = start();
    const two = start();
    const a = connectMemory(one);
    const b = connectMemory(two);
    const epochs = [a, b].map((c) => gatewayReadyPayloadSchema.parse(c.client.events[0]?.payload).replay_epoch);
    expect(epochs[0]).not.toBe(epochs[1]);
    const s = await ok(a.client, 'session.create', {});
    await ok(a.client, 'session.close', { session_id: s.session_id });
    expect((await fails(a.client, 'session.events.since', { session_id: s.session_id, session_key: s.session_key })).code).toBe(4001);
  });
});
