// A real `subrun serve --ws` exporting to a small OTLP/HTTP collector in this test: an HTTP
// request's traceparent parents its SERVER span, under which the delegation and the children nest,
// over http/json (decoded whole) and http/protobuf (the default; its strings are read from the
// wire bytes). A grpc protocol is one line and exit 2.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { killAll, runSubrun } from '../helpers/process.ts';
import { attr, collector, spansOf } from '../helpers/otlp.ts';
import { createSession, req, scripted, startHttp } from '../http/client.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER = '00f067aa0ba902b7';
let closeCollector: (() => Promise<void>) | undefined;
afterEach(async () => {
  await killAll();
  await closeCollector?.();
});
afterAll(killAll);

async function runTraced(protocol: 'http/json' | 'http/protobuf') {
  const c = await collector();
  closeCollector = c.close;
  const server = await startHttp([], {
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: c.url, OTEL_EXPORTER_OTLP_PROTOCOL: protocol, OTEL_BSP_SCHEDULE_DELAY: '20' },
  });
  const s = await createSession(server);
  const r = await req(server, 'POST', `/v1/sessions/${s.session_id}/delegations`, {
    key: s.session_key,
    body: { tasks: [scripted('one', [{ op: 'tool', name: 'look' }, { op: 'finish' }]), scripted('two', [{ op: 'finish' }])] },
    headers: { traceparent: `00-${TRACE}-${CALLER}-01` },
  });
  expect(r.status).toBe(202);
  const done = await req(server, 'GET', `/v1/sessions/${s.session_id}/delegations/${r.json.delegation_id}?wait=30`, { key: s.session_key });
  expect(done.json.done).toBe(true);
  return { c, server, ids: r.json.subagent_ids as string[] };
}

describe('traces exported over OTLP/HTTP by a real server', () => {
  it('http/json: the caller traceparent parents the request span; the delegation and its children nest under it', async () => {
    const { c, ids } = await runTraced('http/json');
    await c.until(
      () => spansOf(c.requests).filter((s) => s.name === 'invoke_agent').length === 2 && spansOf(c.requests).some((s) => s.name === 'subrun.delegation'),
    );
    expect(c.requests.every((q) => q.contentType.startsWith('application/json'))).toBe(true);
    const spans = spansOf(c.requests);
    const request = spans.find((s) => s.name === 'POST /v1/sessions/{sid}/delegations')!;
    expect(request.traceId).toBe(TRACE);
    expect(request.parentSpanId).toBe(CALLER);
    expect(request.kind).toBe(2); // SERVER
    expect(attr(request, 'http.route')).toBe('/v1/sessions/{sid}/delegations');
    expect(attr(request, 'http.response.status_code')).toBe(202);
    const delegation = spans.find((s) => s.name === 'subrun.delegation')!;
    expect(delegation.parentSpanId).toBe(request.spanId);
    const agents = spans.filter((s) => s.name === 'invoke_agent');
    expect(agents.map((a) => attr(a, 'gen_ai.agent.id')).sort()).toEqual([...ids].sort());
    for (const a of agents) {
      expect(a.traceId).toBe(TRACE);
      expect(a.parentSpanId).toBe(delegation.spanId);
      expect(attr(a, 'subrun.status')).toBe('completed');
    }
    const tool = spans.find((s) => s.name === 'execute_tool look')!;
    expect(tool.parentSpanId).toBe(agents.find((a) => attr(a, 'gen_ai.agent.id') === ids[0])!.spanId);
    const resource = JSON.parse(c.requests[0]!.body.toString('utf8')).resourceSpans[0].resource.attributes;
    expect(resource).toContainEqual({ key: 'service.name', value: { stringValue: 'subrun' } });
  });

  it('http/protobuf (the default protocol): the same spans on the wire', async () => {
    const { c } = await runTraced('http/protobuf');
    const wire = () => Buffer.concat(c.requests.map((q) => q.body)).toString('latin1');
    await c.until(() => (wire().match(/invoke_agent/g) ?? []).length >= 2 && wire().includes('subrun.delegation'));
    expect(c.requests.every((q) => q.contentType === 'application/x-protobuf')).toBe(true);
    expect(wire()).toContain('POST /v1/sessions/{sid}/delegations');
    // The trace id travels as its 16 raw bytes.
    expect(wire()).toContain(Buffer.from(TRACE, 'hex').toString('latin1'));
  });

  it('a grpc protocol is one line on stderr and exit 2', async () => {
    const r = await runSubrun(['serve', '--ws', '--port', '0'], { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/grpc.*not supported/);
  });
});
