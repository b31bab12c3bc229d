// The HTTP API in --single-user mode (hermes' "the token owns every session"): session calls and
// the event stream need no session key, GET /v1/sessions lists every live or parked session, and
// the capabilities say so. A wrong key is still refused. Against real `subrun serve --ws`
// processes on 127.0.0.1, one in each mode.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { createSession, nextFrame, openSse, req, scripted, startHttp, type HttpServer } from './client.ts';

let single: HttpServer;
let strict: HttpServer;
beforeAll(async () => {
  [single, strict] = await Promise.all([startHttp(['--single-user']), startHttp()]);
});
afterAll(killAll);

describe('--single-user over HTTP', () => {
  it('session calls need no key; a wrong key is still 404', async () => {
    const s = await createSession(single);
    const view = await req(single, 'GET', `/v1/sessions/${s.session_id}`);
    expect(view.status).toBe(200);
    expect(view.json).toMatchObject({ session_id: s.session_id, generation: 1 });
    const d = await req(single, 'POST', `/v1/sessions/${s.session_id}/delegations`, {
      body: { tasks: [scripted('waits', [{ op: 'wait_steer' }, { op: 'finish', summary: 'ok' }])] },
    });
    expect(d.status).toBe(202);
    const id = d.json.subagent_ids[0] as string;
    const steer = await req(single, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/steer`, { body: { text: 'go' } });
    expect(steer.status).toBe(202);
    const done = await req(single, 'GET', `/v1/sessions/${s.session_id}/delegations/${d.json.delegation_id}?wait=30`);
    expect(done.json).toMatchObject({ done: true, results: [{ status: 'completed', summary: 'ok' }] });
    expect((await req(single, 'GET', `/v1/sessions/${s.session_id}`, { key: 'wrong' })).status).toBe(404);
    expect((await req(single, 'GET', '/v1/sessions/ses_nope')).status).toBe(404);
  });

  it('the event stream opens without a key', async () => {
    const s = await createSession(single);
    const stream = await openSse(single, `/v1/sessions/${s.session_id}/events`);
    expect(stream.status).toBe(200);
    expect(JSON.parse((await nextFrame(stream, (f) => f.event === 'snapshot')).data ?? '')).toMatchObject({ subagents: [] });
    stream.close();
  });

  it('GET /v1/sessions lists every live or parked session; capabilities say single_user', async () => {
    const a = await createSession(single, 'first');
    const b = await createSession(single, 'second');
    const list = await req(single, 'GET', '/v1/sessions');
    expect(list.status).toBe(200);
    const ids = (list.json.sessions as { session_id: string }[]).map((x) => x.session_id);
    expect(ids).toEqual(expect.arrayContaining([a.session_id, b.session_id]));
    expect(list.json.sessions.find((x: { session_id: string }) => x.session_id === a.session_id)).toEqual({
      session_id: a.session_id,
      generation: 1,
      title: 'first',
      created_at: expect.any(Number),
      live_subagents: 0,
      paused: false,
      latest_seq: expect.any(Number),
    });
    // Never a key: listing is not a way to learn one.
    expect(list.text).not.toContain(a.session_key);
    await req(single, 'DELETE', `/v1/sessions/${b.session_id}`);
    const after = await req(single, 'GET', '/v1/sessions');
    expect((after.json.sessions as { session_id: string }[]).map((x) => x.session_id)).not.toContain(b.session_id);
    expect((await req(single, 'GET', '/v1/capabilities')).json.features.single_user).toBe(true);
  });
});

describe('without --single-user', () => {
  it('session calls need the key, listing is 403, capabilities say single_user false', async () => {
    const s = await createSession(strict);
    expect((await req(strict, 'GET', `/v1/sessions/${s.session_id}`)).status).toBe(404);
    expect((await openSse(strict, `/v1/sessions/${s.session_id}/events`)).status).toBe(404);
    expect((await req(strict, 'GET', '/v1/sessions')).status).toBe(403);
    expect((await req(strict, 'GET', '/v1/capabilities')).json.features.single_user).toBe(false);
  });
});
