// A refused steer says why with the same word on every surface: `finished` for the caller's own
// child that finished (it is known, so it is not "not found"), `not_found` for a child the caller
// cannot see, `vetoed` for one its runner refused. In-process here; JSON-RPC over WebSocket, HTTP
// and MCP's Streamable HTTP against one real `subrun serve --ws` process. ACP's `_subrun/steer`
// relays the JSON-RPC answer (test/acp/acp.test.ts checks it on a real ACP server).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, scripted, type Runner } from '../../src/index.ts';
import { steerRefusalSchema } from '../../src/protocol.ts';
import { call, connectWs, killAll, nextEvent, scriptedTask, type WsPeer } from '../helpers/process.ts';
import { req, startHttp, type HttpServer } from '../http/client.ts';
import { startHttpHost } from '../mcp/harness.ts';

describe('in-process', () => {
  it('a finished child is `finished`, an unknown one `not_found`, a vetoed steer `vetoed`', async () => {
    const runtime = createRuntime();
    const picky: Runner = {
      ...scripted([{ op: 'wait_steer', timeout_ms: 50 }]),
      onSteer() {
        throw new Error('not now');
      },
    };
    const { subagent_ids, results } = runtime.delegate([
      { goal: 'brief', runner: scripted([{ op: 'finish', summary: 'x' }]) },
      { goal: 'picky', runner: picky },
    ]);
    const [brief, pickyId] = subagent_ids;
    expect(runtime.steer(pickyId ?? '', 'no')).toMatchObject({ status: 'rejected', reason: 'vetoed' });
    await results;
    expect(runtime.steer(brief ?? '', 'too late')).toEqual({ status: 'rejected', subagent_id: brief, text: 'too late', reason: 'finished' });
    expect(runtime.steer('sa_nobody', 'x')).toEqual({ status: 'rejected', subagent_id: 'sa_nobody', text: 'x', reason: 'not_found' });
    expect(steerRefusalSchema.options).toEqual(['not_found', 'finished', 'vetoed']);
  });
});

describe('over the wire (one serve --ws process)', () => {
  let server: HttpServer;
  let peer: WsPeer;
  let session: { session_id: string; session_key: string };
  let finished: string;
  let theirs: string;

  beforeAll(async () => {
    server = await startHttp();
    peer = (await connectWs(server)).peer;
    session = await call(peer, 'session.create');
    const spawned = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
      session_id: session.session_id,
      tasks: [scriptedTask('brief', [{ op: 'finish', summary: 'x' }])],
    });
    finished = spawned.subagent_ids[0] ?? '';
    await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === finished, undefined, 'the completion');
    // Another session's child, still running: foreign is not_found, never `finished`.
    const other = (await connectWs(server)).peer;
    const o = await call<{ session_id: string }>(other, 'session.create');
    const s = await call<{ subagent_ids: string[] }>(other, 'delegation.spawn', {
      session_id: o.session_id,
      tasks: [scriptedTask('theirs', [{ op: 'hang' }])],
    });
    theirs = s.subagent_ids[0] ?? '';
  });
  afterAll(killAll);

  it('JSON-RPC: `rejected` carries the reason', async () => {
    const steer = (subagent_id: string) => call(peer, 'subagent.steer', { session_id: session.session_id, subagent_id, text: 'late' });
    expect(await steer(finished)).toEqual({ status: 'rejected', subagent_id: finished, text: 'late', reason: 'finished' });
    expect(await steer('sa_nobody')).toEqual({ status: 'rejected', subagent_id: 'sa_nobody', text: 'late', reason: 'not_found' });
    expect(await steer(theirs)).toEqual({ status: 'rejected', subagent_id: theirs, text: 'late', reason: 'not_found' });
  });

  it('HTTP: `finished` is 409 (4006) with the reason in data; `not_found` is 404', async () => {
    const steer = (id: string) =>
      req(server, 'POST', `/v1/sessions/${session.session_id}/subagents/${id}/steer`, { key: session.session_key, body: { text: 'late' } });
    const late = await steer(finished);
    expect(late.status).toBe(409);
    expect(late.json).toEqual({ error: { code: 4006, message: 'not accepting steer', data: { reason: 'finished' } } });
    expect((await steer('sa_nobody')).status).toBe(404);
    expect((await steer(theirs)).status).toBe(404);
  });

  it('MCP (/mcp): steer_subagent answers the same reasons', async () => {
    const host = await startHttpHost(`${server.base}/mcp`, server.token);
    try {
      const d = await host.tool('delegate', { tasks: [scriptedTask('brief', [{ op: 'finish', summary: 'x' }])], wait: true });
      const id = String(d.sc.subagent_ids[0]);
      expect((await host.tool('steer_subagent', { subagent_id: id, text: 'late' })).sc).toEqual({
        status: 'rejected',
        subagent_id: id,
        text: 'late',
        reason: 'finished',
      });
      expect((await host.tool('steer_subagent', { subagent_id: finished, text: 'late' })).sc).toMatchObject({ status: 'rejected', reason: 'not_found' });
    } finally {
      await host.close();
    }
  });
});
