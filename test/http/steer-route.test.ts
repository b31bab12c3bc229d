// The steer route's edges, each answer pinned as the generic dispatch gives it today: the route a
// host calls most is the one a faster path would replace (docs/benchmarks.md §16), and every
// one of these answers (token, session, child, body, idempotency, size) must stay as it is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { createSession, req, scripted, spawn, startHttp, type HttpServer, type Session } from './client.ts';

let server: HttpServer;
let s: Session;
let other: Session;
let child: string;
beforeAll(async () => {
  server = await startHttp(['--max-queued-steers', '100', '--max-message-bytes', '2048']);
  s = await createSession(server);
  other = await createSession(server);
  child = (await spawn(server, s, [scripted('holds', [{ op: 'hang' }])])).subagent_ids[0] as string;
});
afterAll(killAll);

const NOT_FOUND = { error: { code: 4001, message: 'not found' } };
const path = (sid: string, cid: string) => `/v1/sessions/${sid}/subagents/${cid}/steer`;

describe('POST /v1/sessions/{sid}/subagents/{cid}/steer', () => {
  it('a bad or missing token is 401 with WWW-Authenticate, before anything about the session is said', async () => {
    for (const token of ['wrong-token-0123456789', null]) {
      const r = await req(server, 'POST', path(s.session_id, child), { token, key: s.session_key, body: { text: 'hi' } });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
    }
  });

  it('a wrong key, an unknown session, another session and an unknown child are the same 404, byte for byte', async () => {
    const answers = await Promise.all([
      req(server, 'POST', path(s.session_id, child), { key: other.session_key, body: { text: 'hi' } }),
      req(server, 'POST', path(s.session_id, child), { body: { text: 'hi' } }),
      req(server, 'POST', path('ses_nope', child), { key: s.session_key, body: { text: 'hi' } }),
      req(server, 'POST', path(other.session_id, child), { key: other.session_key, body: { text: 'hi' } }),
      req(server, 'POST', path(s.session_id, 'sa_nope'), { key: s.session_key, body: { text: 'hi' } }),
    ]);
    for (const r of answers) {
      expect(r.status).toBe(404);
      expect(r.json).toEqual(NOT_FOUND);
    }
    expect(new Set(answers.map((r) => r.text)).size).toBe(1);
  });

  it('a body that is not JSON is 400 (-32700), not an object 400 (-32602), no text 400 (4002), past the limit 413', async () => {
    const p = path(s.session_id, child);
    const notJson = await req(server, 'POST', p, { key: s.session_key, raw: '{"text":', headers: { 'Content-Type': 'application/json' } });
    expect([notJson.status, notJson.json.error.code]).toEqual([400, -32700]);
    const arr = await req(server, 'POST', p, { key: s.session_key, body: ['hi'] });
    expect([arr.status, arr.json.error.code]).toEqual([400, -32602]);
    const none = await req(server, 'POST', p, { key: s.session_key, body: {} });
    expect([none.status, none.json.error.code]).toEqual([400, 4002]);
    const big = await req(server, 'POST', p, { key: s.session_key, body: { text: 'x'.repeat(4096) } });
    expect(big.status).toBe(413);
  });

  it('is 202 with the queued steer; the same idempotency key replays it (one steer_id, marked), another text is 409 (4015)', async () => {
    const p = path(s.session_id, child);
    const plain = await req(server, 'POST', p, { key: s.session_key, body: { text: '  trimmed  ' } });
    expect(plain.status).toBe(202);
    expect(plain.json).toEqual({ status: 'queued', subagent_id: child, text: 'trimmed', steer_id: expect.stringMatching(/^st_/) });
    expect(plain.headers.get('idempotency-replayed')).toBeNull();
    const keyed = { key: s.session_key, body: { text: 'once' }, headers: { 'Idempotency-Key': 'steer-route-1' } };
    const first = await req(server, 'POST', p, keyed);
    const again = await req(server, 'POST', p, keyed);
    expect(first.status).toBe(202);
    expect(again.status).toBe(202);
    expect(again.json).toEqual(first.json);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    const conflict = await req(server, 'POST', p, { ...keyed, body: { text: 'twice' } });
    expect([conflict.status, conflict.json.error.code]).toEqual([409, 4015]);
  });
});
