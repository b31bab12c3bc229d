// Case 7, steer under load: 1,000 live children streaming output (a `say` and a 100 ms `tool`
// step, over and over: two events per child per 100 ms, about 20,000 events/s) while 20 WebSocket
// clients steer them, each its own session of 50 children, one steer at a time, as fast as the
// replies come. Figures: the p50/p99 steer round trip under that load, against the same clients
// steering 1,000 quiet children (parked in `hang`, no output) just before, on the same server.
//
// The check: every steer the server answered `queued` ends exactly one way, delivered (a
// `subagent.steer.delivered` event with its steer_id) or missed (its text in the child's
// completion entry's `missed_steer`), never both, never twice, never neither; and no rejected
// steer shows up anywhere. About one child in ten finishes on its own mid-run, with a sleep before
// `finish`, so steers race completion; the rest are interrupted at the end, so steers race the
// interrupt. The server is its own process; the clients share this one.
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import type { RpcClient, ServerProcess } from '../lib/rpc.ts';
import { percentile, row, type Row } from '../lib/stats.ts';
import { connectWs, sessionWithChildren, subrunWs } from '../lib/subrun.ts';

const CLIENTS = 20;
const TOOL_MS = 100;
const SAY = 'step done: tests pass, moving on to the next file';

interface Tracker {
  readonly queued: Map<string, { subagent_id: string; text: string }>;
  readonly rejectedTexts: Set<string>;
  readonly delivered: Map<string, number>;
  /** steer text -> times it appeared in a missed_steer */
  readonly missed: Map<string, number>;
  readonly completed: Map<string, number>;
  events: number;
  queueFull: number;
  errors: number;
}

function tracker(): Tracker {
  return { queued: new Map(), rejectedTexts: new Set(), delivered: new Map(), missed: new Map(), completed: new Map(), events: 0, queueFull: 0, errors: 0 };
}

function watch(client: RpcClient, t: Tracker): void {
  client.onNotify = (m) => {
    if (m.method !== 'event') return;
    t.events++;
    const e = m.params as { type: string; payload: Record<string, unknown> };
    if (e.type === 'subagent.steer.delivered') {
      const id = e.payload.steer_id as string;
      t.delivered.set(id, (t.delivered.get(id) ?? 0) + 1);
    } else if (e.type === 'subagent.complete') {
      // The wire's completion is flat (the entry's fields in the payload, hermes' names).
      const entry = e.payload as { subagent_id: string; missed_steer?: string };
      t.completed.set(entry.subagent_id, (t.completed.get(entry.subagent_id) ?? 0) + 1);
      if (entry.missed_steer) for (const text of entry.missed_steer.split('\n')) t.missed.set(text, (t.missed.get(text) ?? 0) + 1);
    }
  };
}

/** Steers random children of `ids` one at a time until `until`; returns round trips in µs. */
async function steerLoop(
  client: RpcClient,
  session_id: string,
  ids: readonly string[],
  tag: string,
  t: Tracker,
  untilMs: number,
  maxSteers: number,
): Promise<number[]> {
  const lat: number[] = [];
  let n = 0;
  while (performance.now() < untilMs && n < maxSteers) {
    const subagent_id = ids[Math.floor(Math.random() * ids.length)] as string;
    const text = `steer ${tag}-${n++}`;
    const t0 = performance.now();
    try {
      const r = (await client.call('subagent.steer', { session_id, subagent_id, text })) as { status: string; steer_id?: string };
      lat.push((performance.now() - t0) * 1000);
      if (r.status === 'queued' && r.steer_id) t.queued.set(r.steer_id, { subagent_id, text });
      else t.rejectedTexts.add(text);
    } catch (err) {
      lat.push((performance.now() - t0) * 1000);
      if ((err as { code?: number }).code === 4005) t.queueFull++;
      else t.errors++;
    }
  }
  return lat;
}

