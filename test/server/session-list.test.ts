// session.list is newest first (hermes lists what it may resume that way). Sessions made in the same
// clock tick share their `created_at`; the one made last is still the newest, so a tie is broken
// by the order they were made in, never by which the sort happened to see first.
import { afterEach, describe, expect, it } from 'vitest';
import { RpcServer } from '../../src/rpc/server.ts';
import { ManualClock } from '../helpers/manual-clock.ts';
import { connectMemory, ok } from '../helpers/rpc-client.ts';

const servers: RpcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
});

describe('session.list', () => {
  it('lists sessions made in one clock tick newest first, and by time across ticks', async () => {
    const clock = new ManualClock();
    const server = new RpcServer({ clock });
    servers.push(server);
    const { client } = connectMemory(server);
    const made: string[] = [];
    for (const title of ['a', 'b', 'c']) made.push((await ok(client, 'session.create', { title })).session_id);
    await clock.advance(1_000);
    for (const title of ['d', 'e']) made.push((await ok(client, 'session.create', { title })).session_id);
    const listed = await ok(client, 'session.list', {});
    expect(listed.sessions.map((s: { title: string }) => s.title)).toEqual(['e', 'd', 'c', 'b', 'a']);
    expect(listed.sessions.map((s: { id: string }) => s.id)).toEqual([...made].reverse());
    const first = await ok(client, 'session.list', { limit: 2 });
    expect(first.sessions.map((s: { title: string }) => s.title)).toEqual(['e', 'd']);
  });
});
