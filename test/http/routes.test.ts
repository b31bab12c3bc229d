// Every resource of the HTTP API against a real server process: its answer and status, the body
// rules (415, 413, 400), 405 with Allow, the error shape, and the JSON-RPC codes mapped to statuses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { createSession, req, scripted, spawn, startHttp, type HttpServer, type Session } from './client.ts';

let server: HttpServer;
beforeAll(async () => {
  server = await startHttp(['--max-concurrent-children', '3', '--max-queued-steers', '1', '--max-message-bytes', '2048']);
});
afterAll(killAll);

const waiting = (goal = 'waits') => scripted(goal, [{ op: 'wait_steer' }, { op: 'wait_steer' }, { op: 'finish', summary: 'done' }]);
const base = (s: Session) => `/v1/sessions/${s.session_id}`;

describe('the listener', () => {
  it('GET /health needs no token and says ok with the version', async () => {
    const r = await req(server, 'GET', '/health', { token: null });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'ok', version: expect.any(String) });
  });

  it('GET / redirects to the dashboard', async () => {
    const r = await req(server, 'GET', '/', { token: null });
    expect(r.status).toBe(302);
    expect(r.headers.get('location')).toBe('/ui/');
  });

  it('GET /v1/capabilities lists the protocol, features and limits', async () => {
    const r = await req(server, 'GET', '/v1/capabilities');
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      protocol_version: 1,
      server: { name: 'subrun' },
      features: { sse: true, resume: true, idempotency: true, session_idle: true },
      limits: { max_message_bytes: 2048, idempotency_ttl_ms: 600_000, idempotency_keys_per_session: 1000, max_wait_seconds: 60 },
    });
  });
});

describe('sessions', () => {
  it('POST /v1/sessions is 201 with id, key and generation; GET shows it; DELETE closes it', async () => {
    const created = await req(server, 'POST', '/v1/sessions', { body: { title: 'mine' } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ session_id: expect.stringMatching(/^ses_/), session_key: expect.any(String), generation: 1 });
    const s = created.json as Session;
    const got = await req(server, 'GET', base(s), { key: s.session_key });
    expect(got.status).toBe(200);
    expect(got.json).toEqual({
      session_id: s.session_id,
      generation: 1,
      title: 'mine',
      created_at: expect.any(Number),
      live_subagents: 0,
      paused: false,
      latest_seq: 0,
    });
    const closed = await req(server, 'DELETE', base(s), { key: s.session_key });
    expect(closed.status).toBe(200);
    expect(closed.json).toEqual({ closed: true, interrupted: 0 });
    expect((await req(server, 'GET', base(s), { key: s.session_key })).status).toBe(404);
  });

  it('POST /v1/sessions without a body makes an untitled session', async () => {
    const r = await req(server, 'POST', '/v1/sessions');
    expect(r.status).toBe(201);
  });

  it('GET /v1/sessions is 403 outside single-user mode', async () => {
    const r = await req(server, 'GET', '/v1/sessions');
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe(4008);
  });

  it('reset starts a new generation; the old generation’s children are gone', async () => {
    const s = await createSession(server);
    const { subagent_ids } = await spawn(server, s, [waiting()]);
    const r = await req(server, 'POST', `${base(s)}/reset`, { key: s.session_key });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ session_id: s.session_id, generation: 2 });
    expect((await req(server, 'GET', `${base(s)}/subagents/${subagent_ids[0]}`, { key: s.session_key })).status).toBe(404);
  });

  it('pause refuses spawns with 409 (4011) until resumed', async () => {
    const s = await createSession(server);
    const p = await req(server, 'POST', `${base(s)}/pause`, { key: s.session_key, body: { paused: true } });
    expect(p.status).toBe(200);
    expect(p.json).toEqual({ paused: true });
    const refused = await req(server, 'POST', `${base(s)}/delegations`, { key: s.session_key, body: { tasks: [waiting()] } });
    expect(refused.status).toBe(409);
    expect(refused.json).toEqual({ error: { code: 4011, message: 'spawning is paused' } });
    expect((await req(server, 'POST', `${base(s)}/pause`, { key: s.session_key, body: { paused: false } })).json).toEqual({ paused: false });
    expect((await req(server, 'GET', base(s), { key: s.session_key })).json.paused).toBe(false);
  });
});

