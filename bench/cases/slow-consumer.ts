// Case 8, slow consumer: one WebSocket client that never reads, attached to a session whose
// events keep flowing. The server must drop it once its unsent bytes are over the documented bound
// (`--max-outbound-bytes`, default 8 MiB) and it drained nothing for a check interval, or at once
// past the ceiling (4x the bound: src/server/backlog.ts), and its memory must stay flat: no growth
// after the drop, and no more growth during the run than the same flow causes with no slow client
// (a control run on a fresh server).
//
// The flow: a healthy client attached to the same session steers 10 children parked in
// `wait_steer` with 32 KiB texts, 4 in flight; every delivery is a `subagent.steer.delivered`
// event carrying the text to every transport in the session's slot, the slow one included. Server
// memory is the server process's RSS, sampled from /proc every 50 ms. The drop is read from the
// server's own warning on stderr (which carries `buffered`, the bytes it held for that peer).
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import type { RpcClient, ServerProcess } from '../lib/rpc.ts';
import { row, type Row } from '../lib/stats.ts';
import { connectWs, sessionWithChildren, subrunWs } from '../lib/subrun.ts';
import { CEILING_FACTOR } from '../../src/server/backlog.ts';

const MiB = 2 ** 20;
const BOUND = 8 * MiB;
const STEER = 'x'.repeat(32 * 1024 - 16);

interface FlowRun {
  readonly baseRss: number;
  readonly peakRss: number;
  readonly dropRss: number;
  readonly endRss: number;
  readonly dropMs: number | null;
  readonly buffered: number | null;
  readonly bytesAtDrop: number | null;
  readonly bytes: number;
  readonly secs: number;
}

async function flow(withSlow: boolean, flowMs: number, afterDropMs: number, log: (m: string) => void): Promise<FlowRun> {
  const procs: ServerProcess[] = [];
  const clients: RpcClient[] = [];
  try {
    const sub = await subrunWs(['--max-concurrent-children', '16', '--log-level', 'warn']);
    procs.push(sub.proc);
    const healthy = await connectWs(sub.url);
    clients.push(healthy);
    let bytes = 0;
    // Event bytes only (the same frames the slow client is sent), not the replies to the steers.
    const EVENT = Buffer.from('{"jsonrpc":"2.0","method":"event"');
    healthy.ws.on('message', (d: Buffer) => {
      if (d.subarray(0, EVENT.length).equals(EVENT)) bytes += d.length;
    });
    const steps = Array.from({ length: 2000 }, () => ({ op: 'wait_steer' }));
    const { session_id, session_key, ids } = await sessionWithChildren(healthy, 10, steps);
    if (withSlow) {
      const slow = await connectWs(sub.url);
      clients.push(slow);
      await slow.call('session.attach', { session_id, session_key });
      // From here on it never reads: its socket is paused, the kernel buffers fill, then the
      // server's queue for it grows until the bound.
      slow.ws.pause();
    }
    const samples: Array<{ t: number; rss: number }> = [];
    const t0 = performance.now();
    const baseRss = sub.proc.rss();
    const sampler = setInterval(() => samples.push({ t: performance.now() - t0, rss: sub.proc.rss() }), 50);
    let dropMs: number | null = null;
    let bytesAtDrop: number | null = null;
    let buffered: number | null = null;
    let end = t0 + flowMs;
    const watcher = setInterval(() => {
      if (dropMs !== null || !withSlow) return;
      const m = /"buffered":(\d+)[^\n]*dropping a WebSocket peer/.exec(sub.proc.stderr());
      if (m) {
        dropMs = performance.now() - t0;
        bytesAtDrop = bytes;
        buffered = Number(m[1]);
        // Keep the flow going for a while after the drop: memory must stay flat.
        end = Math.min(end, performance.now() + afterDropMs);
      }
    }, 10);
    let n = 0;
    const steerer = async () => {
      while (performance.now() < end) {
        const subagent_id = ids[n++ % ids.length] as string;
        await healthy.call('subagent.steer', { session_id, subagent_id, text: `${n} ${STEER}` });
      }
    };
    await Promise.all([steerer(), steerer(), steerer(), steerer()]);
    const secs = (performance.now() - t0) / 1000;
    clearInterval(sampler);
    clearInterval(watcher);
    samples.push({ t: performance.now() - t0, rss: sub.proc.rss() });
    const peakRss = Math.max(...samples.map((s) => s.rss));
    const dropAt = dropMs ?? 0;
    const atDrop = samples.filter((s) => s.t <= dropAt).pop()?.rss ?? baseRss;
    const endRss = Math.max(...samples.filter((s) => s.t >= (dropMs ?? 0) + (secs * 1000 - (dropMs ?? 0)) / 2).map((s) => s.rss));
    log(
      `slow-consumer: ${withSlow ? 'with' : 'without'} a slow client: ${(bytes / MiB).toFixed(0)} MiB of events to the healthy client in ${secs.toFixed(1)} s; ` +
        `RSS ${(baseRss / MiB).toFixed(0)} -> peak ${(peakRss / MiB).toFixed(0)} -> end ${(endRss / MiB).toFixed(0)} MiB` +
        (withSlow
          ? dropMs === null
            ? '; NOT DROPPED'
            : `; dropped after ${dropAt.toFixed(0)} ms, ${((bytesAtDrop ?? 0) / MiB).toFixed(1)} MiB flowed, buffered ${((buffered ?? 0) / MiB).toFixed(2)} MiB`
          : ''),
    );
    return { baseRss, peakRss, dropRss: atDrop, endRss, dropMs, buffered, bytesAtDrop, bytes, secs };
  } finally {
    for (const c of clients) await c.close();
    for (const p of procs) await p.stop();
  }
}

