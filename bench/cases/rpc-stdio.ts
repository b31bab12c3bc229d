// Case 3, RPC over stdio: `subagent.list` on a session with 10 live children, pipelined (64 in
// flight) and as sequential round trips, against
//  - a bare newline-delimited JSON server (bench/servers/ndjson-bare.ts) that parses each request
//    and answers with a ready-made result of the same size as subrun's reply: the limit for this
//    transport and payload here (goal: subrun >= 0.6x its throughput), and
//  - a vscode-jsonrpc server (bench/servers/vscode-jsonrpc.ts) answering the same request with the
//    same result (goal: subrun >= 3x its throughput; issue 24 raised it from 2.5x).
// Every server is its own process, started from this one (the client). The rounds rotate which
// server goes first, and the figures are medians over rounds (latencies: percentiles over all
// round trips of all rounds).
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { lspClient, ndjsonClient, pipelined, sequential, startProcess, type PipelinedResult, type RpcClient, type ServerProcess } from '../lib/rpc.ts';
import { median, percentile, row, type Row } from '../lib/stats.ts';
import { sessionWithChildren, subrunStdio } from '../lib/subrun.ts';

const CHILDREN = 10;
const INFLIGHT = 64;

export interface Target {
  readonly name: string;
  readonly call: () => Promise<unknown>;
  /** Pipelined load with a lean client (see RpcClient.flood); `call` drives it when absent. */
  readonly flood?: (inflight: number, durationMs: number) => Promise<PipelinedResult & { readonly clientCoreShare?: number }>;
  /** The server process's CPU so far, µs: read around each pipelined run. */
  readonly cpu?: () => number;
}

export interface WireSizes {
  readonly rounds: number;
  readonly pipelinedMs: number;
  readonly sequentialCount: number;
  readonly sequentialMs: number;
  readonly warmupMs: number;
}

export const WIRE_SIZES = {
  full: { rounds: 5, pipelinedMs: 1200, sequentialCount: 2000, sequentialMs: 1500, warmupMs: 800 },
  quick: { rounds: 3, pipelinedMs: 500, sequentialCount: 600, sequentialMs: 600, warmupMs: 300 },
  tiny: { rounds: 1, pipelinedMs: 50, sequentialCount: 20, sequentialMs: 100, warmupMs: 20 },
} as const satisfies Record<string, WireSizes>;

export interface WireFigures {
  readonly ops: Map<string, number>;
  /** Server CPU per pipelined request, µs (median over rounds), for targets with `cpu`. */
  readonly cpuPerOp: Map<string, number>;
  /** The client's highest share of a core in any pipelined run (near 1: the figure is the client's). */
  readonly clientShare: Map<string, number>;
  readonly p50: Map<string, number>;
  readonly p99: Map<string, number>;
  readonly log: string[];
}

/** Warms every target up, then runs the rounds; returns medians and pooled percentiles. */
export async function measureTargets(targets: readonly Target[], sizes: WireSizes, log: (m: string) => void): Promise<WireFigures> {
  const load = (t: Target, ms: number): Promise<PipelinedResult & { readonly clientCoreShare?: number }> =>
    t.flood ? t.flood(INFLIGHT, ms) : pipelined(t.call, INFLIGHT, ms, 1e7);
  for (const t of targets) await load(t, sizes.warmupMs);
  const ops = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  const cpu = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  const share = new Map<string, number>();
  const lat = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  for (let r = 0; r < sizes.rounds; r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length] as Target);
    for (const t of order) {
      const cpu0 = t.cpu?.() ?? 0;
      const p = await load(t, sizes.pipelinedMs);
      if (t.cpu) cpu.get(t.name)?.push((t.cpu() - cpu0) / Math.max(1, p.completed));
      if (p.clientCoreShare !== undefined) share.set(t.name, Math.max(share.get(t.name) ?? 0, p.clientCoreShare));
      ops.get(t.name)?.push(p.opsPerSec);
      const s = await sequential(t.call, sizes.sequentialCount, sizes.sequentialMs);
      lat.get(t.name)?.push(...s.latencies);
    }
  }
  const out: WireFigures = { ops: new Map(), cpuPerOp: new Map(), clientShare: share, p50: new Map(), p99: new Map(), log: [] };
  for (const t of targets) {
    const o = ops.get(t.name) as number[];
    const l = lat.get(t.name) as number[];
    const c = cpu.get(t.name) as number[];
    out.ops.set(t.name, median(o));
    if (c.length > 0) out.cpuPerOp.set(t.name, median(c));
    out.p50.set(t.name, percentile(l, 50));
    out.p99.set(t.name, percentile(l, 99));
    const cpuNote = c.length > 0 ? `; server ${median(c).toFixed(1)} µs CPU/req` : '';
    const shareNote = share.has(t.name) ? `; client at most ${((share.get(t.name) ?? 0) * 100).toFixed(0)}% of a core` : '';
    log(
      `${t.name}: ${o.map((x) => x.toFixed(0)).join(' ')} req/s${cpuNote}${shareNote}; rtt p50 ${percentile(l, 50).toFixed(0)} µs p99 ${percentile(l, 99).toFixed(0)} µs (${l.length} round trips)`,
    );
  }
  return out;
}

