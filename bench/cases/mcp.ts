// Case 15, a steer through MCP: the `steer_subagent` tool round trip on `serve --mcp` against the
// same steer (`subagent.steer`) on `serve --stdio`, one at a time, to one live child parked in
// `hang` (its queue bound raised so no steer is refused). Both servers are their own processes,
// each driven by the same lean newline-delimited client, so the servers are compared (goal: MCP's
// p50 <= 1.5x JSON-RPC's): what MCP adds is the SDK's framing, its input and output schema checks,
// and the translation onto the same RPC method through the in-memory link. One more row times the
// SDK's own Client (what hosts run), whose schema checks on every answer are the host's cost. The
// floor (bench/servers/mcp-bare.ts): the SDK's McpServer with the same tool schemas answering at
// once, timed in the same rounds: what any server on the official SDK pays per call.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { ndjsonClient, ROOT, sequential, startProcess, type RpcClient, type ServerProcess } from '../lib/rpc.ts';
import { median, percentile, row, type Row } from '../lib/stats.ts';
import { sessionWithChildren, subrunStdio } from '../lib/subrun.ts';

const FLAGS = ['--max-queued-steers', '100000', '--max-queued-steer-bytes', String(1024 * 1024 * 1024)];
const TEXT = 'focus on section 5';

interface Sizes {
  readonly rounds: number;
  readonly count: number;
  readonly ms: number;
  readonly warmup: number;
}

const SIZES = {
  full: { rounds: 5, count: 2000, ms: 1500, warmup: 300 },
  quick: { rounds: 3, count: 600, ms: 600, warmup: 100 },
  tiny: { rounds: 1, count: 20, ms: 200, warmup: 5 },
} as const satisfies Record<string, Sizes>;

interface Tool {
  readonly isError?: boolean;
  readonly structuredContent?: Record<string, unknown>;
}

/** A hanging child on `serve --mcp`, through the lean client; its id once it runs. */
async function mcpChild(client: RpcClient, proc: ServerProcess): Promise<string> {
  await client.call('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } });
  proc.child.stdin?.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  const task = { goal: 'bench child', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } };
  const d = (await client.call('tools/call', { name: 'delegate', arguments: { tasks: [task] } })) as Tool;
  const id = (d.structuredContent?.subagent_ids as string[] | undefined)?.[0];
  if (!id) throw new Error(`delegate failed: ${JSON.stringify(d)}`);
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
    const l = (await client.call('tools/call', { name: 'list_subagents', arguments: {} })) as Tool;
    if ((l.structuredContent?.subagents as Array<{ status: string }> | undefined)?.[0]?.status === 'running') return id;
  }
  throw new Error('the MCP child did not start');
}

