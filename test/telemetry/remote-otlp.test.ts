// Traces across NATS, end to end: a real nats-server -js, a real `serve --ws --nats` control plane
// and a real `subrun worker`, both exporting over OTLP/HTTP (JSON) to the collector in this test.
// The host's traceparent parents the request span; the remote children's invoke_agent spans are
// the control plane's (with their steer events), their tool spans the worker's, under them, in the
// same trace; a remote grandchild's delegation nests under the remote child; an unsampled caller
// exports nothing from either process. A worker whose collector never answers still exits
// within its grace.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import { call, connectWs, killAll, nextEvent, scriptedTask, startWsServer } from '../helpers/process.ts';
import { attr, collector, resourceAttr, spansOf, type Collector, type ResourcedSpan } from '../helpers/otlp.ts';
import { createSession, req, scripted, startHttp, type HttpServer } from '../http/client.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const UNSAMPLED = '0af7651916cd43dd8448eb211c80319c';
const CALLER = '00f067aa0ba902b7';

let nats: Nats;
let c: Collector | undefined;
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await killAll();
  await nats?.dispose();
});
afterEach(async () => {
  await killAll();
  await c?.close();
  c = undefined;
});

const otel = (url: string): Record<string, string> => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '20',
});

async function delegate(server: HttpServer, s: { session_id: string; session_key: string }, traceparent: string, tasks: unknown[]) {
  const r = await req(server, 'POST', `/v1/sessions/${s.session_id}/delegations`, { key: s.session_key, body: { tasks }, headers: { traceparent } });
  expect(r.status).toBe(202);
  return { delegation_id: r.json.delegation_id as string, ids: r.json.subagent_ids as string[] };
}

async function finished(server: HttpServer, s: { session_id: string; session_key: string }, delegation_id: string) {
  const done = await req(server, 'GET', `/v1/sessions/${s.session_id}/delegations/${delegation_id}?wait=30`, { key: s.session_key });
  expect(done.json.done).toBe(true);
  return done.json;
}

const by = (spans: readonly ResourcedSpan[], name: string) => spans.filter((s) => s.name === name);
const agentOf = (spans: readonly ResourcedSpan[], id: string) => spans.find((s) => s.name === 'invoke_agent' && attr(s, 'gen_ai.agent.id') === id);

