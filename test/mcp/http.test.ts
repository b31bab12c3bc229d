// Streamable HTTP MCP at /mcp on a real `subrun serve --ws`, judged by the SDK's own Client
// (StreamableHTTPClientTransport) and, where the client hides the wire, by raw HTTP: the bearer
// token (401 with no OAuth metadata), Origin and Host (403), session ids (random, never logged,
// 400 / 404), DELETE, two sessions that never see each other, the body bound, and a stream
// dropped mid-call that resumes with Last-Event-ID.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll, startWsServer, type WsServer } from '../helpers/process.ts';
import { hanging, startHttpHost, steerable, type Host, readJson } from './harness.ts';
import { initializeBody, mcpHeaders, raw, readUntil } from './http-wire.ts';

let server: WsServer;
let mcpUrl: string;
const hosts: Host[] = [];

beforeAll(async () => {
  server = await startWsServer(['--no-state', '--log-level', 'debug']);
  mcpUrl = `http://127.0.0.1:${server.port}/mcp`;
});
afterAll(async () => {
  for (const h of hosts) await h.close().catch(() => undefined);
  await killAll();
});

async function host(label?: string) {
  const h = await startHttpHost(mcpUrl, server.token, label);
  hosts.push(h);
  return h;
}

type Line = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('/mcp: the gate', () => {
  it('without the bearer token (or with ?token= or a wrong one) is 401 with WWW-Authenticate: Bearer and no OAuth metadata', async () => {
    for (const [path, headers] of [
      ['/mcp', { 'Content-Type': 'application/json' }],
      [`/mcp?token=${server.token}`, { 'Content-Type': 'application/json' }],
      ['/mcp', { 'Content-Type': 'application/json', Authorization: 'Bearer wrong' }],
    ] as const) {
      const r = await raw(server.port, 'POST', path, headers, initializeBody());
      expect(r.status, path).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Bearer');
      expect(r.body).not.toMatch(/resource_metadata|oauth/i);
    }
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource/mcp']) {
      expect((await raw(server.port, 'GET', path, { Authorization: `Bearer ${server.token}` })).status, path).toBe(404);
    }
  });

  it('the capabilities of /v1/ say features.mcp', async () => {
    const r = await raw(server.port, 'GET', '/v1/capabilities', { Authorization: `Bearer ${server.token}` });
    expect((JSON.parse(r.body) as Line).features).toMatchObject({ mcp: true });
  });

  it('a foreign Origin, or a Host that does not name loopback, is 403 (DNS rebinding); an allowed one passes', async () => {
    const h = mcpHeaders(server.token);
    expect((await raw(server.port, 'POST', '/mcp', { ...h, Origin: 'http://evil.example' }, initializeBody())).status).toBe(403);
    expect((await raw(server.port, 'POST', '/mcp', { ...h, Host: `evil.example:${server.port}` }, initializeBody())).status).toBe(403);
    const ok = await raw(server.port, 'POST', '/mcp', { ...h, Origin: `http://127.0.0.1:${server.port}`, Host: `localhost:${server.port}` }, initializeBody());
    expect(ok.status).toBe(200);
    expect(ok.headers['mcp-session-id']).toMatch(/^[A-Za-z0-9_-]{32}$/);
  });

  it('a request without Mcp-Session-Id (not an initialize) is 400, an unknown one 404; DELETE ends a session', async () => {
    const h = mcpHeaders(server.token);
    const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect((await raw(server.port, 'POST', '/mcp', h, list)).status).toBe(400);
    expect((await raw(server.port, 'GET', '/mcp', { ...h, Accept: 'text/event-stream' })).status).toBe(400);
    expect((await raw(server.port, 'POST', '/mcp', mcpHeaders(server.token, 'not-a-session'), list)).status).toBe(404);
    const a = await host();
    const id = a.transport.sessionId as string;
    expect(id).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect((await raw(server.port, 'DELETE', '/mcp', mcpHeaders(server.token, id))).status).toBe(200);
    expect((await raw(server.port, 'POST', '/mcp', mcpHeaders(server.token, id), list)).status).toBe(404);
  });

  it('a body past the SDK bound is 413; a 2 MB argument is -32600 and changes nothing', async () => {
    const a = await host();
    const id = a.transport.sessionId as string;
    const huge = JSON.stringify({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: { name: 'list_subagents', arguments: { pad: 'x'.repeat(5 * 1024 * 1024) } },
    });
    expect((await raw(server.port, 'POST', '/mcp', mcpHeaders(server.token, id), huge)).status).toBe(413);
    const big = await a.tool('delegate', { tasks: [{ goal: 'x'.repeat(2 * 1024 * 1024) }] });
    expect(big.sc.error).toMatchObject({ code: -32600, message: 'arguments too large' });
    expect((await a.tool('list_subagents', { include_finished: true })).sc.subagents).toEqual([]);
  });
});

