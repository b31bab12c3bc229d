// session.idle on every transport: once each time a session that had live children has none left
// and every completion was sent, never before the last completion, with the current generation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectWs, killAll, nextEvent, request, type WireEvent } from '../helpers/process.ts';
import { createSession, envelope, framesUntil, nextFrame, openSse, req, scripted, spawn, startHttp, type HttpServer } from './client.ts';

let server: HttpServer;
beforeAll(async () => {
  server = await startHttp(['--max-spawn-depth', '2']);
});
afterAll(killAll);

describe('session.idle', () => {
  it('follows the last completion of a tree (grandchildren included), on the WebSocket and the stream alike', async () => {
    const s = await createSession(server);
    const { peer } = await connectWs(server);
    await request(peer, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    const stream = await openSse(server, `/v1/sessions/${s.session_id}/events?session_key=${encodeURIComponent(s.session_key)}`);
    await nextFrame(stream, (f) => f.event === 'snapshot');
    const nested = scripted('parent', [
      { op: 'spawn', tasks: [{ goal: 'grandchild', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'deep' }] } }] },
      { op: 'finish', summary: 'ok' },
    ]);
    await spawn(server, s, [nested, scripted('sibling', [{ op: 'say', text: 'hi' }])]);
    const ws: WireEvent[] = [];
    for (;;) {
      const e = await nextEvent(peer, (x) => x.session_id === s.session_id);
      ws.push(e);
      if (e.type === 'session.idle') break;
    }
    const idle = ws.at(-1) as WireEvent;
    expect(idle.payload).toEqual({ session_id: s.session_id, generation: 1 });
    // Every child's completion and every delegation's came before it.
    expect(ws.filter((e) => e.type === 'subagent.complete')).toHaveLength(3);
    expect(ws.filter((e) => e.type === 'delegation.complete')).toHaveLength(2);
    const frames = await framesUntil(stream, (f) => f.event === 'session.idle');
    expect(envelope(frames.at(-1) as never)).toEqual(idle);

    // Again for the next batch, and with the new generation after a reset.
    await req(server, 'POST', `/v1/sessions/${s.session_id}/reset`, { key: s.session_key });
    await request(peer, 'delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'again', agent: { kind: 'scripted', steps: [] } }] });
    const second = await nextEvent(peer, (x) => x.type === 'session.idle');
    expect(second.payload).toEqual({ session_id: s.session_id, generation: 2 });
    expect(second.seq).toBeGreaterThan(idle.seq);
    stream.close();
    await peer.close();
  });

  it('is not sent while a child is still live, nor for a session that never had children', async () => {
    const s = await createSession(server);
    const { peer } = await connectWs(server);
    await request(peer, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    const d = await spawn(server, s, [scripted('quick', []), scripted('waits', [{ op: 'wait_steer' }])]);
    await nextEvent(peer, (e) => e.type === 'subagent.complete');
    await req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${d.subagent_ids[1]}/interrupt`, { key: s.session_key });
    const rest: WireEvent[] = [];
    for (;;) {
      const e = await nextEvent(peer, (x) => x.session_id === s.session_id);
      rest.push(e);
      if (e.type === 'session.idle') break;
    }
    expect(rest.map((e) => e.type).slice(-3)).toEqual(['subagent.complete', 'delegation.complete', 'session.idle']);
    const empty = await createSession(server);
    const info = await req(server, 'GET', `/v1/sessions/${empty.session_id}`, { key: empty.session_key });
    expect(info.json.latest_seq).toBe(0);
    await peer.close();
  });
});
