// Case 4, RPC over WebSocket: the same `subagent.list` load as case 3 (10 live children; 64 in
// flight, then sequential round trips) over `subrun serve --ws`, against a bare `ws` server
// (bench/servers/ws-bare.ts) that parses each frame and answers with a ready-made result of the
// same size: the limit for this transport and payload here (goal: subrun >= 0.6x). Client and
// servers are separate processes; all traffic is on 127.0.0.1.
import { once } from 'node:events';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { startProcess, wsClient, type RpcClient, type ServerProcess } from '../lib/rpc.ts';
import { row, type Row } from '../lib/stats.ts';
import { connectWs, sessionWithChildren, subrunWs } from '../lib/subrun.ts';
import { measureTargets, WIRE_SIZES, type WireSizes } from './rpc-stdio.ts';

const CHILDREN = 10;

export const rpcWsCase: BenchCase = {
  name: 'rpc-ws',
  title: 'RPC over WebSocket: pipelined and sequential subagent.list vs a bare ws server',
  async run(opts: CaseOptions): Promise<Row[]> {
    const sizes = bySize<WireSizes>(opts.mode, WIRE_SIZES);
    const procs: ServerProcess[] = [];
    const clients: RpcClient[] = [];
    try {
      const sub = await subrunWs(['--max-concurrent-children', '16']);
      procs.push(sub.proc);
      const client = await connectWs(sub.url);
      clients.push(client);
      const { session_id } = await sessionWithChildren(client, CHILDREN);
      const params = { session_id };
      const resultText = JSON.stringify(await client.call('subagent.list', params));
      opts.log(`rpc-ws: subrun's reply result is ${resultText.length} bytes (${CHILDREN} children)`);

      const bare = startProcess(['--import', 'tsx', 'bench/servers/ws-bare.ts'], { BENCH_RESULT: resultText });
      procs.push(bare);
      const stdout = bare.child.stdout;
      if (!stdout) throw new Error('no stdout');
      stdout.setEncoding('utf8');
      const [first] = (await once(stdout, 'data')) as [string];
      const port = /listening (\d+)/.exec(first)?.[1];
      if (!port) throw new Error(`ws-bare did not say its port: ${first}`);
      const bareClient = await wsClient(`ws://127.0.0.1:${port}/`);
      clients.push(bareClient);
      if (JSON.stringify(await bareClient.call('subagent.list', params)) !== resultText) throw new Error('ws-bare does not answer the same result');

      const f = await measureTargets(
        [
          { name: 'subrun', call: () => client.call('subagent.list', params) },
          { name: 'ws-bare', call: () => bareClient.call('subagent.list', params) },
        ],
        sizes,
        (m) => opts.log(`rpc-ws: ${m}`),
      );
      const g = (m: Map<string, number>, k: string) => m.get(k) as number;
      return [
        row({
          case: 'rpc.ws.pipelined',
          figure: g(f.ops, 'subrun'),
          unit: 'req/s',
          baseline: g(f.ops, 'ws-bare'),
          baseline_unit: 'req/s (bare ws)',
          goal: '>= 0.6',
          note: `64 in flight, ${resultText.length}-byte result`,
        }),
        row({ case: 'rpc.ws.rtt_p50', figure: g(f.p50, 'subrun'), unit: 'µs', baseline: g(f.p50, 'ws-bare'), baseline_unit: 'µs (bare ws)' }),
        row({ case: 'rpc.ws.rtt_p99', figure: g(f.p99, 'subrun'), unit: 'µs', baseline: g(f.p99, 'ws-bare'), baseline_unit: 'µs (bare ws)' }),
      ];
    } finally {
      for (const c of clients) await c.close();
      for (const p of procs) await p.stop();
    }
  },
};
