// The two authority modes side by side, and hermes' session-less calls: single-user mode lets the
// token own every session (resume, activate and replay without the key) and nothing more;
// delegation.status / pause without a session reach the caller's sessions (every session in
// single-user mode); close_on_disconnect closes instead of parking.
import { afterEach, describe, expect, it } from 'vitest';
import { RpcServer, type ServerOptions } from '../../src/rpc/server.ts';
import { connectMemory, fails, ok } from '../helpers/rpc-client.ts';

const servers: RpcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
});

function start(options: ServerOptions = {}) {
  const server = new RpcServer(options);
  servers.push(server);
  return server;
}

const hang = (goal: string) => ({ goal, agent: { kind: 'scripted', steps: [{ op: 'hang' }] } });

describe.each([false, true])('single_user: %s', (single_user) => {
  it('re-binding and replay need the key unless single-user; control still needs attachment', async () => {
    const server = start({ single_user });
    const a = connectMemory(server);
    const s = await ok(a.client, 'session.create', {});
    await ok(a.client, 'delegation.spawn', { session_id: s.session_id, tasks: [hang('mine')] });
    const b = connectMemory(server);
    // Not attached: control is 4001 in both modes.
    expect((await fails(b.client, 'subagent.list', { session_id: s.session_id })).code).toBe(4001);
    const since = b.client.result('session.events.since', { session_id: s.session_id });
    if (single_user) expect(((await since) as { count: number }).count).toBeGreaterThan(0);
    else await expect(since).rejects.toMatchObject({ error: { code: 4001 } });
    for (const method of ['session.resume', 'session.activate'] as const) {
      const keyless = b.client.result(method, { session_id: s.session_id });
      if (single_user) expect(await keyless).toMatchObject({ session_id: s.session_id, stored_session_id: s.session_id });
      else await expect(keyless).rejects.toMatchObject({ error: { code: 4001 } });
    }
    // A wrong key is refused in both modes; the right one re-binds in both.
    expect((await fails(b.client, 'session.resume', { session_id: s.session_id, session_key: 'wrong' })).code).toBe(4001);
    const r = await ok(b.client, 'session.resume', { session_id: s.session_id, session_key: s.session_key });
    expect(r).not.toHaveProperty('session_key');
    expect(r.live_subagents).toBe(1);
    expect((await ok(b.client, 'subagent.list', { session_id: s.session_id })).subagents).toHaveLength(1);
    // Unknown sessions are 4001 in both modes.
    expect((await fails(b.client, 'session.resume', { session_id: 'ses_nope' })).code).toBe(4001);
  });

  it('delegation.status / pause without a session: the sessions in reach, and nothing for a transport with none', async () => {
    const server = start({ single_user });
    const a = connectMemory(server);
    const b = connectMemory(server);
    const sa = await ok(a.client, 'session.create', {});
    const sb = await ok(b.client, 'session.create', {});
    const [ca] = (await ok(a.client, 'delegation.spawn', { session_id: sa.session_id, tasks: [hang('a')] })).subagent_ids;
    const [cb] = (await ok(b.client, 'delegation.spawn', { session_id: sb.session_id, tasks: [hang('b')] })).subagent_ids;
    const ids = async (c: typeof a) => (await ok(c.client, 'delegation.status', {})).active.map((x) => x.subagent_id).sort();
    expect(await ids(a)).toEqual(single_user ? [ca, cb].sort() : [ca]);
    expect(await ok(a.client, 'delegation.pause', {})).toEqual({ paused: true });
    expect((await ok(a.client, 'delegation.status', {})).paused).toBe(true);
    // b's session is paused only in single-user mode.
    const spawnB = b.client.result('delegation.spawn', { session_id: sb.session_id, tasks: [hang('b2')] });
    if (single_user) await expect(spawnB).rejects.toMatchObject({ error: { code: 4011 } });
    else await spawnB;
    expect(await ok(a.client, 'delegation.pause', { paused: false })).toEqual({ paused: false });
    await ok(a.client, 'delegation.spawn', { session_id: sa.session_id, tasks: [hang('a2')] });
    // A transport attached to nothing (in the default mode) reaches nothing.
    const c = connectMemory(server);
    const none = await ok(c.client, 'delegation.status', {});
    if (single_user)
      expect(none.active.length).toBe(3); // a, b and a2 (b2 was refused while paused)
    else expect(none).toMatchObject({ active: [], paused: false });
  });
});

describe('close_on_disconnect', () => {
  it('closes the session (children stopped) when its last transport leaves, instead of parking it', async () => {
    const server = start();
    const a = connectMemory(server);
    const kept = await ok(a.client, 'session.create', {});
    const gone = await ok(a.client, 'session.create', { close_on_disconnect: true, title: null });
    await ok(a.client, 'delegation.spawn', { session_id: gone.session_id, tasks: [hang('stops')] });
    a.close();
    await a.conn.whenClosed;
    expect(server.sessions.get(gone.session_id)).toBeUndefined();
    expect(server.sessions.get(kept.session_id)).toBeDefined();
    const b = connectMemory(server);
    expect((await fails(b.client, 'session.resume', { session_id: gone.session_id, session_key: gone.session_key })).code).toBe(4001);
    expect((await ok(b.client, 'session.resume', { session_id: kept.session_id, session_key: kept.session_key })).session_id).toBe(kept.session_id);
  });
});
