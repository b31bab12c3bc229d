// What a keep-alive connection proved is never a credential for anything else. The server skips
// the session key's digest for a connection that already proved that very key for that very session
// (src/server/key-proofs.ts), and a plain request target skips the URL parser (src/http/api.ts):
// every request here goes over one socket, and every answer must be what a fresh connection gets.
import { request, Agent } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { createSession, scripted, spawn, startHttp, type HttpServer, type Session } from './client.ts';

let server: HttpServer;
let a: Session;
let b: Session;
let childA: string;
let childB: string;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const sockets = new Set<unknown>();

beforeAll(async () => {
  server = await startHttp();
  a = await createSession(server);
  b = await createSession(server);
  childA = (await spawn(server, a, [scripted('holds', [{ op: 'hang' }])])).subagent_ids[0] as string;
  childB = (await spawn(server, b, [scripted('holds', [{ op: 'hang' }])])).subagent_ids[0] as string;
});
afterAll(async () => {
  agent.destroy();
  await killAll();
});

/** One POST over the shared keep-alive socket; its status and body. */
function post(path: string, key: string | undefined, body: unknown = { text: 'hi' }): Promise<{ status: number; json: { error?: { code: number } } }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' };
    if (key !== undefined) headers['X-Subrun-Session-Key'] = key;
    const r = request(`${server.base}${path}`, { method: 'POST', agent, headers }, (res) => {
      sockets.add(res.socket);
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
    });
    r.on('error', reject);
    r.end(JSON.stringify(body));
  });
}

const steer = (s: Session, cid: string) => `/v1/sessions/${s.session_id}/subagents/${cid}/steer`;
/** The same key with its last character changed: as long, so only a comparison can tell. */
const wrong = (key: string) => key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');

describe('one keep-alive connection', () => {
  it('proves a key for its own session only: another session, a wrong key, no key are 404 after it', async () => {
    expect((await post(steer(a, childA), a.session_key)).status).toBe(202);
    const refused = [
      await post(steer(b, childB), a.session_key),
      await post(steer(a, childA), wrong(a.session_key)),
      await post(steer(a, childA), undefined),
      await post(steer(a, childA), `${a.session_key}x`),
    ];
    for (const r of refused) expect([r.status, r.json.error?.code]).toEqual([404, 4001]);
    // The proof still stands for its own key, and another session's key proves that session.
    expect((await post(steer(a, childA), a.session_key)).status).toBe(202);
    expect((await post(steer(b, childB), b.session_key)).status).toBe(202);
    expect((await post(steer(a, childB), b.session_key)).status).toBe(404);
    expect((await post(steer(a, childA), a.session_key)).status).toBe(202);
    expect(sockets.size).toBe(1);
  });

  it('a closed session is not reached through the proof its connection kept', async () => {
    const c = await createSession(server);
    const child = (await spawn(server, c, [scripted('holds', [{ op: 'hang' }])])).subagent_ids[0] as string;
    expect((await post(steer(c, child), c.session_key)).status).toBe(202);
    const closed = await new Promise<number>((resolve, reject) => {
      const r = request(`${server.base}/v1/sessions/${c.session_id}`, {
        method: 'DELETE',
        agent,
        headers: { Authorization: `Bearer ${server.token}`, 'X-Subrun-Session-Key': c.session_key },
      });
      r.on('response', (res) => res.resume().on('end', () => resolve(res.statusCode ?? 0)));
      r.on('error', reject);
      r.end();
    });
    expect(closed).toBe(200);
    const after = await post(steer(c, child), c.session_key);
    expect([after.status, after.json.error?.code]).toEqual([404, 4001]);
  });

  it('request targets the URL parser would rewrite reach what it rewrites them to; the rest are 404', async () => {
    const path = steer(a, childA);
    // Dot segments resolve, a query is no part of the path, an escape or a `//` is not a plain path.
    expect((await post(`/v1/sessions/x/..${path.slice('/v1/sessions'.length)}`, a.session_key)).status).toBe(202);
    expect((await post(`${path}?x=1`, a.session_key)).status).toBe(202);
    expect((await post(path.replace(/steer$/, '%73teer'), a.session_key)).status).toBe(404);
    expect((await post(`/${path}`, a.session_key)).status).toBe(404);
    expect((await post(`${path}/`, a.session_key)).status).toBe(404);
  });
});