/** Interrupts every child still live, then waits for every child's entry. */
async function settle(client: RpcClient, session_id: string, ids: readonly string[], t: Tracker, timeoutMs: number): Promise<void> {
  for (const subagent_id of ids) await client.call('subagent.interrupt', { session_id, subagent_id });
  const deadline = Date.now() + timeoutMs;
  while (ids.some((id) => !t.completed.has(id))) {
    if (Date.now() > deadline) throw new Error(`${ids.filter((id) => !t.completed.has(id)).length} children never completed`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface Conservation {
  readonly ok: boolean;
  readonly queued: number;
  readonly delivered: number;
  readonly missed: number;
  readonly problems: string[];
}

/** Every queued steer exactly once delivered or missed; nothing else delivered or missed. */
export function conservation(trackers: readonly Tracker[]): Conservation {
  const problems: string[] = [];
  let queued = 0;
  let delivered = 0;
  let missed = 0;
  for (const t of trackers) {
    const knownIds = new Set(t.queued.keys());
    const knownTexts = new Set([...t.queued.values()].map((q) => q.text));
    for (const [steer_id, { text }] of t.queued) {
      queued++;
      const d = t.delivered.get(steer_id) ?? 0;
      const m = t.missed.get(text) ?? 0;
      delivered += d;
      missed += m;
      if (d + m !== 1) problems.push(`${steer_id} (${text}): delivered ${d}, missed ${m}`);
    }
    for (const id of t.delivered.keys()) if (!knownIds.has(id)) problems.push(`delivered a steer never queued: ${id}`);
    for (const text of t.missed.keys()) if (!knownTexts.has(text)) problems.push(`missed a steer never queued: ${text}`);
    for (const text of t.rejectedTexts) if (t.missed.has(text)) problems.push(`a rejected steer came back as missed: ${text}`);
    for (const [id, count] of t.completed) if (count !== 1) problems.push(`${id} completed ${count} times`);
  }
  return { ok: problems.length === 0, queued, delivered, missed, problems: problems.slice(0, 10) };
}

function streamingSteps(rounds: number, finishes: boolean): unknown[] {
  const steps: unknown[] = [];
  for (let i = 0; i < rounds; i++) steps.push({ op: 'say', text: SAY }, { op: 'tool', name: 'step', ms: TOOL_MS });
  // A child that finishes on its own sleeps first: a steer queued then is missed, not delivered.
  if (finishes) steps.push({ op: 'sleep', ms: 50 }, { op: 'finish', summary: 'done' });
  else steps.push({ op: 'hang' });
  return steps;
}

export const steerLoadCase: BenchCase = {
  name: 'steer-load',
  title: 'Steer under load: 20 WebSocket clients steering 1,000 streaming children; p99 and conservation',
  async run(opts: CaseOptions): Promise<Row[]> {
    const perClient = bySize(opts.mode, { full: 50, quick: 50, tiny: 3 });
    const clientsN = bySize(opts.mode, { full: CLIENTS, quick: CLIENTS, tiny: 2 });
    const quietMs = bySize(opts.mode, { full: 3000, quick: 1500, tiny: 200 });
    const loadMs = bySize(opts.mode, { full: 8000, quick: 3000, tiny: 300 });
    const maxSteers = 100_000;
    const procs: ServerProcess[] = [];
    const clients: RpcClient[] = [];
    try {
      const sub = await subrunWs(['--max-concurrent-children', String(Math.max(64, perClient))]);
      procs.push(sub.proc);
      for (let i = 0; i < clientsN; i++) clients.push(await connectWs(sub.url));
      const trackers = clients.map(() => tracker());
      clients.forEach((c, i) => watch(c, trackers[i] as Tracker));

      // Phase 1: quiet children.
      const quiet = await Promise.all(clients.map((c) => sessionWithChildren(c, perClient, [{ op: 'hang' }])));
      let until = performance.now() + quietMs;
      const quietLat = (
        await Promise.all(
          clients.map((c, i) => steerLoop(c, quiet[i]?.session_id as string, quiet[i]?.ids as string[], `q${i}`, trackers[i] as Tracker, until, maxSteers)),
        )
      ).flat();
      await Promise.all(clients.map((c, i) => settle(c, quiet[i]?.session_id as string, quiet[i]?.ids as string[], trackers[i] as Tracker, 30_000)));
      opts.log(`steer-load: quiet: ${quietLat.length} steers, p50 ${percentile(quietLat, 50).toFixed(0)} µs, p99 ${percentile(quietLat, 99).toFixed(0)} µs`);

      // Phase 2: streaming children (about one in ten finishes on its own mid-run).
      const lifeRounds = Math.ceil((loadMs + 10_000) / TOOL_MS);
      const loaded: Array<{ session_id: string; ids: string[] }> = [];
      for (const c of clients) {
        const s = (await c.call('session.create', { title: 'load' })) as { session_id: string };
        const ids: string[] = [];
        for (let done = 0; done < perClient;) {
          const size = Math.min(25, perClient - done);
          const tasks = Array.from({ length: size }, (_, j) => {
            const finishes = (done + j) % 10 === 9;
            const rounds = finishes ? 3 + Math.floor(Math.random() * Math.max(1, loadMs / TOOL_MS)) : lifeRounds;
            return { goal: `stream ${done + j}`, agent: { kind: 'scripted', steps: streamingSteps(rounds, finishes) } };
          });
          const r = (await c.call('delegation.spawn', { session_id: s.session_id, tasks })) as { subagent_ids: string[] };
          ids.push(...r.subagent_ids);
          done += size;
        }
        loaded.push({ session_id: s.session_id, ids });
      }
      const eventsBefore = trackers.reduce((n, t) => n + t.events, 0);
      // Let every child get going before measuring.
      await new Promise((r) => setTimeout(r, 2 * TOOL_MS));
      const t0 = performance.now();
      until = t0 + loadMs;
      const rssBefore = sub.proc.rss();
      const loadLat = (
        await Promise.all(
          clients.map((c, i) => steerLoop(c, loaded[i]?.session_id as string, loaded[i]?.ids as string[], `l${i}`, trackers[i] as Tracker, until, maxSteers)),
        )
      ).flat();
      const secs = (performance.now() - t0) / 1000;
      const events = trackers.reduce((n, t) => n + t.events, 0) - eventsBefore;
      const rssAfter = sub.proc.rss();
      await Promise.all(clients.map((c, i) => settle(c, loaded[i]?.session_id as string, loaded[i]?.ids as string[], trackers[i] as Tracker, 60_000)));
      opts.log(
        `steer-load: load: ${loadLat.length} steers in ${secs.toFixed(1)} s, ${(events / secs).toFixed(0)} events/s to the clients, ` +
          `p50 ${percentile(loadLat, 50).toFixed(0)} µs, p99 ${percentile(loadLat, 99).toFixed(0)} µs; server RSS ${(rssBefore / 2 ** 20).toFixed(0)} -> ${(rssAfter / 2 ** 20).toFixed(0)} MiB`,
      );

      const c = conservation(trackers);
      const queueFull = trackers.reduce((n, t) => n + t.queueFull, 0);
      const errors = trackers.reduce((n, t) => n + t.errors, 0);
      const rejected = trackers.reduce((n, t) => n + t.rejectedTexts.size, 0);
      opts.log(
        `steer-load: conservation ${c.ok ? 'holds' : 'BROKEN'}: ${c.queued} queued = ${c.delivered} delivered + ${c.missed} missed; ${rejected} rejected, ${queueFull} queue full, ${errors} errors`,
      );
      for (const p of c.problems) opts.log(`steer-load:   ${p}`);
      const ok = c.ok && errors === 0;
      return [
        row({
          case: 'steer.rtt_p99_under_load',
          figure: percentile(loadLat, 99),
          unit: 'µs',
          baseline: percentile(quietLat, 99),
          baseline_unit: 'µs (quiet children)',
          goal: 'conservation holds',
          pass: ok,
          note: `${clientsN} clients, ${clientsN * perClient} children, ${(events / secs).toFixed(0)} events/s, ${loadLat.length} steers`,
        }),
        row({
          case: 'steer.rtt_p50_under_load',
          figure: percentile(loadLat, 50),
          unit: 'µs',
          baseline: percentile(quietLat, 50),
          baseline_unit: 'µs (quiet children)',
        }),
        row({
          case: 'steer.conservation',
          figure: c.queued,
          unit: 'steers queued',
          goal: 'each delivered xor missed',
          pass: ok,
          note: `${c.delivered} delivered + ${c.missed} missed; ${rejected} rejected (no trace), ${queueFull} refused as queue full, ${errors} errors`,
        }),
      ];
    } finally {
      for (const cl of clients) await cl.close();
      for (const p of procs) await p.stop();
    }
  },
};
