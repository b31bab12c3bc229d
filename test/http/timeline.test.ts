// The timeline on both surfaces of a real `subrun serve --ws` process (and of `serve --stdio`):
// GET /v1/sessions/{sid}/timeline and JSON-RPC session.timeline answer the same runtime data in
// the contract's shape, with the session's authority: the same 404 as every other session route
// over HTTP, 4001 over JSON-RPC for a session the transport is not attached to, and nothing of a
// retired generation after a reset.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resultSchemas } from '../../src/contract/methods.ts';
import { call, connectWs, killAll, request, startStdio, type WsPeer } from '../helpers/process.ts';
import { createSession, envelope, framesUntil, openSse, req, scripted, spawn, startHttp, type HttpServer, type Session } from './client.ts';

const NOT_FOUND = '{"error":{"code":4001,"message":"not found"}}';

let server: HttpServer;
let s: Session;
let ws: WsPeer;
let ids: { parent: string; helper: string; stuck: string; stuckChild: string };

const timeline = (sid = s.session_id, key = s.session_key) => req(server, 'GET', `/v1/sessions/${sid}/timeline`, { key });

type Timeline = ReturnType<(typeof resultSchemas)['session.timeline']['parse']>;
const parsed = async (): Promise<Timeline> => resultSchemas['session.timeline'].parse((await timeline()).json);

beforeAll(async () => {
  server = await startHttp(['--max-spawn-depth', '2']);
  s = await createSession(server);
  const events = await openSse(server, `/v1/sessions/${s.session_id}/events`, { 'X-Subrun-Session-Key': s.session_key });
  const d = await spawn(server, s, [
    scripted('parent', [
      { op: 'tool', name: 'plan', ms: 20 },
      { op: 'spawn', tasks: [scripted('helper', [{ op: 'say', text: 'ready' }, { op: 'wait_steer' }, { op: 'finish', summary: 'ok' }])] },
      { op: 'finish', summary: 'done' },
    ]),
    scripted('stuck', [{ op: 'spawn', tasks: [scripted('stuck child', [{ op: 'hang' }])] }]),
  ]);
  const [parent, stuck] = d.subagent_ids as [string, string];
  const seen = new Map<string, string>();
  // The helper waits for its steer, the stuck child runs: both told by the stream.
  await framesUntil(events, (f) => {
    const e = envelope(f);
    if ((e.type === 'subagent.text' && e.payload.goal === 'helper') || (e.type === 'subagent.start' && e.payload.goal === 'stuck child'))
      seen.set(e.payload.goal, e.payload.subagent_id);
    return seen.size === 2;
  });
  ids = { parent, helper: seen.get('helper')!, stuck, stuckChild: seen.get('stuck child')! };
  const steer = (cid: string, text: string) =>
    req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${cid}/steer`, { key: s.session_key, body: { text } });
  // The parent is inside its spawn step (no delivery point) until the helper finishes: this one misses.
  expect((await steer(parent, 'keep it short')).status).toBe(202);
  expect((await steer(ids.helper, 'focus on section 5')).status).toBe(202);
  await framesUntil(events, (f) => envelope(f).type === 'subagent.complete' && envelope(f).payload.subagent_id === parent);
  expect((await steer(ids.helper, 'too late')).status).toBe(409);
  expect((await req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${stuck}/interrupt`, { key: s.session_key, body: {} })).status).toBe(200);
  const done = await req(server, 'GET', `/v1/sessions/${s.session_id}/delegations/${d.delegation_id}?wait=15`, { key: s.session_key });
  expect(done.json.done).toBe(true);
  events.close();
  ({ peer: ws } = await connectWs(server));
}, 60_000);
afterAll(killAll);