describe('delegations', () => {
  it('spawn is 202 dispatched; result, and result with wait, which answers when done', async () => {
    const s = await createSession(server);
    const d = await req(server, 'POST', `${base(s)}/delegations`, { key: s.session_key, body: { tasks: [waiting()], timeout_ms: 60_000 } });
    expect(d.status).toBe(202);
    expect(d.json).toMatchObject({ status: 'dispatched', delegation_id: expect.stringMatching(/^dg_/), count: 1 });
    const path = `${base(s)}/delegations/${d.json.delegation_id}`;
    expect((await req(server, 'GET', path, { key: s.session_key })).json).toEqual({ delegation_id: d.json.delegation_id, done: false, results: [] });
    const waited = req(server, 'GET', `${path}?wait=30`, { key: s.session_key });
    const child = d.json.subagent_ids[0];
    expect((await req(server, 'POST', `${base(s)}/subagents/${child}/interrupt`, { key: s.session_key })).status).toBe(200);
    const r = await waited;
    expect(r.status).toBe(200);
    expect(r.json.done).toBe(true);
    expect(r.json.results[0]).toMatchObject({ subagent_id: child, status: 'interrupted' });
  });

  it('wait=0 answers at once; a bad wait is 400; an unknown delegation is 404 (4004)', async () => {
    const s = await createSession(server);
    const d = await spawn(server, s, [waiting()]);
    const now = await req(server, 'GET', `${base(s)}/delegations/${d.delegation_id}?wait=0`, { key: s.session_key });
    expect(now.json.done).toBe(false);
    const bad = await req(server, 'GET', `${base(s)}/delegations/${d.delegation_id}?wait=soon`, { key: s.session_key });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: -32602, data: { issues: [{ path: 'wait' }] } });
    const unknown = await req(server, 'GET', `${base(s)}/delegations/dg_nope`, { key: s.session_key });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual({ error: { code: 4004, message: 'delegation not found' } });
  });

  it('maps the spawn errors: 400 (4000, -32602 with issues), 422 (4012)', async () => {
    const s = await createSession(server);
    const none = await req(server, 'POST', `${base(s)}/delegations`, { key: s.session_key, body: { tasks: [] } });
    expect(none.status).toBe(400);
    expect(none.json.error.code).toBe(4000);
    const bad = await req(server, 'POST', `${base(s)}/delegations`, { key: s.session_key, body: { tasks: [{ goal: '' }] } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe(-32602);
    expect(bad.json.error.data.issues.length).toBeGreaterThan(0);
    const many = await req(server, 'POST', `${base(s)}/delegations`, { key: s.session_key, body: { tasks: [waiting(), waiting(), waiting(), waiting()] } });
    expect(many.status).toBe(422);
    expect(many.json.error.code).toBe(4012);
  });
});