export const slowConsumerCase: BenchCase = {
  name: 'slow-consumer',
  title: 'Slow consumer: a WebSocket client that never reads is dropped (stalled over the bound, or past the ceiling); server memory stays flat',
  async run(opts: CaseOptions): Promise<Row[]> {
    // Even the tiny flow outlasts two check intervals (src/server/backlog.ts): a stalled peer is judged by time.
    const flowMs = bySize(opts.mode, { full: 15_000, quick: 8000, tiny: 6000 });
    const afterDropMs = bySize(opts.mode, { full: 5000, quick: 2500, tiny: 300 });
    const control = await flow(false, bySize(opts.mode, { full: 6000, quick: 3000, tiny: 300 }), 0, opts.log);
    const test = await flow(true, flowMs, afterDropMs, opts.log);
    const frame = STEER.length + 1024;
    const dropped = test.dropMs !== null && test.buffered !== null;
    const withinBound = dropped && test.buffered <= CEILING_FACTOR * BOUND + frame;
    const growth = test.peakRss - test.baseRss;
    const controlGrowth = control.peakRss - control.baseRss;
    const afterDrop = test.endRss - test.dropRss;
    // Flat: after the drop it grows by less than one bound more, and over the run by no more than
    // the control's growth plus the ceiling the slow peer may legitimately hold.
    const flat = dropped && afterDrop <= BOUND && growth <= controlGrowth + (CEILING_FACTOR + 1) * BOUND;
    return [
      row({
        case: 'slow.buffered_at_drop',
        figure: (test.buffered ?? Number.NaN) / MiB,
        unit: 'MiB',
        baseline: BOUND / MiB,
        baseline_unit: 'MiB (--max-outbound-bytes)',
        goal: 'dropped, <= ceiling (4x bound) + 1 frame',
        pass: withinBound,
        note: dropped
          ? `dropped ${test.dropMs.toFixed(0)} ms into the flow, after ${((test.bytesAtDrop ?? 0) / MiB).toFixed(1)} MiB of events (the rest sat in kernel socket buffers)`
          : 'never dropped',
      }),
      row({
        case: 'slow.server_rss_growth',
        figure: growth / MiB,
        unit: 'MiB',
        baseline: controlGrowth / MiB,
        baseline_unit: 'MiB (same flow, no slow client)',
        goal: 'flat',
        pass: flat,
        note: `RSS ${(test.baseRss / MiB).toFixed(0)} MiB at the start; +${(afterDrop / MiB).toFixed(1)} MiB from the drop to the end; ${(test.bytes / MiB).toFixed(0)} MiB of events in ${test.secs.toFixed(1)} s`,
      }),
    ];
  },
};
