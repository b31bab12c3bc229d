// Case 11, the HTTP API (docs/http.md), against a bare node:http server (bench/servers/http-bare.ts)
// in its own process, all on 127.0.0.1, under load that outruns the server (issue 24):
// - SSE throughput to 1 and to 4 readers, each its own raw-TCP process (bench/servers/sse-reader.ts),
//   while a session's children emit E events a round; events delivered per second, against the
//   bare server writing the very same frames (subrun's bytes, captured from a warm round), one
//   write per frame, with node:http's default chunked framing; and (`.vs_unchunked_bare`) the same
//   bare writer close-delimited, as subrun's stream is. Server CPU per delivered event beside it,
//   and whether a reader was the bound.
// - steer under concurrency: Debian's `wrk` (one thread) at 1, 16 and 64 connections, round-robin
//   over 16 children that hold their steers, a fresh session each round; p50, p99 and steers/s
//   against the bare server answering the same 202 JSON, and server CPU per request; and against
//   a floor server (bench/servers/http-steer-floor.ts): node:http running the runtime's own steer
//   per request with none of subrun's HTTP layer, to tell what the runtime costs under this load
//   from what the HTTP layer does.
// - 1,000 idle SSE subscribers: the server's RSS they add, per subscriber, against the bare
//   server's for 1,000 idle streams.
// Rounds interleave subrun, bare (and the steer floor); figures are medians over rounds.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { type ServerProcess } from '../lib/rpc.ts';
import { startReaders } from '../lib/sse-readers.ts';
import { eventFloorUs, steerCostByDepthUs, steerFloorUs } from '../lib/floor.ts';
import { median, row, type Row } from '../lib/stats.ts';
import { BENCH_TOKEN, subrunWs } from '../lib/subrun.ts';
import { wrk, type WrkResult } from '../lib/wrk.ts';
import {
  bare,
  steerFloorServer,
  closeAgent,
  closeSession,
  idleKibPerSubscriber,
  openSession,
  post,
  spawnHolders,
  watch,
  type Session,
  type Watch,
} from './http-parts.ts';

interface Sizes {
  readonly children: number;
  readonly says: number;
  readonly rounds: number;
  readonly readers: readonly number[];
  readonly connections: readonly number[];
  readonly steerRounds: number;
  readonly steerSeconds: number;
  readonly idle: number;
  readonly steerFloorCalls: number;
  /** Steers queued per child before the deep window of the depth row, its window, its repetitions. */
  readonly deep: number;
  readonly depthWindow: number;
  readonly depthReps: number;
}

const SIZES = {
  full: {
    children: 10,
    says: 4000,
    rounds: 5,
    readers: [1, 4],
    connections: [1, 16, 64],
    steerRounds: 3,
    steerSeconds: 3,
    idle: 1000,
    steerFloorCalls: 50_000,
    deep: 4000,
    depthWindow: 500,
    depthReps: 5,
  },
  quick: {
    children: 10,
    says: 1500,
    rounds: 3,
    readers: [1, 4],
    connections: [1, 16, 64],
    steerRounds: 2,
    steerSeconds: 2,
    idle: 1000,
    steerFloorCalls: 20_000,
    deep: 4000,
    depthWindow: 500,
    depthReps: 3,
  },
  tiny: {
    children: 2,
    says: 5,
    rounds: 1,
    readers: [1],
    connections: [2],
    steerRounds: 1,
    steerSeconds: 1,
    idle: 20,
    steerFloorCalls: 200,
    deep: 20,
    depthWindow: 10,
    depthReps: 1,
  },
} as const satisfies Record<string, Sizes>;

/** A reader above this share of a core may be what bounds the figure. */
const CLIENT_BOUND = 0.8;
const HOLDERS = 16;

interface Round {
  readonly rate: number;
  /** Server CPU per delivered event, µs. */
  readonly cpuPerEvent: number;
  /** The busiest reader's share of a core. */
  readonly clientCore: number;
}

