// The fleet on a control plane's /metrics (serve --ws --nats): each live worker's capacity and the
// children running on it, labelled by its id and nothing else; a lost worker's series go with it
// and the loss counts once. A real nats-server, a real control plane and two real workers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats, startWorker, type Nats } from '../helpers/nats.ts';
import { call, connectWs, killAll, nextEvent, scriptedTask } from '../helpers/process.ts';
import { parseMetrics, valueOf, type Family } from '../helpers/prometheus.ts';
import { req, startHttp, type HttpServer } from '../http/client.ts';

let nats: Nats;
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  await killAll();
  await nats?.dispose();
});

async function scrape(server: HttpServer): Promise<Map<string, Family>> {
  const r = await req(server, 'GET', '/metrics');
  expect(r.status).toBe(200);
  return parseMetrics(r.text);
}

/** Each sample of a `worker`-labelled family, as worker id -> value. */
const byWorker = (families: Map<string, Family>, name: string): Record<string, number> =>
  Object.fromEntries((families.get(name)?.metrics ?? []).map((m) => [m.labels?.worker ?? '?', Number(m.value)]));

describe('workers on /metrics', () => {
  it('shows each live worker’s capacity and running children by its id; a lost one’s series go, counted once', async () => {
    const server = await startHttp(['--nats', nats.url, '--log-level', 'info', '--worker-loss-ms', '600']);
    const one = await startWorker(nats.url, ['--max-children', '3', '--worker-heartbeat-ms', '100']);
    const two = await startWorker(nats.url, ['--max-children', '2', '--worker-heartbeat-ms', '100']);
    // The control plane says when it first hears each worker (its log on stderr): no sleep.
    for (let i = 0; i < 2; i++) await server.proc.stderr.take((l) => l.includes('worker joined'), 15_000, 'a worker joined line');
    let m = await scrape(server);
    expect(m.get('subrun_worker_capacity')?.type).toBe('GAUGE');
    expect(byWorker(m, 'subrun_worker_capacity')).toEqual({ [one.id]: 3, [two.id]: 2 });
    expect(byWorker(m, 'subrun_worker_children')).toEqual({ [one.id]: 0, [two.id]: 0 });
    expect(valueOf(m, 'subrun_workers_lost_total')).toBe(0);
    for (const f of ['subrun_worker_capacity', 'subrun_worker_children'])
      for (const s of m.get(f)?.metrics ?? []) expect(Object.keys(s.labels ?? {})).toEqual(['worker']);

    const { peer } = await connectWs(server);
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks: [scriptedTask('hangs', [{ op: 'hang' }])] });
    const id = subagent_ids[0]!;
    await nextEvent(peer, (e) => e.type === 'subagent.start' && e.payload.subagent_id === id);
    m = await scrape(server);
    const children = byWorker(m, 'subrun_worker_children');
    expect(Object.values(children).sort()).toEqual([0, 1]);
    const holder = children[one.id] === 1 ? one : two;
    const other = holder === one ? two : one;

    // The worker holding the child dies: its series go, the loss counts, the other stays.
    await holder.proc.kill();
    const complete = await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === id, 15_000);
    expect(complete.payload.exit_reason).toBe('worker_lost');
    m = await scrape(server);
    expect(byWorker(m, 'subrun_worker_capacity')).toEqual({ [other.id]: other === one ? 3 : 2 });
    expect(byWorker(m, 'subrun_worker_children')).toEqual({ [other.id]: 0 });
    expect(valueOf(m, 'subrun_workers_lost_total')).toBe(1);
  });
});