function target(name: string, client: RpcClient, proc: ServerProcess, params: Record<string, unknown>): Target {
  const flood = client.flood;
  return {
    name,
    call: () => client.call('subagent.list', params),
    cpu: () => proc.cpu(),
    ...(flood ? { flood: (inflight: number, ms: number) => flood('subagent.list', params, inflight, ms) } : {}),
  };
}

export const rpcStdioCase: BenchCase = {
  name: 'rpc-stdio',
  title: 'RPC over stdio: pipelined and sequential subagent.list vs a bare NDJSON server and vscode-jsonrpc',
  async run(opts: CaseOptions): Promise<Row[]> {
    const sizes = bySize<WireSizes>(opts.mode, WIRE_SIZES);
    const procs: ServerProcess[] = [];
    const clients: RpcClient[] = [];
    try {
      const sub = await subrunStdio(['--max-concurrent-children', '16']);
      procs.push(sub.proc);
      clients.push(sub.client);
      const { session_id } = await sessionWithChildren(sub.client, CHILDREN);
      const params = { session_id };
      const result = await sub.client.call('subagent.list', params);
      const resultText = JSON.stringify(result);
      opts.log(`rpc-stdio: subrun's reply result is ${resultText.length} bytes (${CHILDREN} children)`);

      const bare = startProcess(['--import', 'tsx', 'bench/servers/ndjson-bare.ts'], { BENCH_RESULT: resultText });
      procs.push(bare);
      const bareClient = ndjsonClient(bare);
      clients.push(bareClient);

      // The vscode-jsonrpc server's client speaks its framing (Content-Length headers) but is as
      // lean as the NDJSON one, so the servers are compared, not the clients.
      const vs = startProcess(['--import', 'tsx', 'bench/servers/vscode-jsonrpc.ts'], { BENCH_RESULT: resultText });
      procs.push(vs);
      const vsClient = lspClient(vs);
      clients.push(vsClient);

      // Sanity: all three answer the same bytes.
      const same = [JSON.stringify(await bareClient.call('subagent.list', params)), JSON.stringify(await vsClient.call('subagent.list', params))];
      if (same.some((t) => t !== resultText)) throw new Error('baseline servers do not answer the same result');

      const f = await measureTargets(
        [target('subrun', sub.client, sub.proc, params), target('ndjson-bare', bareClient, bare, params), target('vscode-jsonrpc', vsClient, vs, params)],
        sizes,
        (m) => opts.log(`rpc-stdio: ${m}`),
      );
      const g = (m: Map<string, number>, k: string) => m.get(k) as number;
      const clientNote = (k: string) => {
        const sh = f.clientShare.get(k) ?? 0;
        return `client at most ${(sh * 100).toFixed(0)}% of a core${sh >= 0.9 ? ' (client-bound)' : ''}`;
      };
      return [
        row({
          case: 'rpc.stdio.pipelined',
          figure: g(f.ops, 'subrun'),
          unit: 'req/s',
          baseline: g(f.ops, 'ndjson-bare'),
          baseline_unit: 'req/s (bare NDJSON)',
          goal: '>= 0.6',
          note: `${INFLIGHT} in flight, ${resultText.length}-byte result; ${clientNote('subrun')}`,
        }),
        row({
          case: 'rpc.stdio.cpu_per_req',
          figure: g(f.cpuPerOp, 'subrun'),
          unit: 'µs CPU/req',
          baseline: g(f.cpuPerOp, 'ndjson-bare'),
          baseline_unit: 'µs CPU/req (bare NDJSON)',
          note: `vscode-jsonrpc ${g(f.cpuPerOp, 'vscode-jsonrpc').toFixed(1)} µs CPU/req, in the pipelined rounds`,
        }),
        row({
          case: 'rpc.stdio.pipelined.vs_vscode',
          figure: g(f.ops, 'subrun'),
          unit: 'req/s',
          baseline: g(f.ops, 'vscode-jsonrpc'),
          baseline_unit: 'req/s (vscode-jsonrpc)',
          goal: '>= 3',
          note: clientNote('vscode-jsonrpc'),
        }),
        row({
          case: 'rpc.stdio.rtt_p50',
          figure: g(f.p50, 'subrun'),
          unit: 'µs',
          baseline: g(f.p50, 'ndjson-bare'),
          baseline_unit: 'µs (bare NDJSON)',
          note: `vscode-jsonrpc ${g(f.p50, 'vscode-jsonrpc').toFixed(0)} µs`,
        }),
        row({
          case: 'rpc.stdio.rtt_p99',
          figure: g(f.p99, 'subrun'),
          unit: 'µs',
          baseline: g(f.p99, 'ndjson-bare'),
          baseline_unit: 'µs (bare NDJSON)',
          note: `vscode-jsonrpc ${g(f.p99, 'vscode-jsonrpc').toFixed(0)} µs`,
        }),
      ];
    } finally {
      for (const p of procs) await p.stop();
    }
  },
};
