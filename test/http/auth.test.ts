// Who may call what over HTTP: the token (Bearer or the dashboard's cookie), the Origin rules for
// cookie writes and upgrades, the /ui/ login and its CSP, and the one 404 for everything that is not
// the caller's, identical whatever the reason.
import { mkdtempSync, writeFileSync, mkdirSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll, openWs } from '../helpers/process.ts';
import { createSession, req, scripted, spawn, startHttp, type HttpServer, type Reply } from './client.ts';

let server: HttpServer;
let uiDir: string;
beforeAll(async () => {
  uiDir = mkdtempSync(join(tmpdir(), 'subrun-ui-'));
  writeFileSync(join(uiDir, 'index.html'), '<!doctype html><title>dash</title>');
  mkdirSync(join(uiDir, 'js'));
  writeFileSync(join(uiDir, 'js', 'app.js'), 'export {};');
  server = await startHttp(['--ui-dir', uiDir, '--allow-origin', 'https://allowed.example']);
});
afterAll(killAll);

function rawGet(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const r = request({ host: '127.0.0.1', port: server.port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    r.on('error', reject);
    r.end();
  });
}

const own = () => `http://127.0.0.1:${server.port}`;

async function login(): Promise<string> {
  const r = await req(server, 'GET', `/ui/?token=${server.token}`, { token: null });
  expect(r.status).toBe(303);
  const cookie = r.headers.get('set-cookie') ?? '';
  return cookie.split(';')[0] as string;
}

describe('the token', () => {
  it('a /v1/ request without it, or with a wrong one, is 401 with WWW-Authenticate: Bearer', async () => {
    for (const token of [null, 'wrong']) {
      for (const path of ['/v1/capabilities', '/v1/sessions', '/v1/no/such/path']) {
        const r = await req(server, 'GET', path, { token });
        expect(r.status, `${path} ${token}`).toBe(401);
        expect(r.headers.get('www-authenticate')).toBe('Bearer');
        expect(r.json).toEqual({ error: { code: 4007, message: 'unauthorized' } });
      }
    }
  });

  it('a query token is not accepted on the API (it would end up in logs and history)', async () => {
    const r = await req(server, 'GET', `/v1/capabilities?token=${server.token}`, { token: null });
    expect(r.status).toBe(401);
  });
});