describe('/mcp: sessions', () => {
  it('two sessions never see each other: steer, tail, interrupt, results, resources, log messages', async () => {
    const a = await host('host a notifications');
    const b = await host('host b notifications');
    const d = await a.tool('delegate', { tasks: [steerable('private')] });
    const child = d.sc.subagent_ids[0] as string;
    const aSession = await readJson(a.client, 'subrun://session');
    expect((await b.tool('steer_subagent', { subagent_id: child, text: 'hijack' })).sc).toMatchObject({ status: 'rejected', reason: 'not_found' });
    expect((await b.tool('tail_subagent', { subagent_id: child })).sc).toMatchObject({ available: false });
    expect((await b.tool('interrupt_subagent', { subagent_id: child })).sc).toEqual({ found: false, subagent_id: child, interrupted: [] });
    expect((await b.tool('delegation_result', { delegation_id: d.sc.delegation_id })).sc.error.code).toBe(4004);
    expect((await b.tool('list_subagents', { include_finished: true })).sc.subagents).toEqual([]);
    await expect(b.client.readResource({ uri: `subrun://sessions/${aSession.session_id}/subagents/${child}` })).rejects.toMatchObject({ code: -32002 });
    // A's child goes on, steered by A alone, and A hears of it.
    expect((await a.tool('steer_subagent', { subagent_id: child, text: 'mine' })).sc.status).toBe('queued');
    const done = await a.tool('delegation_result', { delegation_id: d.sc.delegation_id, wait_seconds: 30 });
    expect(done.sc.results[0]).toMatchObject({ status: 'completed', summary: 'private steered' });
    await a.notes.take((n) => n.params.data?.event === 'subagent.complete' && n.params.data.subagent_id === child);
    expect(JSON.stringify(b.notes.all)).not.toContain(child);
  });

  it('a stream dropped mid-call resumes with Last-Event-ID: every later message once, the answer included; an unknown cursor is 400', async () => {
    const a = await host();
    const sid = a.transport.sessionId as string;
    const abort = new AbortController();
    const call = {
      jsonrpc: '2.0',
      id: 'r1',
      method: 'tools/call',
      params: { name: 'delegate', arguments: { tasks: [steerable('resumed')], wait: true }, _meta: { progressToken: 't' } },
    };
    const res = await fetch(mcpUrl, { method: 'POST', headers: mcpHeaders(server.token, sid), body: JSON.stringify(call), signal: abort.signal });
    const before = await readUntil(res, (es) => es.some((e) => e.data.includes('"started"')), abort);
    for (const e of before) expect(e.id).toBeDefined();
    const last = before.at(-1)?.id as string;
    const started = JSON.parse(before.find((e) => e.data.includes('"started"'))?.data ?? '{}') as Line;
    const child = started.params._meta.subrun.subagent_id as string;
    // While nobody reads that stream, the child is steered and completes: its answer waits in the store.
    expect((await a.tool('steer_subagent', { subagent_id: child, text: 'finish' })).sc.status).toBe('queued');
    await a.notes.take((n) => n.params.data?.event === 'subagent.complete' && n.params.data.subagent_id === child);
    const again = new AbortController();
    const resumed = await fetch(mcpUrl, {
      headers: { ...mcpHeaders(server.token, sid), Accept: 'text/event-stream', 'Last-Event-ID': last },
      signal: again.signal,
    });
    expect(resumed.status).toBe(200);
    // The replay, then the live rest: read until the answer is in.
    const after = (await readUntil(resumed, (es) => es.some((e) => e.data.includes('"r1"')), again)).filter((e) => e.data !== '');
    const messages = after.map((e) => JSON.parse(e.data) as Line);
    expect(messages.filter((m) => m.id === 'r1')).toHaveLength(1);
    expect(messages.find((m) => m.id === 'r1')?.result.structuredContent).toMatchObject({ done: true, results: [{ subagent_id: child, status: 'completed' }] });
    const ids = after.map((e) => Number(e.id));
    expect(ids.every((n) => n > Number(last))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(
      (await raw(server.port, 'GET', '/mcp', { ...mcpHeaders(server.token, sid), Accept: 'text/event-stream', 'Last-Event-ID': '999999999' })).status,
    ).toBe(400);
  });

  it('never writes a session id to its log', async () => {
    const a = await host();
    await a.tool('delegate', { tasks: [hanging('logged')] });
    const id = a.transport.sessionId as string;
    expect(server.proc.stderr.all.join('\n')).not.toContain(id);
  });
});
