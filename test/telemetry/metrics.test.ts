// GET /metrics on a real `subrun serve --ws`: who may read it (the metrics token reads it and
// nothing else), the families of docs/observability.md, counts equal to what a scripted run did,
// and no label carrying an id however many children ran.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { parseMetrics, valueOf, type Family } from '../helpers/prometheus.ts';
import { createSession, req, scripted, spawn, startHttp, type HttpServer, type Session } from '../http/client.ts';

const METRICS_TOKEN = 'scrape-only-token-0123456789';
let server: HttpServer;
beforeAll(async () => {
  server = await startHttp(['--metrics-token', METRICS_TOKEN, '--max-concurrent-children', '8']);
});
afterAll(killAll);

async function scrape(token: string | null = METRICS_TOKEN): Promise<Map<string, Family>> {
  const r = await req(server, 'GET', '/metrics', { token });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  return parseMetrics(r.text);
}

async function finished(s: Session, delegation_id: string): Promise<Array<{ status: string; subagent_id: string }>> {
  const r = await req(server, 'GET', `/v1/sessions/${s.session_id}/delegations/${delegation_id}?wait=30`, { key: s.session_key });
  expect(r.status).toBe(200);
  expect(r.json.done).toBe(true);
  return r.json.results;
}

describe('who may read /metrics', () => {
  it('the metrics token and the server token read it; nothing else does, and it is GET only', async () => {
    expect((await req(server, 'GET', '/metrics', { token: METRICS_TOKEN })).status).toBe(200);
    expect((await req(server, 'GET', '/metrics')).status).toBe(200);
    for (const token of [null, 'wrong']) {
      const r = await req(server, 'GET', '/metrics', { token });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
      expect(r.json).toEqual({ error: { code: 4007, message: 'unauthorized' } });
    }
    // No query token (it ends up in logs), no cookie (a page in the browser must not read it).
    expect((await req(server, 'GET', `/metrics?token=${METRICS_TOKEN}`, { token: null })).status).toBe(401);
    const login = await req(server, 'GET', `/ui/?token=${server.token}`, { token: null });
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    expect(cookie).toMatch(/^subrun_auth=/);
    expect((await req(server, 'GET', '/metrics', { token: null, headers: { cookie } })).status).toBe(401);
    const post = await req(server, 'POST', '/metrics', { token: METRICS_TOKEN, body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
  });

  it('the metrics token opens nothing else: not the API, not the dashboard', async () => {
    expect((await req(server, 'GET', '/v1/capabilities', { token: METRICS_TOKEN })).status).toBe(401);
    const ui = await req(server, 'GET', `/ui/?token=${METRICS_TOKEN}`, { token: null });
    expect(ui.headers.get('set-cookie')).toBeNull();
  });
});

describe('what /metrics counts', () => {
  it('counts equal to a scripted run: children by status, steers by fate, interrupts, and the gauges back to 0', async () => {
    const before = await scrape();
    const base = (name: string, labels: Record<string, string> = {}) => valueOf(before, name, labels) ?? 0;
    const s = await createSession(server);
    const d = await spawn(server, s, [
      scripted('done', [{ op: 'finish', summary: 'ok' }]),
      scripted('fails', [{ op: 'fail', error: 'no' }]),
      scripted('waits', [{ op: 'wait_steer', timeout_ms: 30_000 }, { op: 'finish' }]),
      scripted('hangs', [{ op: 'hang' }]),
    ]);
    const [, , waits, hangs] = d.subagent_ids as [string, string, string, string];
    const steer = (id: string) => req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/steer`, { key: s.session_key, body: { text: 'go on' } });
    expect((await steer(waits)).status).toBe(202);
    expect((await steer(hangs)).status).toBe(202);
    // A steer that passed validation and is refused: the child is gone.
    const interrupt = (id: string) => req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/interrupt`, { key: s.session_key, body: {} });
    const hit = await interrupt(hangs);
    expect(hit.status).toBe(200);
    const results = await finished(s, d.delegation_id);
    expect(results.map((r) => r.status)).toEqual(['completed', 'failed', 'completed', 'interrupted']);
    expect((await steer(hangs)).status).toBe(409);
    expect((await interrupt(hangs)).json.found).toBe(false);

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => (valueOf(after, name, labels) ?? 0) - base(name, labels);
    expect(delta('subrun_children_spawned_total')).toBe(4);
    expect(delta('subrun_children_finished_total', { status: 'completed', exit_reason: 'completed' })).toBe(2);
    expect(delta('subrun_children_finished_total', { status: 'failed' })).toBe(1);
    expect(delta('subrun_children_finished_total', { status: 'interrupted' })).toBe(1);
    expect(delta('subrun_steers_total', { fate: 'queued' })).toBe(2);
    expect(delta('subrun_steers_total', { fate: 'delivered' })).toBe(1);
    expect(delta('subrun_steers_total', { fate: 'missed' })).toBe(1);
    expect(delta('subrun_steers_total', { fate: 'rejected' })).toBe(1);
    expect(delta('subrun_steer_delivery_seconds')).toBe(1);
    expect(delta('subrun_interrupts_total', { found: 'true' })).toBe(1);
    expect(delta('subrun_interrupts_total', { found: 'false' })).toBe(1);
    expect(valueOf(after, 'subrun_children', { state: 'queued' })).toBe(0);
    expect(valueOf(after, 'subrun_children', { state: 'running' })).toBe(0);
    expect(valueOf(after, 'subrun_steer_queue_depth')).toBe(0);
    // The session has no socket or stream attached between requests: parked.
    expect(valueOf(after, 'subrun_sessions', { state: 'parked' })).toBeGreaterThanOrEqual(1);
    expect(valueOf(after, 'subrun_connections', { transport: 'ws' })).toBe(0);
    expect(valueOf(after, 'subrun_sse_subscribers')).toBe(0);
    expect(after.get('subrun_build_info')?.metrics[0]?.labels?.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(after.get('nodejs_eventloop_lag_seconds')?.type).toBe('GAUGE');
    expect(after.get('subrun_steer_delivery_seconds')?.type).toBe('HISTOGRAM');
    // (An object's integer keys come first whatever the text's order: compared as a set.)
    expect(new Set(Object.keys(after.get('subrun_steer_delivery_seconds')?.metrics[0]?.buckets ?? {}))).toEqual(
      new Set(['0.005', '0.01', '0.05', '0.1', '0.5', '1', '5', '10', '30', '60', '300', '+Inf']),
    );
  });

  it('no label carries an id: 40 more children add no series', async () => {
    const series = (families: Map<string, Family>) =>
      [...families.values()].filter((f) => f.name.startsWith('subrun_')).flatMap((f) => f.metrics.map((m) => `${f.name}${JSON.stringify(m.labels ?? {})}`));
    // Every label value of every fate and status seen once, so the next run adds values only if it leaks ids.
    const warm = await scrape();
    const s = await createSession(server);
    const ids: string[] = [s.session_id];
    for (let batch = 0; batch < 5; batch++) {
      const d = await spawn(
        server,
        s,
        Array.from({ length: 8 }, (_, i) => scripted(`child ${batch}.${i}`, [i % 2 === 0 ? { op: 'finish' } : { op: 'fail', error: 'x' }])),
      );
      ids.push(d.delegation_id, ...d.subagent_ids);
      await finished(s, d.delegation_id);
    }
    const after = await scrape();
    expect(valueOf(after, 'subrun_children_spawned_total')! - valueOf(warm, 'subrun_children_spawned_total')!).toBe(40);
    expect(new Set(series(after))).toEqual(new Set(series(warm)));
    const values = [...after.values()].flatMap((f) => f.metrics.flatMap((m) => Object.values(m.labels ?? {})));
    for (const id of ids) expect(values).not.toContain(id);
    expect(values.filter((v) => /^(sa|ses|dg|st|sess)_/.test(v))).toEqual([]);
  });
});