describe('the dashboard login', () => {
  it('GET /ui/?token=T sets an HttpOnly SameSite=Strict cookie on / and redirects to /ui/, with the CSP', async () => {
    const r = await req(server, 'GET', `/ui/?token=${server.token}`, { token: null });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe('/ui/');
    const cookie = r.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^subrun_auth=[\w-]+; HttpOnly; SameSite=Strict; Path=\/$/);
    expect(cookie).not.toContain(server.token);
    expect(r.headers.get('content-security-policy')).toContain("default-src 'self'");
  });

  it('a wrong token gets no cookie', async () => {
    const r = await req(server, 'GET', '/ui/?token=wrong', { token: null });
    expect(r.status).toBe(401);
    expect(r.headers.get('set-cookie')).toBeNull();
  });

  it('a browser with a wrong token gets the page (which asks again), 401 and no cookie; a script the JSON', async () => {
    const page = await req(server, 'GET', '/ui/?token=wrong', { token: null, headers: { Accept: 'text/html,application/xhtml+xml' } });
    expect(page.status).toBe(401);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('set-cookie')).toBeNull();
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(page.text).toContain('<title>dash</title>');
    const script = await req(server, 'GET', '/ui/?token=wrong', { token: null, headers: { Accept: 'application/json' } });
    expect(script.status).toBe(401);
    expect(script.json.error.code).toBe(4007);
  });

  it('serves the dashboard’s files with the CSP, and nothing outside its directory', async () => {
    const page = await req(server, 'GET', '/ui/', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(
      "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'",
    );
    expect(page.text).toContain('dash');
    const js = await req(server, 'GET', '/ui/js/app.js', { token: null });
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    // Sent as written (fetch would resolve the dots itself).
    for (const path of [
      '/ui/../package.json',
      '/ui/%2e%2e/package.json',
      '/ui/js/%2e%2e%2f%2e%2e%2fpackage.json',
      '/ui/..%5cpackage.json',
      '/ui/missing.js',
      '/ui/%00',
    ]) {
      const r = await rawGet(path);
      expect(r.status, path).toBe(404);
      expect(r.body, path).not.toContain('"name"');
    }
    expect((await req(server, 'GET', '/ui/missing.js', { token: null })).headers.get('content-security-policy')).toContain("'self'");
    expect((await req(server, 'GET', '/ui', { token: null })).headers.get('location')).toBe('/ui/');
  });

  it('the cookie authenticates reads; a cookie write needs an allowed Origin', async () => {
    const cookie = await login();
    const read = await req(server, 'GET', '/v1/capabilities', { token: null, headers: { Cookie: cookie } });
    expect(read.status).toBe(200);
    const noOrigin = await req(server, 'POST', '/v1/sessions', { token: null, headers: { Cookie: cookie } });
    expect(noOrigin.status).toBe(403);
    expect(noOrigin.json.error.code).toBe(4008);
    const foreign = await req(server, 'POST', '/v1/sessions', { token: null, headers: { Cookie: cookie, Origin: 'https://evil.example' } });
    expect(foreign.status).toBe(403);
    const ownOrigin = await req(server, 'POST', '/v1/sessions', { token: null, headers: { Cookie: cookie, Origin: own() } });
    expect(ownOrigin.status).toBe(201);
    const allowed = await req(server, 'POST', '/v1/sessions', { token: null, headers: { Cookie: cookie, Origin: 'https://allowed.example' } });
    expect(allowed.status).toBe(201);
    const s = ownOrigin.json;
    const del = await req(server, 'DELETE', `/v1/sessions/${s.session_id}`, { token: null, key: s.session_key, headers: { Cookie: cookie } });
    expect(del.status).toBe(403);
  });

  it('a forged cookie is 401', async () => {
    const r = await req(server, 'GET', '/v1/capabilities', { token: null, headers: { Cookie: 'subrun_auth=forged' } });
    expect(r.status).toBe(401);
  });

  it('a bearer request from a foreign Origin is 403; without Origin it is fine', async () => {
    expect((await req(server, 'POST', '/v1/sessions', { headers: { Origin: 'https://evil.example' } })).status).toBe(403);
    expect((await req(server, 'POST', '/v1/sessions')).status).toBe(201);
  });

  it('a WebSocket upgrade with the cookie needs an allowed Origin', async () => {
    const cookie = await login();
    await expect(openWs(`ws://127.0.0.1:${server.port}/`, { headers: { Cookie: cookie } })).rejects.toThrow('HTTP 403');
    await expect(openWs(`ws://127.0.0.1:${server.port}/`, { headers: { Cookie: cookie, Origin: 'https://evil.example' } })).rejects.toThrow('HTTP 403');
    const peer = await openWs(`ws://127.0.0.1:${server.port}/`, { headers: { Cookie: cookie, Origin: own() } });
    await peer.close();
    await expect(openWs(`ws://127.0.0.1:${server.port}/`, { headers: { Cookie: 'subrun_auth=forged', Origin: own() } })).rejects.toThrow('HTTP 401');
  });
});