describe('traces across NATS: a control plane and a worker exporting to one collector', () => {
  it('puts the worker’s spans under the remote child’s invoke_agent, in the host’s trace', async () => {
    c = await collector();
    const server = await startHttp(['--nats', nats.url, '--max-spawn-depth', '2'], { env: otel(c.url) });
    const worker = await startWorker(nats.url, [], { ...otel(c.url), OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test' });
    const s = await createSession(server);

    // First a tree the caller did not sample: nothing of it may reach the collector, from either side.
    const quiet = await delegate(server, s, `00-${UNSAMPLED}-${CALLER}-00`, [
      scripted('quiet', [
        { op: 'tool', name: 'hush' },
        { op: 'spawn', tasks: [scripted('quiet grandchild', [{ op: 'tool', name: 'hush' }, { op: 'finish' }])] },
        { op: 'finish' },
      ]),
    ]);
    await finished(server, s, quiet.delegation_id);

    const { delegation_id, ids } = await delegate(server, s, `00-${TRACE}-${CALLER}-01`, [
      scripted('spawns', [
        { op: 'tool', name: 'look', args: { secret: 'tool-args-are-content' } },
        { op: 'spawn', tasks: [scripted('grandchild', [{ op: 'tool', name: 'dig' }, { op: 'finish' }])] },
        { op: 'finish' },
      ]),
      scripted('waits', [{ op: 'wait_steer', timeout_ms: 20_000 }, { op: 'finish' }]),
    ]);
    const [spawns, waits] = ids as [string, string];
    const steer = await req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${waits}/steer`, { key: s.session_key, body: { text: 'steer-text' } });
    expect(steer.json.status).toBe('queued');
    const done = await finished(server, s, delegation_id);
    expect(done.results.map((e: { status: string }) => e.status)).toEqual(['completed', 'completed']);

    await c.until(() => {
      const spans = spansOf(c!.requests);
      return by(spans, 'invoke_agent').length === 3 && by(spans, 'execute_tool dig').length === 1 && by(spans, 'execute_tool look').length === 1;
    });
    const spans = spansOf(c.requests);
    const fromWorker = (sp: ResourcedSpan) => resourceAttr(sp, 'service.name') === 'subrun-worker';

    const request = spans.find((sp) => sp.name === 'POST /v1/sessions/{sid}/delegations' && sp.traceId === TRACE)!;
    expect(request.parentSpanId).toBe(CALLER);
    const top = spans.find((sp) => sp.name === 'subrun.delegation' && attr(sp, 'subrun.delegation.id') === delegation_id)!;
    expect(top.parentSpanId).toBe(request.spanId);
    const a = agentOf(spans, spawns)!;
    const b = agentOf(spans, waits)!;
    for (const agent of [a, b]) {
      expect(agent.parentSpanId).toBe(top.spanId);
      expect(fromWorker(agent)).toBe(false);
      expect(attr(agent, 'subrun.remote')).toBe(true);
      expect(attr(agent, 'subrun.worker.id')).toBe(worker.id);
      expect(attr(agent, 'subrun.status')).toBe('completed');
    }

    // The remote child's tool step: the worker's span, under the control plane's invoke_agent.
    const look = by(spans, 'execute_tool look');
    expect(look).toHaveLength(1);
    expect(look[0]!.traceId).toBe(TRACE);
    expect(look[0]!.parentSpanId).toBe(a.spanId);
    expect(fromWorker(look[0]!)).toBe(true);
    expect(resourceAttr(look[0]!, 'service.instance.id')).toBe(worker.id);
    expect(resourceAttr(look[0]!, 'deployment.environment')).toBe('test');

    // The remote grandchild: its delegation under the spawning child, its own tool span under it.
    const nested = spans.find((sp) => sp.name === 'subrun.delegation' && attr(sp, 'subrun.parent.id') === spawns)!;
    expect(nested.traceId).toBe(TRACE);
    expect(nested.parentSpanId).toBe(a.spanId);
    const grandchild = spans.find((sp) => sp.name === 'invoke_agent' && attr(sp, 'subrun.parent.id') === spawns)!;
    expect(grandchild.parentSpanId).toBe(nested.spanId);
    expect(attr(grandchild, 'subrun.depth')).toBe(1);
    const dig = by(spans, 'execute_tool dig')[0]!;
    expect(dig.parentSpanId).toBe(grandchild.spanId);
    expect(fromWorker(dig)).toBe(true);

    // The remote child's events, added by the control plane as they happened.
    expect(b.events?.map((e) => e.name)).toEqual(expect.arrayContaining(['subrun.started', 'subrun.steer.queued', 'subrun.steer.delivered']));
    expect(b.events?.filter((e) => e.name.startsWith('subrun.steer.')).map((e) => attr(e, 'subrun.steer.id'))).toEqual([
      steer.json.steer_id,
      steer.json.steer_id,
    ]);

    // One trace for all of it; the unsampled tree exported nothing from either process.
    expect(new Set([request, top, a, b, ...look, nested, grandchild, dig].map((sp) => sp.traceId))).toEqual(new Set([TRACE]));
    expect(spans.filter((sp) => sp.traceId === UNSAMPLED)).toEqual([]);
    expect(by(spans, 'execute_tool hush')).toEqual([]);
    expect(JSON.stringify(spans)).not.toContain('tool-args-are-content');
    expect(JSON.stringify(spans)).not.toContain('steer-text');
  });

  it('a worker whose collector never answers exits within its grace after SIGTERM, its child’s outcome sent', async () => {
    // Accepts every export and never answers it: a collector that hangs, not one that refuses.
    const hanging: ServerResponse[] = [];
    const blackHole: Server = createServer((_rq, rs) => void hanging.push(rs));
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    const address = blackHole.address();
    const url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    try {
      const srv = await startWsServer(['--nats', nats.url]);
      const { peer } = await connectWs(srv);
      // The exporter alone would wait a minute for its answer.
      const worker = await startWorker(nats.url, ['--shutdown-grace-ms', '300'], { ...otel(url), OTEL_EXPORTER_OTLP_TIMEOUT: '60000' });
      const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
      const [id] = (
        await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
          session_id,
          tasks: [scriptedTask('remote', [{ op: 'tool', name: 'look' }, { op: 'hang' }])],
          _meta: { traceparent: `00-${TRACE}-${CALLER}-01` },
        })
      ).subagent_ids as [string];
      // Its tool span ended on the worker (queued for an export that never gets an answer).
      await nextEvent(peer, (e) => e.type === 'subagent.tool' && e.payload.subagent_id === id);
      worker.proc.child.kill('SIGTERM');
      // Bounded by the helper's wait (15 s), far below the exporter's 60 s: the grace, not the collector.
      expect(await worker.proc.waitExit()).toEqual({ code: 0, signal: null });
      const complete = await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id);
      // Stopped by its worker's shutdown, not by the host: the runtime's rule makes that `failed`.
      expect(complete.payload.status).toBe('failed');
    } finally {
      for (const rs of hanging) rs.destroy();
      blackHole.closeAllConnections();
      await new Promise<void>((resolve) => blackHole.close(() => resolve()));
    }
  });
});
