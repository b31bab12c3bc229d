// Case 11, the HTTP API (docs/http.md), against a bare node:http server (bench/servers/http-bare.ts)
// in its own process, all on 127.0.0.1:
// - SSE throughput: S streams (50) of one session while its children emit E events; events
//   delivered per second over all streams (enough streams that the figure is the transport's, not
//   the runtime's cost of making each event once), against the bare server writing the very same bytes (subrun's,
//   captured from the first round) to S streams (goal >= 0.8x). Rounds interleaved, medians.
// - steer round trip: sequential `POST .../steer` (keep-alive) to a child that holds its steers,
//   p50 against the bare server answering the same 202 JSON (goal <= 1.5x).
// - 1,000 idle SSE subscribers: the server's RSS they add, per subscriber, against the bare
//   server's for 1,000 idle streams.
import { writeFileSync, mkdtempSync } from 'node:fs';
import { once } from 'node:events';
import { Agent, request, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { sequential, startProcess, type ServerProcess } from '../lib/rpc.ts';
import { median, row, type Row } from '../lib/stats.ts';
import { BENCH_TOKEN, subrunWs } from '../lib/subrun.ts';

interface Sizes {
  readonly streams: number;
  readonly children: number;
  readonly says: number;
  readonly rounds: number;
  readonly steers: number;
  readonly idle: number;
}

const SIZES = {
  full: { streams: 50, children: 10, says: 300, rounds: 5, steers: 3000, idle: 1000 },
  quick: { streams: 50, children: 10, says: 100, rounds: 3, steers: 1000, idle: 1000 },
  tiny: { streams: 2, children: 2, says: 5, rounds: 1, steers: 20, idle: 20 },
} as const satisfies Record<string, Sizes>;

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function post(port: number, path: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const r = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: { Authorization: `Bearer ${BENCH_TOKEN}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    r.on('error', reject);
    r.end(body);
  });
}

/** An open event stream that counts what it receives and can wait for a marker or a byte count. */
interface Watch {
  readonly res: IncomingMessage;
  bytes: number;
  /** `session.idle` frames seen so far. */
  idles: number;
  text: string | undefined;
  waitFor(pred: () => boolean): Promise<void>;
  close(): void;
}

async function watch(port: number, path: string, keep = false): Promise<Watch> {
  const r = request({ host: '127.0.0.1', port, path, headers: { Authorization: `Bearer ${BENCH_TOKEN}` } });
  r.end();
  const [res] = (await once(r, 'response')) as [IncomingMessage];
  res.setEncoding('utf8');
  const waiters: Array<{ pred: () => boolean; done: () => void }> = [];
  const w: Watch = {
    res,
    bytes: 0,
    idles: 0,
    text: keep ? '' : undefined,
    waitFor: (pred) => (pred() ? Promise.resolve() : new Promise((done) => waiters.push({ pred, done }))),
    close: () => r.destroy(),
  };
  let carry = '';
  const MARK = 'event: session.idle\n';
  const count = (t: string) => t.split(MARK).length - 1;
  res.on('data', (c: string) => {
    w.bytes += Buffer.byteLength(c);
    if (w.text !== undefined) w.text += c;
    w.idles += count(carry + c) - count(carry);
    carry = (carry + c).slice(-64);
    (w as { last?: string }).last = carry;
    for (let i = waiters.length - 1; i >= 0; i--) {
      const x = waiters[i] as { pred: () => boolean; done: () => void };
      if (x.pred()) {
        waiters.splice(i, 1);
        x.done();
      }
    }
  });
  return w;
}

const lastOf = (w: Watch) => (w as { last?: string }).last ?? '';

async function bare(env: Record<string, string>): Promise<{ proc: ServerProcess; port: number }> {
  const proc = startProcess(['--import', 'tsx', 'bench/servers/http-bare.ts'], env);
  const stdout = proc.child.stdout;
  if (!stdout) throw new Error('no stdout');
  stdout.setEncoding('utf8');
  const [first] = (await once(stdout, 'data')) as [string];
  const port = Number(/listening (\d+)/.exec(first)?.[1]);
  if (!port) throw new Error(`http-bare did not say its port: ${first}`);
  return { proc, port };
}

export const httpCase: BenchCase = {
  name: 'http',
  title: 'HTTP API: SSE throughput and steer round trip vs bare node:http; 1,000 idle SSE subscribers',
  async run(opts: CaseOptions): Promise<Row[]> {
    const z = bySize<Sizes>(opts.mode, SIZES);
    const procs: ServerProcess[] = [];
    const watches: Watch[] = [];
    try {
      const sub = await subrunWs([
        '--max-concurrent-children',
        String(Math.max(16, z.children)),
        '--max-queued-steers',
        '100000',
        '--max-queued-steer-bytes',
        String(64 * 1024 * 1024),
      ]);
      procs.push(sub.proc);
      const port = Number(new URL(sub.url).port);
      const s = JSON.parse((await post(port, '/v1/sessions', '{}')).text) as { session_id: string; session_key: string };
      const key = { 'X-Subrun-Session-Key': s.session_key };
      const eventsPath = `/v1/sessions/${s.session_id}/events?session_key=${encodeURIComponent(s.session_key)}`;

      // ---- SSE throughput ----
      const streams: Watch[] = [];
      for (let i = 0; i < z.streams; i++) streams.push(await watch(port, eventsPath, i === 0));
      watches.push(...streams);
      await Promise.all(streams.map((w) => w.waitFor(() => lastOf(w).endsWith('}\n\n'))));
      const tasks = JSON.stringify({
        tasks: Array.from({ length: z.children }, (_, i) => ({
          goal: `c${i}`,
          agent: { kind: 'scripted', steps: Array.from({ length: z.says }, (_, j) => ({ op: 'say', text: `line ${j} of child ${i}` })) },
        })),
      });
      const subrunRound = async (): Promise<{ rate: number; frames: string }> => {
        const first = streams[0] as Watch;
        const from = first.text?.length ?? 0;
        const idles = streams.map((w) => w.idles);
        const t = performance.now();
        const r = await post(port, `/v1/sessions/${s.session_id}/delegations`, tasks, key);
        if (r.status !== 202) throw new Error(`spawn: ${r.status} ${r.text}`);
        // The idle frame is the round's last; its data line follows the marker.
        await Promise.all(streams.map((w, i) => w.waitFor(() => w.idles > (idles[i] as number) && lastOf(w).endsWith('}}\n\n'))));
        const ms = performance.now() - t;
        const frames = (first.text ?? '').slice(from);
        const count = (frames.match(/^id: /gm) ?? []).length;
        if (first.text !== undefined) first.text = '';
        return { rate: (count * z.streams) / (ms / 1000), frames };
      };
      const warm = await subrunRound();
      const dir = mkdtempSync(join(tmpdir(), 'subrun-bench-http-'));
      const framesFile = join(dir, 'frames.txt');
      writeFileSync(framesFile, warm.frames);
      const frameCount = (warm.frames.match(/^id: /gm) ?? []).length;
      opts.log(`http: ${frameCount} events a round, ${Buffer.byteLength(warm.frames)} bytes, to ${z.streams} streams`);

      const steerResult = JSON.stringify({ status: 'queued', subagent_id: 'sa_0123456789ab', text: 'steer text', steer_id: 'st_0123456789ab' });
      const b = await bare({ BENCH_FRAMES_FILE: framesFile, BENCH_RESULT: steerResult });
      procs.push(b.proc);
      const bareStreams: Watch[] = [];
      for (let i = 0; i < z.streams; i++) bareStreams.push(await watch(b.port, '/events'));
      watches.push(...bareStreams);
      await Promise.all(bareStreams.map((w) => w.waitFor(() => w.bytes > 0)));
      const total = Buffer.byteLength(warm.frames);
      const bareRound = async (): Promise<number> => {
        const marks = bareStreams.map((w) => w.bytes);
        const t = performance.now();
        await post(b.port, '/fire', '{}');
        await Promise.all(bareStreams.map((w, i) => w.waitFor(() => w.bytes - (marks[i] as number) >= total)));
        return (frameCount * z.streams) / ((performance.now() - t) / 1000);
      };
      const subRates: number[] = [];
      const bareRates: number[] = [];
      for (let i = 0; i < z.rounds; i++) {
        subRates.push((await subrunRound()).rate);
        bareRates.push(await bareRound());
      }
      for (const w of [...streams, ...bareStreams]) w.close();

      // ---- steer round trip ----
      const hold = JSON.stringify({ tasks: [{ goal: 'holds its steers', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } }] });
      const d = JSON.parse((await post(port, `/v1/sessions/${s.session_id}/delegations`, hold, key)).text) as { subagent_ids: string[] };
      const steerPath = `/v1/sessions/${s.session_id}/subagents/${d.subagent_ids[0]}/steer`;
      const steerBody = JSON.stringify({ text: 'steer text' });
      const check = await post(port, steerPath, steerBody, key);
      if (check.status !== 202 || check.text.length !== steerResult.length) throw new Error(`steer: ${check.status} ${check.text}`);
      const subLat: number[] = [];
      const bareLat: number[] = [];
      const slice = Math.max(1, Math.floor(z.steers / 5));
      for (let i = 0; i < 5; i++) {
        subLat.push(...(await sequential(() => post(port, steerPath, steerBody, key), slice, 60_000)).latencies);
        bareLat.push(...(await sequential(() => post(b.port, '/steer', steerBody), slice, 60_000)).latencies);
      }

      // ---- idle subscribers ----
      const idle = async (p: number, path: string, proc: ServerProcess): Promise<number> => {
        const before = proc.rss();
        const ws: Watch[] = [];
        for (let i = 0; i < z.idle; i++) ws.push(await watch(p, path));
        await Promise.all(ws.map((w) => w.waitFor(() => w.bytes > 0)));
        await new Promise((r) => setTimeout(r, 200));
        const after = proc.rss();
        for (const w of ws) w.close();
        return (after - before) / z.idle / 1024;
      };
      const subIdle = await idle(port, eventsPath, sub.proc);
      const bareIdle = await idle(b.port, '/events', b.proc);

      return [
        row({
          case: 'http.sse.events_per_s',
          figure: median(subRates),
          unit: 'events/s',
          baseline: median(bareRates),
          baseline_unit: 'events/s (bare node:http)',
          goal: '>= 0.8',
          note: `${z.streams} streams, ${frameCount} events a round`,
        }),
        row({
          case: 'http.steer.rtt_p50',
          figure: median(subLat),
          unit: 'µs',
          baseline: median(bareLat),
          baseline_unit: 'µs (bare node:http)',
          goal: '<= 1.5',
          note: 'sequential, keep-alive',
        }),
        row({
          case: 'http.sse.idle_kib_per_subscriber',
          figure: subIdle,
          unit: 'KiB RSS',
          baseline: bareIdle,
          baseline_unit: 'KiB RSS (bare node:http)',
          note: `${z.idle} idle streams`,
        }),
      ];
    } finally {
      for (const w of watches) w.close();
      agent.destroy();
      for (const p of procs) await p.stop();
    }
  },
};
