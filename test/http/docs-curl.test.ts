// docs/http.md: every ```sh example runs here with curl against a live server, with BASE, TOKEN,
// SID, KEY, CID and DID set, and gets the status its first-line comment names (`# stream`: an
// event stream, read until curl's --max-time). Every route of the API is documented.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRoutes } from '../../src/http/routes.ts';
import { SseHub } from '../../src/http/sse.ts';
import { silentLogger } from '../../src/log.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { killAll } from '../helpers/process.ts';
import { createSession, scripted, spawn, startHttp, type HttpServer } from './client.ts';

const doc = readFileSync(new URL('../../docs/http.md', import.meta.url), 'utf8');
const blocks = [...doc.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((m) => ({ body: m[1] ?? '', line: doc.slice(0, m.index).split('\n').length }));

let server: HttpServer;
let env: Record<string, string>;

async function freshSession(): Promise<Record<string, string>> {
  const s = await createSession(server);
  const d = await spawn(server, s, [
    scripted('waits', [{ op: 'tool', name: 'read_file', ms: 10 }, { op: 'wait_steer' }, { op: 'wait_steer' }, { op: 'wait_steer' }]),
  ]);
  return { BASE: server.base, TOKEN: server.token, SID: s.session_id, KEY: s.session_key, CID: d.subagent_ids[0] as string, DID: d.delegation_id };
}

beforeAll(async () => {
  server = await startHttp();
  env = await freshSession();
});
afterAll(killAll);

describe('docs/http.md curl examples', () => {
  it('has examples, each with its expected status', () => {
    expect(blocks.length).toBeGreaterThan(15);
    for (const b of blocks) expect(b.body.split('\n')[0], `line ${b.line}`).toMatch(/^# (\d{3}|stream)$/);
  });

  // In document order: the steer examples build on each other (the replay, then the conflict).
  it.each(blocks.map((b) => [`line ${b.line}`, b] as const))('%s runs and gets its status', async (_name, b) => {
    const expected = (b.body.split('\n')[0] as string).slice(2);
    const script = `curl() { command curl -w '\\n@@%{http_code}' "$@"; }\n${b.body}`;
    const r = spawnSync('bash', ['-c', script], { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', timeout: 20_000 });
    const statuses = [...r.stdout.matchAll(/@@(\d{3})/g)].map((m) => m[1]);
    if (expected === 'stream') {
      // Ended by --max-time (28) after reading the stream.
      expect(r.status, r.stderr).toBe(28);
      expect(r.stdout).toContain('retry: 2000');
      expect(r.stdout).toMatch(/^id: \d+\nevent: [\w.]+\ndata: \{/m);
    } else {
      expect(r.status, r.stderr).toBe(0);
      expect(statuses, r.stdout).toEqual([expected]);
      const body = r.stdout.replace(/\n@@\d{3}$/, '');
      if (!b.body.includes(' -i ')) expect(() => JSON.parse(body), body).not.toThrow();
    }
    // Closing or resetting the session ends its examples' world: the next ones get a fresh one.
    if (/-X DELETE "\$BASE\/v1\/sessions\/\$SID"|\/reset"/.test(b.body)) env = await freshSession();
  });

  it('documents every route and method', () => {
    const rpc = new RpcServer();
    const routes = buildRoutes({ server: rpc, sse: new SseHub(rpc, silentLogger), features: () => ({}), max_outbound_bytes: 1 });
    for (const r of routes) {
      const path = `/${r.path.map((p) => (p.startsWith(':') ? `{${p.slice(1)}}` : p)).join('/')}`;
      for (const method of Object.keys(r.methods)) expect(doc, `${method} ${path}`).toContain(`${method} ${path}`);
    }
    for (const status of [400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500, 503]) expect(doc).toContain(`| ${status} |`);
  });
});