describe('subagents', () => {
  it('list, one snapshot, and the tail with the session’s seq', async () => {
    const s = await createSession(server);
    const { subagent_ids } = await spawn(server, s, [scripted('talks', [{ op: 'say', text: 'hello' }, { op: 'wait_steer' }])]);
    const id = subagent_ids[0] as string;
    const list = await req(server, 'GET', `${base(s)}/subagents`, { key: s.session_key });
    expect(list.status).toBe(200);
    expect(list.json).toMatchObject({ subagents: [{ subagent_id: id }], delegations: [] });
    const one = await req(server, 'GET', `${base(s)}/subagents/${id}`, { key: s.session_key });
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ subagent_id: id, goal: 'talks', depth: 0 });
    const tail = await req(server, 'GET', `${base(s)}/subagents/${id}/tail?since=0`, { key: s.session_key });
    expect(tail.status).toBe(200);
    expect(tail.json).toMatchObject({ subagent_id: id, available: true, truncated: false, offset: expect.any(Number), seq: expect.any(Number) });
    const latest = (await req(server, 'GET', base(s), { key: s.session_key })).json.latest_seq;
    expect(tail.json.seq).toBeLessThanOrEqual(latest);
    expect((await req(server, 'GET', `${base(s)}/subagents/${id}/tail?since=-1`, { key: s.session_key })).status).toBe(400);
    expect((await req(server, 'GET', `${base(s)}/subagents?include_finished=maybe`, { key: s.session_key })).status).toBe(400);
  });

  it('finished children are listed with include_finished=true only', async () => {
    const s = await createSession(server);
    const d = await spawn(server, s, [scripted('quick', [{ op: 'finish', summary: 'ok' }])]);
    await req(server, 'GET', `${base(s)}/delegations/${d.delegation_id}?wait=30`, { key: s.session_key });
    expect((await req(server, 'GET', `${base(s)}/subagents`, { key: s.session_key })).json.subagents).toEqual([]);
    const all = await req(server, 'GET', `${base(s)}/subagents?include_finished=true`, { key: s.session_key });
    expect(all.json.subagents).toMatchObject([{ subagent_id: d.subagent_ids[0], status: 'completed' }]);
  });

  it('steer is 202 queued; a full queue 429 (4005); a finished own child 409 (4006); text errors 400', async () => {
    const s = await createSession(server);
    const d = await spawn(server, s, [scripted('busy', [{ op: 'sleep', ms: 60_000 }])]);
    const id = d.subagent_ids[0] as string;
    const steer = (text: unknown) => req(server, 'POST', `${base(s)}/subagents/${id}/steer`, { key: s.session_key, body: { text } });
    const q = await steer('first');
    expect(q.status).toBe(202);
    expect(q.json).toEqual({ status: 'queued', subagent_id: id, text: 'first', steer_id: expect.stringMatching(/^st_/) });
    const full = await steer('second');
    expect(full.status).toBe(429);
    expect(full.json).toEqual({ error: { code: 4005, message: 'steer queue full' } });
    expect((await steer('   ')).json.error.code).toBe(4002);
    expect((await steer('x'.repeat(40_000))).status).toBe(413);
    const i = await req(server, 'POST', `${base(s)}/subagents/${id}/interrupt`, { key: s.session_key });
    expect(i.status).toBe(200);
    expect(i.json).toEqual({ found: true, subagent_id: id, interrupted: [id] });
    await req(server, 'GET', `${base(s)}/delegations/${d.delegation_id}?wait=30`, { key: s.session_key });
    const late = await steer('too late');
    expect(late.status).toBe(409);
    expect(late.json).toEqual({ error: { code: 4006, message: 'not accepting steer', data: { reason: 'finished' } } });
    // Interrupting a finished own child: found false, still 200 (it is the caller's).
    const again = await req(server, 'POST', `${base(s)}/subagents/${id}/interrupt`, { key: s.session_key });
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ found: false, subagent_id: id, interrupted: [] });
  });

  it('an over-long steer text within the body limit is 400 (4003)', async () => {
    const small = await startHttp();
    const s = await createSession(small);
    const d = await spawn(small, s, [waiting()]);
    const r = await req(small, 'POST', `/v1/sessions/${s.session_id}/subagents/${d.subagent_ids[0]}/steer`, {
      key: s.session_key,
      body: { text: 'x'.repeat(32_769) },
    });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe(4003);
  });
});

describe('bodies, methods and paths', () => {
  it('a body of another type is 415, over the message limit 413, not JSON 400, not an object 400', async () => {
    const s = await createSession(server);
    const path = `${base(s)}/pause`;
    const type = await req(server, 'POST', path, { key: s.session_key, raw: 'paused=true', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    expect(type.status).toBe(415);
    expect(type.json.error).toMatchObject({ code: -32600 });
    const big = await req(server, 'POST', path, { key: s.session_key, body: { paused: true, pad: 'x'.repeat(4096) } });
    expect(big.status).toBe(413);
    const notJson = await req(server, 'POST', path, { key: s.session_key, raw: '{"paused":', headers: { 'Content-Type': 'application/json' } });
    expect(notJson.status).toBe(400);
    expect(notJson.json.error.code).toBe(-32700);
    const arr = await req(server, 'POST', path, { key: s.session_key, body: [true] });
    expect(arr.status).toBe(400);
    expect(arr.json.error.code).toBe(-32602);
    const typed = await req(server, 'POST', path, { key: s.session_key, body: { paused: 'yes' } });
    expect(typed.status).toBe(400);
    expect(typed.json.error.data.issues[0].path).toBe('paused');
  });

  it('a wrong method is 405 with Allow', async () => {
    const s = await createSession(server);
    for (const [method, path, allow] of [
      ['PUT', '/v1/sessions', 'POST, GET'],
      ['POST', base(s), 'GET, DELETE'],
      ['GET', `${base(s)}/reset`, 'POST'],
      ['DELETE', `${base(s)}/events`, 'GET'],
      ['POST', '/v1/capabilities', 'GET'],
    ] as const) {
      const r = await req(server, method, path, { key: s.session_key });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get('allow')).toBe(allow);
      expect(r.json.error.code).toBe(-32601);
    }
  });

  it('every answer is JSON with the error shape', async () => {
    const r = await req(server, 'GET', '/v1/nowhere');
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(r.json)).toEqual(['error']);
  });
});
