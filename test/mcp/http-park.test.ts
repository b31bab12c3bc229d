// An HTTP MCP session's end: DELETE /mcp, or --park-ttl-ms with no request in flight and no stream
// open. Either way its subrun session closes (a live child is interrupted: the server's own log
// line says so) and its id is then 404. Raw HTTP: each POST's stream ends with its answer, so no
// stream stays open and the park clock runs. And the server's own end: SIGTERM answers a call
// still waiting over HTTP with its entries before the process exits 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll, startWsServer, type WsServer } from '../helpers/process.ts';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { hanging, startHttpHost } from './harness.ts';
import { initializeBody, mcpHeaders, raw, sseEvents } from './http-wire.ts';

let server: WsServer;

beforeAll(async () => {
  server = await startWsServer(['--no-state', '--log-level', 'info', '--park-ttl-ms', '300']);
});
afterAll(async () => {
  await killAll();
});

type Line = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A session with one hanging child; its id and the child's. */
async function sessionWithChild(): Promise<{ sid: string; child: string }> {
  const init = await raw(server.port, 'POST', '/mcp', mcpHeaders(server.token), initializeBody());
  const sid = String(init.headers['mcp-session-id']);
  const h = mcpHeaders(server.token, sid);
  expect((await raw(server.port, 'POST', '/mcp', h, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))).status).toBe(202);
  const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delegate', arguments: { tasks: [hanging('parked')] } } };
  const r = await raw(server.port, 'POST', '/mcp', h, JSON.stringify(call));
  const answer = sseEvents(r.body)
    .filter((e) => e.data !== '')
    .map((e) => JSON.parse(e.data) as Line)
    .find((m) => m.id === 1);
  const child = String(answer?.result.structuredContent.subagent_ids[0]);
  await server.proc.stderr.take((l) => l.includes('child started') && l.includes(child));
  return { sid, child };
}

const stopped = (child: string) => server.proc.stderr.take((l) => l.includes('child completed') && l.includes(child) && l.includes('interrupted'));
const ping = (sid: string) => raw(server.port, 'POST', '/mcp', mcpHeaders(server.token, sid), JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' }));

describe('/mcp: the end of a session', () => {
  it('DELETE closes its subrun session: the live child is interrupted, the id is 404', async () => {
    const { sid, child } = await sessionWithChild();
    expect((await raw(server.port, 'DELETE', '/mcp', mcpHeaders(server.token, sid))).status).toBe(200);
    await stopped(child);
    expect((await ping(sid)).status).toBe(404);
  });

  it('--park-ttl-ms with nothing in flight and no stream open closes it the same way', async () => {
    const { sid, child } = await sessionWithChild();
    await stopped(child);
    expect((await ping(sid)).status).toBe(404);
  });
});

describe('/mcp: the server shutting down', () => {
  it('SIGTERM with a waiting call over HTTP: the call is answered with its interrupted entries, then exit 0', async () => {
    const own = await startWsServer(['--no-state']);
    const host = await startHttpHost(`http://127.0.0.1:${own.port}/mcp`, own.token);
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const call = host.client.callTool({ name: 'delegate', arguments: { tasks: [hanging('cut short')], wait: true, wait_seconds: 600 } }, CallToolResultSchema, {
      onprogress: () => started(),
    });
    await running;
    own.proc.child.kill('SIGTERM');
    const r = await call;
    expect(r.structuredContent).toMatchObject({ done: true, results: [{ status: 'interrupted' }] });
    expect(await own.proc.waitExit()).toEqual({ code: 0, signal: null });
    await host.close().catch(() => undefined);
  });
});