describe('one 404 for everything not the caller’s', () => {
  const shape = (r: Reply) => ({ status: r.status, text: r.text, type: r.headers.get('content-type'), length: r.headers.get('content-length') });

  it('unknown, closed and foreign sessions, wrong and missing keys, foreign, unknown and retired children, unknown paths: the same answer', async () => {
    const mine = await createSession(server);
    const other = await createSession(server);
    const closed = await createSession(server);
    await req(server, 'DELETE', `/v1/sessions/${closed.session_id}`, { key: closed.session_key });
    const steps = [{ op: 'wait_steer' }];
    const foreignChild = (await spawn(server, other, [scripted('theirs', steps)])).subagent_ids[0] as string;
    const retiredChild = (await spawn(server, mine, [scripted('old', steps)])).subagent_ids[0] as string;
    await req(server, 'POST', `/v1/sessions/${mine.session_id}/reset`, { key: mine.session_key });

    const cases: Array<[string, string, string, string | undefined, unknown?]> = [
      ['unknown session', 'GET', '/v1/sessions/ses_nope', mine.session_key],
      ['closed session', 'GET', `/v1/sessions/${closed.session_id}`, closed.session_key],
      ['wrong key', 'GET', `/v1/sessions/${other.session_id}`, mine.session_key],
      ['missing key', 'GET', `/v1/sessions/${other.session_id}`, undefined],
      ['wrong key, write', 'POST', `/v1/sessions/${other.session_id}/delegations`, mine.session_key, { tasks: [scripted('x', steps)] }],
      ['wrong key, events', 'GET', `/v1/sessions/${other.session_id}/events`, mine.session_key],
      ['foreign child', 'GET', `/v1/sessions/${mine.session_id}/subagents/${foreignChild}`, mine.session_key],
      ['foreign child tail', 'GET', `/v1/sessions/${mine.session_id}/subagents/${foreignChild}/tail`, mine.session_key],
      ['foreign child steer', 'POST', `/v1/sessions/${mine.session_id}/subagents/${foreignChild}/steer`, mine.session_key, { text: 'hi' }],
      ['foreign child interrupt', 'POST', `/v1/sessions/${mine.session_id}/subagents/${foreignChild}/interrupt`, mine.session_key],
      ['unknown child', 'GET', `/v1/sessions/${mine.session_id}/subagents/sa_nope`, mine.session_key],
      ['unknown child steer', 'POST', `/v1/sessions/${mine.session_id}/subagents/sa_nope/steer`, mine.session_key, { text: 'hi' }],
      ['retired child', 'GET', `/v1/sessions/${mine.session_id}/subagents/${retiredChild}/tail`, mine.session_key],
      ['retired child steer', 'POST', `/v1/sessions/${mine.session_id}/subagents/${retiredChild}/steer`, mine.session_key, { text: 'hi' }],
      ['unknown path', 'GET', '/v1/sessions/x/y/z/w/v/u', mine.session_key],
      ['unknown top path', 'GET', '/elsewhere', mine.session_key],
    ];
    const answers = [];
    for (const [name, method, path, key, body] of cases) {
      const r = await req(server, method, path, { key, body });
      answers.push([name, shape(r)] as const);
    }
    const expected = { status: 404, text: '{"error":{"code":4001,"message":"not found"}}', type: 'application/json; charset=utf-8', length: '45' };
    for (const [name, a] of answers) expect(a, name).toEqual(expected);
    // The foreign child is untouched.
    const theirs = await req(server, 'GET', `/v1/sessions/${other.session_id}/subagents/${foreignChild}`, { key: other.session_key });
    expect(theirs.json).toMatchObject({ subagent_id: foreignChild, status: 'running' });
  });
});

describe('the dashboard address at start', () => {
  it('is printed with a made-up token, which logs in; a chosen token is never echoed', async () => {
    const made = await startHttp([], { token: null });
    const line = await made.proc.stderr.take((l) => l.startsWith('subrun dashboard: '));
    const url = line.slice('subrun dashboard: '.length);
    expect(url).toBe(`${made.base}/ui/?token=${encodeURIComponent(made.token)}`);
    const r = await fetch(url, { redirect: 'manual' });
    expect(r.status).toBe(303);
    expect(r.headers.get('set-cookie')).toMatch(/^subrun_auth=/);
    const chosen = server.proc.stderr.all.find((l) => l.startsWith('subrun dashboard: '));
    expect(chosen).toBe(`subrun dashboard: ${server.base}/ui/?token=<your --token>`);
  });
});