describe('GET /v1/sessions/{sid}/timeline', () => {
  it('answers the tree in tree order with times, every steer once with its fate, and the interrupt marks', async () => {
    const r = await timeline();
    expect(r.status).toBe(200);
    const t = resultSchemas['session.timeline'].parse(r.json);
    expect(t.session_id).toBe(s.session_id);
    expect(t.children.map((c) => [c.subagent_id, c.depth, c.status])).toEqual([
      [ids.parent, 0, 'completed'],
      [ids.helper, 1, 'completed'],
      [ids.stuck, 0, 'interrupted'],
      [ids.stuckChild, 1, 'interrupted'],
    ]);
    for (const c of t.children) {
      expect(c.created_at).toBeLessThanOrEqual(c.started_at!);
      expect(c.started_at!).toBeLessThanOrEqual(c.finished_at!);
      expect(c.finished_at!).toBeLessThanOrEqual(t.now);
    }
    expect(t.steers.map((x) => [x.subagent_id, x.fate, x.steer_id === null, x.queued_at === null])).toEqual([
      [ids.parent, 'missed', false, false],
      [ids.helper, 'delivered', false, false],
      [ids.helper, 'rejected', true, true],
    ]);
    const parentEnd = t.children[0]!.finished_at!;
    expect(t.steers[0]!.at!).toBeGreaterThanOrEqual(parentEnd - 0.001);
    expect(t.interrupts.map((i) => [i.subagent_id, i.target_id])).toEqual([
      [ids.stuck, ids.stuck],
      [ids.stuckChild, ids.stuck],
    ]);
  });

  it('is the same 404 as every session route for a wrong key, an unknown session and a missing key; 401 without the token; GET only', async () => {
    for (const r of [
      await timeline(s.session_id, 'wrong-key-0123456789'),
      await timeline('ses_nope', s.session_key),
      await req(server, 'GET', `/v1/sessions/${s.session_id}/timeline`),
    ]) {
      expect(r.status).toBe(404);
      expect(r.text).toBe(NOT_FOUND);
    }
    expect((await req(server, 'GET', `/v1/sessions/${s.session_id}/timeline`, { key: s.session_key, token: 'wrong' })).status).toBe(401);
    const post = await req(server, 'POST', `/v1/sessions/${s.session_id}/timeline`, { key: s.session_key, body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
  });
});

describe('JSON-RPC session.timeline', () => {
  it('is 4001 for a session this transport is not attached to, and for a missing session_id', async () => {
    for (const params of [{ session_id: s.session_id }, {}, { session_id: 'ses_nope' }]) {
      const r = await request(ws, 'session.timeline', params);
      expect(r.error?.code).toBe(4001);
    }
  });

  it('answers what the HTTP route answers once attached with the key', async () => {
    await call(ws, 'session.attach', { session_id: s.session_id, session_key: s.session_key });
    const viaRpc = resultSchemas['session.timeline'].parse(await call(ws, 'session.timeline', { session_id: s.session_id }));
    const viaHttp = await parsed();
    expect({ ...viaRpc, now: 0 }).toEqual({ ...viaHttp, now: 0 });
  });

  it('shows nothing of a retired generation after session.reset', async () => {
    await call(ws, 'session.reset', { session_id: s.session_id });
    const t = resultSchemas['session.timeline'].parse(await call(ws, 'session.timeline', { session_id: s.session_id }));
    expect(t).toMatchObject({ children: [], steers: [], interrupts: [] });
    expect((await timeline()).json).toMatchObject({ children: [], steers: [], interrupts: [] });
  });

  it('works over stdio: a session of its own, and 4001 for another', async () => {
    const { peer } = await startStdio();
    const mine = await call<{ session_id: string }>(peer, 'session.create', {});
    const before = resultSchemas['session.timeline'].parse(await call(peer, 'session.timeline', { session_id: mine.session_id }));
    expect(before).toMatchObject({ session_id: mine.session_id, children: [], steers: [], interrupts: [] });
    const d = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id: mine.session_id, tasks: [scripted('hangs', [{ op: 'hang' }])] });
    const after = resultSchemas['session.timeline'].parse(await call(peer, 'session.timeline', { session_id: mine.session_id }));
    expect(after.children.map((c) => c.subagent_id)).toEqual(d.subagent_ids);
    expect((await request(peer, 'session.timeline', { session_id: s.session_id })).error?.code).toBe(4001);
    await peer.close();
  });
});