const bound = (core: number) =>
  core > CLIENT_BOUND ? `client-bound (a reader at ${(core * 100).toFixed(0)}% of a core)` : `server-bound (readers ≤ ${(core * 100).toFixed(0)}% of a core)`;

export const httpCase: BenchCase = {
  name: 'http',
  title: 'HTTP API under load: SSE to 1 and 4 reader processes, steer by wrk at 1/16/64 connections, vs bare node:http; idle SSE subscribers',
  async run(opts: CaseOptions): Promise<Row[]> {
    const z = bySize<Sizes>(opts.mode, SIZES);
    const procs: ServerProcess[] = [];
    const stops: Array<() => unknown> = [];
    const rows: Row[] = [];
    try {
      // --max-message-bytes: the full size's spawn (40,000 scripted steps) is past the default 1 MiB.
      const sub = await subrunWs([
        '--max-concurrent-children',
        '1024',
        '--max-queued-steers',
        '100000',
        '--max-queued-steer-bytes',
        String(256 * 1024 * 1024),
        '--max-message-bytes',
        String(16 * 1024 * 1024),
      ]);
      procs.push(sub.proc);
      const port = Number(new URL(sub.url).port);
      const tasks = JSON.stringify({
        tasks: Array.from({ length: z.children }, (_, i) => ({
          goal: `c${i}`,
          agent: { kind: 'scripted', steps: Array.from({ length: z.says }, (_, j) => ({ op: 'say', text: `line ${j} of child ${i}` })) },
        })),
      });

      // ---- idle subscribers: first, before any load has grown either heap ----
      const idleSession = await openSession(port);
      const subIdle = await idleKibPerSubscriber(port, idleSession.eventsPath, sub.proc, z.idle);
      const idleBare = await bare({});
      procs.push(idleBare.proc);
      const bareIdle = await idleKibPerSubscriber(idleBare.port, '/events', idleBare.proc, z.idle);
      await idleBare.proc.stop();
      rows.push(
        row({
          case: 'http.sse.idle_kib_per_subscriber',
          figure: subIdle,
          unit: 'KiB RSS',
          baseline: bareIdle,
          baseline_unit: 'KiB RSS (bare node:http)',
          note: `${z.idle} idle streams`,
        }),
      );
      // ---- SSE throughput: a warm round captures subrun's frames for the bare server ----
      const warmSession = await openSession(port);
      const capture: Watch = await watch(port, warmSession.eventsPath, true);
      stops.push(() => capture.close());
      await capture.waitFor(() => capture.bytes > 0);
      const fire = async (s: Session) => {
        const r = await post(port, `/v1/sessions/${s.id}/delegations`, tasks, s.keyHeader);
        if (r.status !== 202) throw new Error(`spawn: ${r.status} ${r.text}`);
      };
      await fire(warmSession);
      await capture.waitFor(() => capture.idles > 0 && (capture.text ?? '').endsWith('}}\n\n'));
      const frames = (capture.text ?? '').slice((capture.text ?? '').indexOf('id: '));
      capture.close();
      const frameCount = (frames.match(/^id: /gm) ?? []).length;
      const framesFile = join(mkdtempSync(join(tmpdir(), 'subrun-bench-http-')), 'frames.txt');
      writeFileSync(framesFile, frames);
      opts.log(`http: ${frameCount} events a round, ${Buffer.byteLength(frames)} bytes`);
      // The runtime's own cost per event (made and serialised once, no transport), in this process.
      const eventFloor = await eventFloorUs((JSON.parse(tasks) as { tasks: unknown[] }).tasks);
      const steerFloor = await steerFloorUs(HOLDERS, z.steerFloorCalls);
      opts.log(`http: floors: ${eventFloor.us.toFixed(2)} µs CPU per event, ${steerFloor.toFixed(2)} µs CPU per steer (in-process, no transport)`);
      // What a steer costs once its child holds as many queued steers as a round of this case leaves.
      const [shallow, deep] = (await steerCostByDepthUs(HOLDERS, [0, z.deep], z.depthWindow, z.depthReps)) as [number, number];
      rows.push(
        row({
          case: 'http.steer.floor_depth',
          figure: deep,
          unit: `µs CPU/steer at ${z.deep} queued per child`,
          baseline: shallow,
          baseline_unit: 'µs CPU/steer at none queued',
          goal: '<= 1.2',
          note: `in-process, the route's steer with the server's metrics on, ${HOLDERS} children, ${z.depthWindow} steers a child a window, median of ${z.depthReps}`,
        }),
      );

      const steerResult = JSON.stringify({ status: 'queued', subagent_id: 'sa_0123456789ab', text: 'steer text', steer_id: 'st_0123456789ab' });
      const b = await bare({ BENCH_FRAMES_FILE: framesFile, BENCH_RESULT: steerResult });
      procs.push(b.proc);
      const fl = await steerFloorServer();
      procs.push(fl.proc);
      const floorPaths = Array.from({ length: HOLDERS }, (_, i) => `/steer/${i}`);

      const measure = async (
        proc: ServerProcess,
        readers: { next(): Promise<{ frames: readonly number[]; cpu: readonly number[] }> },
        go: () => Promise<void>,
      ): Promise<Round> => {
        const cpu0 = proc.cpu();
        const t = performance.now();
        await go();
        const got = await readers.next();
        const secs = (performance.now() - t) / 1000;
        const delivered = got.frames.reduce((a, x) => a + x, 0);
        // Every reader sees every event of the round (the bare server's rounds are the captured ones).
        if (got.frames.some((f) => f !== got.frames[0])) throw new Error(`the readers got ${got.frames.join(',')} frames`);
        return { rate: delivered / secs, cpuPerEvent: (proc.cpu() - cpu0) / delivered, clientCore: Math.max(...got.cpu) / 1e6 / secs };
      };
      for (const n of z.readers) {
        const s = await openSession(port);
        const subReaders = await startReaders(n, port, s.eventsPath, BENCH_TOKEN);
        stops.push(() => subReaders.stop());
        const bareReaders = await startReaders(n, b.port, '/events', BENCH_TOKEN);
        stops.push(() => bareReaders.stop());
        const subRounds: Round[] = [];
        const bareRounds: Round[] = [];
        // Interleaved as the others, in its own rounds: the bare writer without chunk framing.
        const rawRounds: Round[] = [];
        const bareFire = async () => {
          await post(b.port, '/fire', '{}');
        };
        for (let i = 0; i < z.rounds; i++) {
          subRounds.push(await measure(sub.proc, subReaders, () => fire(s)));
          bareRounds.push(await measure(b.proc, bareReaders, bareFire));
        }
        await bareReaders.stop();
        const rawReaders = await startReaders(n, b.port, '/events?raw=1', BENCH_TOKEN);
        stops.push(() => rawReaders.stop());
        for (let i = 0; i < z.rounds; i++) {
          subRounds.push(await measure(sub.proc, subReaders, () => fire(s)));
          rawRounds.push(await measure(b.proc, rawReaders, bareFire));
        }
        await rawReaders.stop();
        await subReaders.stop();
        await closeSession(port, s);
        const m = (rs: Round[], k: keyof Round) => median(rs.map((r) => r[k]));
        rows.push(
          row({
            case: `http.sse.events_per_s@${n}reader${n > 1 ? 's' : ''}`,
            figure: m(subRounds, 'rate'),
            unit: 'events/s',
            baseline: m(bareRounds, 'rate'),
            baseline_unit: 'events/s (bare node:http)',
            goal: '>= 0.9',
            note:
              `${frameCount} events a round to ${n} reader process${n > 1 ? 'es' : ''}; server CPU ${m(subRounds, 'cpuPerEvent').toFixed(2)} µs per delivered event ` +
              `(bare ${m(bareRounds, 'cpuPerEvent').toFixed(2)}); subrun ${bound(m(subRounds, 'clientCore'))}, bare ${bound(m(bareRounds, 'clientCore'))}`,
          }),
        );
        rows.push(
          row({
            case: `http.sse.events_per_s@${n}reader${n > 1 ? 's' : ''}.vs_unchunked_bare`,
            figure: m(subRounds, 'rate'),
            unit: 'events/s',
            baseline: m(rawRounds, 'rate'),
            baseline_unit: 'events/s (bare node:http, close-delimited as subrun)',
            note: `the same frames without chunk framing; bare ${m(rawRounds, 'cpuPerEvent').toFixed(2)} µs per delivered event (chunked ${m(bareRounds, 'cpuPerEvent').toFixed(2)})`,
          }),
        );
        // The floor: the bare server's cost per delivered event plus the runtime's cost of making
        // the event (once for all n streams). At 1.0 the HTTP side adds nothing to the two.
        const floor = m(bareRounds, 'cpuPerEvent') + eventFloor.us / n;
        rows.push(
          row({
            case: `http.sse.cpu_over_floor@${n}reader${n > 1 ? 's' : ''}`,
            figure: m(subRounds, 'cpuPerEvent'),
            unit: 'µs CPU/event',
            baseline: floor,
            baseline_unit: 'µs CPU/event (bare + the runtime making it)',
            goal: '<= 1.2',
            note: `the throughput this floor allows: ${(m(bareRounds, 'cpuPerEvent') / floor).toFixed(2)}x bare; runtime floor ${eventFloor.us.toFixed(2)} µs/event in-process`,
          }),
        );
      }

      // ---- steer under concurrency (wrk) ----
      const body = JSON.stringify({ text: 'steer text' });
      const auth = { Authorization: `Bearer ${BENCH_TOKEN}`, 'Content-Type': 'application/json' };
      {
        // One round of each, unmeasured: the server's steer route warm before the first measured
        // round, as the bare server (a few lines) is at once (bench/cases/scale-out.ts measured
        // what a cold start costs a long-running server).
        const s = await openSession(port);
        const ids = await spawnHolders(port, s, HOLDERS);
        const warm = { connections: Math.max(...z.connections), seconds: z.steerSeconds, body };
        await wrk(port, { ...warm, paths: ids.map((id) => `/v1/sessions/${s.id}/subagents/${id}/steer`), headers: { ...auth, ...s.keyHeader } });
        await closeSession(port, s);
        await wrk(b.port, { ...warm, paths: ['/steer'], headers: auth });
        await wrk(fl.port, { ...warm, paths: floorPaths, headers: auth });
      }
      for (const c of z.connections) {
        const subR: Array<WrkResult & { cpu: number }> = [];
        const bareR: Array<WrkResult & { cpu: number }> = [];
        const floorR: Array<WrkResult & { cpu: number }> = [];
        const run = async (proc: ServerProcess, p: number, paths: string[], headers: Record<string, string>) => {
          const cpu0 = proc.cpu();
          const r = await wrk(p, {
            connections: c,
            seconds: z.steerSeconds,
            paths,
            headers: { ...auth, ...headers },
            body,
          });
          if (r.badStatus > 0 || r.socketErrors > 0) throw new Error(`wrk at ${c}: ${r.badStatus} bad answers, ${r.socketErrors} socket errors`);
          return { ...r, cpu: (proc.cpu() - cpu0) / r.requests };
        };
        for (let i = 0; i < z.steerRounds; i++) {
          const s = await openSession(port);
          const ids = await spawnHolders(port, s, HOLDERS);
          subR.push(
            await run(
              sub.proc,
              port,
              ids.map((id) => `/v1/sessions/${s.id}/subagents/${id}/steer`),
              s.keyHeader,
            ),
          );
          // Its children and their queued steers go: no round pays for the heap of the one before.
          await closeSession(port, s);
          bareR.push(await run(b.proc, b.port, ['/steer'], {}));
          // A fresh session with fresh holders, as subrun's round had.
          const reset = await post(fl.port, '/reset', '');
          if (reset.status !== 204) throw new Error(`the steer floor server's reset: ${reset.status} ${reset.text}`);
          floorR.push(await run(fl.proc, fl.port, floorPaths, {}));
        }
        const m = (rs: Array<WrkResult & { cpu: number }>, k: 'p50' | 'p99' | 'perSec' | 'cpu' | 'clientCore') => median(rs.map((r) => r[k]));
        const note = `wrk -t1 -c${c}, ${HOLDERS} children round-robin; p99 ${m(subR, 'p99')} µs (bare ${m(bareR, 'p99')}); server CPU ${m(subR, 'cpu').toFixed(1)} µs/request (bare ${m(bareR, 'cpu').toFixed(1)}); wrk at ${(m(subR, 'clientCore') * 100).toFixed(0)}% / ${(m(bareR, 'clientCore') * 100).toFixed(0)}% of a core`;
        rows.push(
          row({
            case: `http.steer.p50@${c}conn`,
            figure: m(subR, 'p50'),
            unit: 'µs',
            baseline: m(bareR, 'p50'),
            baseline_unit: 'µs (bare node:http)',
            goal: '<= 1.3',
            note,
          }),
        );
        rows.push(
          row({
            case: `http.steer.cpu_over_floor@${c}conn`,
            figure: m(subR, 'cpu'),
            unit: 'µs CPU/request',
            baseline: m(bareR, 'cpu') + steerFloor,
            baseline_unit: 'µs CPU/request (bare + the runtime steer)',
            goal: '<= 1.2',
            note: `runtime floor ${steerFloor.toFixed(2)} µs/steer in-process (session attach, the method, detach); the latency this floor allows: ${((m(bareR, 'cpu') + steerFloor) / m(bareR, 'cpu')).toFixed(2)}x bare's CPU`,
          }),
        );
        // The floor server against bare: how far the runtime's steer alone, run per request under
        // this load, keeps any HTTP server over it from bare; then subrun against that floor: what
        // the HTTP layer adds. No goal on either: they say which part a missed goal is in.
        const floorNote = `node:http + the runtime's steer, no HTTP layer of ours: server CPU ${m(floorR, 'cpu').toFixed(1)} µs/request (bare ${m(bareR, 'cpu').toFixed(1)}, subrun ${m(subR, 'cpu').toFixed(1)})`;
        rows.push(
          row({
            case: `http.steer.p50@${c}conn.runtime_floor`,
            figure: m(floorR, 'p50'),
            unit: 'µs',
            baseline: m(bareR, 'p50'),
            baseline_unit: 'µs (bare node:http)',
            note: floorNote,
          }),
        );
        rows.push(
          row({
            case: `http.steer.p50@${c}conn.vs_runtime_floor`,
            figure: m(subR, 'p50'),
            unit: 'µs',
            baseline: m(floorR, 'p50'),
            baseline_unit: 'µs (the steer floor server)',
            note: 'what the HTTP layer adds to the steer',
          }),
        );
        if (c === Math.max(...z.connections)) {
          rows.push(
            row({
              case: `http.steer.per_s@${c}conn`,
              figure: m(subR, 'perSec'),
              unit: 'steers/s',
              baseline: m(bareR, 'perSec'),
              baseline_unit: 'steers/s (bare node:http)',
              goal: '>= 0.75',
              note,
            }),
          );
          rows.push(
            row({
              case: `http.steer.per_s@${c}conn.runtime_floor`,
              figure: m(floorR, 'perSec'),
              unit: 'steers/s',
              baseline: m(bareR, 'perSec'),
              baseline_unit: 'steers/s (bare node:http)',
              note: floorNote,
            }),
          );
          rows.push(
            row({
              case: `http.steer.per_s@${c}conn.vs_runtime_floor`,
              figure: m(subR, 'perSec'),
              unit: 'steers/s',
              baseline: m(floorR, 'perSec'),
              baseline_unit: 'steers/s (the steer floor server)',
              note: 'what the HTTP layer costs in throughput',
            }),
          );
        }
      }

      return rows;
    } finally {
      for (const s of stops) await s();
      for (const p of procs) await p.stop();
      closeAgent();
    }
  },
};
