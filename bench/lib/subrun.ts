// Starting a real subrun server (bin/subrun.js, as a host would) and preparing a session with
// live children, for the wire cases.
import type { WebSocket } from 'ws';
import { ndjsonClient, startProcess, waitForStderr, wsClient, type RpcClient, type ServerProcess } from './rpc.ts';

export const BENCH_TOKEN = 'bench-token-0123456789';

export async function subrunStdio(flags: readonly string[] = []): Promise<{ proc: ServerProcess; client: RpcClient }> {
  const proc = startProcess(['bin/subrun.js', 'serve', '--stdio', ...flags]);
  return { proc, client: ndjsonClient(proc) };
}

/**
 * A `serve --ws`: memory only unless `flags` name a state directory (the durability cases compare
 * the two); a bench never writes to the user's default state directory.
 */
export async function subrunWs(flags: readonly string[] = []): Promise<{ proc: ServerProcess; url: string }> {
  const state = flags.includes('--state-dir') || flags.includes('--no-state') ? [] : ['--no-state'];
  const proc = startProcess(['bin/subrun.js', 'serve', '--ws', '--port', '0', '--token', BENCH_TOKEN, ...state, ...flags]);
  const m = await waitForStderr(proc, /listening on (ws:\/\/\S+)/, 20_000);
  return { proc, url: m[1] as string };
}

export async function connectWs(url: string): Promise<RpcClient & { readonly ws: WebSocket }> {
  return wsClient(url, BENCH_TOKEN);
}

export interface Snapshot {
  readonly subagent_id: string;
  readonly status: string;
}

/** A session with `n` children parked in a `hang` step; resolves once all are running. */
export async function sessionWithChildren(
  client: RpcClient,
  n: number,
  steps: unknown[] = [{ op: 'hang' }],
): Promise<{ session_id: string; session_key: string; ids: string[] }> {
  const s = (await client.call('session.create', { title: 'bench' })) as { session_id: string; session_key: string };
  const ids: string[] = [];
  for (let left = n; left > 0;) {
    const size = Math.min(left, 1000);
    const r = (await client.call('delegation.spawn', {
      session_id: s.session_id,
      tasks: Array.from({ length: size }, (_, i) => ({ goal: `bench child ${ids.length + i}`, agent: { kind: 'scripted', steps } })),
    })) as { subagent_ids: string[] };
    ids.push(...r.subagent_ids);
    left -= size;
  }
  const deadline = Date.now() + 60_000;
  for (;;) {
    const list = (await client.call('subagent.list', { session_id: s.session_id })) as { subagents: Snapshot[] };
    if (list.subagents.filter((c) => c.status === 'running').length >= n) break;
    if (Date.now() > deadline) throw new Error(`children did not all start: ${JSON.stringify(list.subagents.map((c) => c.status))}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { ...s, ids };
}