export const mcpCase: BenchCase = {
  name: 'mcp',
  title: 'a steer through the MCP tool round trip vs the same steer over JSON-RPC stdio',
  async run(opts: CaseOptions): Promise<Row[]> {
    const sizes = bySize<Sizes>(opts.mode, SIZES);
    const procs: ServerProcess[] = [];
    let sdk: Client | undefined;
    try {
      const rpc = await subrunStdio(FLAGS);
      procs.push(rpc.proc);
      const { session_id, ids } = await sessionWithChildren(rpc.client, 1);
      const rpcSteer = () => rpc.client.call('subagent.steer', { session_id, subagent_id: ids[0], text: TEXT });

      const mcpProc = startProcess(['bin/subrun.js', 'serve', '--mcp', ...FLAGS]);
      procs.push(mcpProc);
      const mcp = ndjsonClient(mcpProc);
      const child = await mcpChild(mcp, mcpProc);
      const mcpSteer = async () => {
        const r = (await mcp.call('tools/call', { name: 'steer_subagent', arguments: { subagent_id: child, text: TEXT } })) as Tool;
        if (r.structuredContent?.status !== 'queued') throw new Error(`steer not queued: ${JSON.stringify(r)}`);
      };

      const bareProc = startProcess(['--import', 'tsx', 'bench/servers/mcp-bare.ts']);
      procs.push(bareProc);
      const bare = ndjsonClient(bareProc);
      await bare.call('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } });
      bareProc.child.stdin?.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
      const bareSteer = async () => {
        const r = (await bare.call('tools/call', { name: 'steer_subagent', arguments: { subagent_id: child, text: TEXT } })) as Tool;
        if (r.structuredContent?.status !== 'queued') throw new Error(`floor not queued: ${JSON.stringify(r)}`);
      };

      const transport = new StdioClientTransport({
        command: process.execPath,
        args: ['bin/subrun.js', 'serve', '--mcp', ...FLAGS],
        cwd: ROOT,
        stderr: 'ignore',
      });
      sdk = new Client({ name: 'bench', version: '1' });
      await sdk.connect(transport);
      const host = sdk;
      const d = await host.callTool({
        name: 'delegate',
        arguments: { tasks: [{ goal: 'bench child', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } }] },
      });
      const sdkChild = ((d.structuredContent as { subagent_ids?: string[] } | undefined)?.subagent_ids ?? [])[0];
      const sdkSteer = () => host.callTool({ name: 'steer_subagent', arguments: { subagent_id: sdkChild, text: TEXT } });

      const targets = { rpc: rpcSteer, mcp: mcpSteer, sdk: sdkSteer, bare: bareSteer };
      const p50s = { rpc: [] as number[], mcp: [] as number[], sdk: [] as number[], bare: [] as number[] };
      const all = { rpc: [] as number[], mcp: [] as number[], sdk: [] as number[], bare: [] as number[] };
      const names = ['rpc', 'mcp', 'sdk', 'bare'] as const;
      for (const n of names) await sequential(targets[n], sizes.warmup, 10_000);
      for (let r = 0; r < sizes.rounds; r++) {
        // Each round starts with another target, so neither gains from going first.
        for (let i = 0; i < names.length; i++) {
          const n = names[(i + r) % names.length] as (typeof names)[number];
          const s = await sequential(targets[n], sizes.count, sizes.ms);
          p50s[n].push(s.p50);
          all[n].push(...s.latencies);
        }
      }
      for (const n of names) opts.log(`mcp: ${n} steer p50 per round ${p50s[n].map((x) => x.toFixed(0)).join(' ')} µs (${all[n].length} round trips)`);
      return [
        row({
          case: 'mcp.steer.rtt_p50',
          figure: median(p50s.mcp),
          unit: 'µs',
          baseline: median(p50s.rpc),
          baseline_unit: 'µs (subagent.steer over JSON-RPC stdio)',
          goal: '<= 1.5',
          note: `p99 ${percentile(all.mcp, 99).toFixed(0)} µs vs ${percentile(all.rpc, 99).toFixed(0)} µs`,
        }),
        row({
          case: 'mcp.sdk_floor.rtt_p50',
          figure: median(p50s.bare),
          unit: 'µs',
          baseline: median(p50s.rpc),
          baseline_unit: 'µs (subagent.steer over JSON-RPC stdio)',
          note: "the SDK's McpServer with the same tool schemas answering at once, no runtime: above 1.5x, the goal above is out of reach on the official SDK",
        }),
        row({
          case: 'mcp.steer.over_sdk_floor',
          figure: median(p50s.mcp),
          unit: 'µs',
          baseline: median(p50s.bare),
          baseline_unit: 'µs (the SDK floor)',
          goal: '<= 1.3',
          note: "what subrun adds to the SDK's own cost: the translation onto subagent.steer and the steer itself",
        }),
        row({
          case: 'mcp.steer.sdk_client_rtt_p50',
          figure: median(p50s.sdk),
          unit: 'µs',
          baseline: median(p50s.rpc),
          baseline_unit: 'µs (subagent.steer over JSON-RPC stdio)',
          note: "the SDK's Client, with its schema checks of every answer",
        }),
      ];
    } finally {
      await sdk?.close();
      for (const p of procs) await p.stop();
    }
  },
};
