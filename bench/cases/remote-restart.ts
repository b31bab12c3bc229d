// Case 14, remote restart: a control plane carrying N remote children (each running on a worker,
// parked in a wait for a steer) is SIGKILLed and started again on its state directory and NATS.
// The figure: from the new process's spawn to serving again with every child adopted (listening,
// and `subagent.list` showing all N running); goal 2 s for N = 1,000. The baseline, in the same
// run: the same restart of a control plane with no children. Needs nats-server.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { startProcess, type ServerProcess } from '../lib/rpc.ts';
import { row, type Row } from '../lib/stats.ts';
import { connectWs, subrunWs } from '../lib/subrun.ts';
import { startNats, type Nats } from '../../test/helpers/nats.ts';

const SIZES = { full: { children: 1000 }, quick: { children: 300 }, tiny: { children: 10 } };
/** Both processes alike: the adopted children hold the concurrency slots they held before. */
const FLAGS = ['--max-concurrent-children', '1000'];

/** Serving again: listening, and the session's list shows `n` running children. */
async function serving(
  dir: string,
  url: string,
  session: { session_id: string; session_key: string },
  n: number,
): Promise<{ ms: number; proc: ServerProcess }> {
  const t0 = process.hrtime.bigint();
  const s = await subrunWs(['--state-dir', dir, '--nats', url, ...FLAGS]);
  const c = await connectWs(s.url);
  await c.call('session.attach', session);
  for (;;) {
    const list = (await c.call('subagent.list', { session_id: session.session_id })) as { subagents: Array<{ status: string }> };
    if (list.subagents.filter((x) => x.status === 'running').length >= n) break;
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  await c.close();
  return { ms, proc: s.proc };
}

/** A control plane on `dir` with `n` remote children running, then SIGKILLed; the session to re-bind. */
async function carrying(dir: string, url: string, n: number): Promise<{ session_id: string; session_key: string }> {
  const s = await subrunWs(['--state-dir', dir, '--nats', url, ...FLAGS, '--checkpoint-ms', '20']);
  const c = await connectWs(s.url);
  const session = (await c.call('session.create', {})) as { session_id: string; session_key: string };
  let started = 0;
  const all = new Promise<void>((resolve) => {
    c.onNotify = (m) => {
      const e = m.params as { type: string };
      if (e.type === 'subagent.start' && ++started === n) resolve();
    };
    if (n === 0) resolve();
  });
  for (let left = n; left > 0;) {
    const size = Math.min(left, 1000);
    const tasks = Array.from({ length: size }, () => ({
      goal: 'parked',
      agent: { kind: 'scripted', steps: [{ op: 'say', text: 'up' }, { op: 'wait_steer' }] },
    }));
    await c.call('delegation.spawn', { session_id: session.session_id, tasks });
    left -= size;
  }
  await all;
  // Their places are written with their starts; a moment for the last commit and checkpoint.
  await new Promise((r) => setTimeout(r, 200));
  await c.close();
  s.proc.child.kill('SIGKILL');
  await new Promise((r) => s.proc.child.once('exit', r));
  return session;
}

export const remoteRestartCase: BenchCase = {
  name: 'remote-restart',
  title: 'A control plane carrying remote children, SIGKILLed and started again: serving with every child adopted',
  async run(opts: CaseOptions): Promise<Row[]> {
    const { children } = bySize(opts.mode, SIZES);
    const dirs: string[] = [];
    const procs: ServerProcess[] = [];
    let nats: Nats | undefined;
    try {
      nats = await startNats();
      procs.push(startProcess(['bin/subrun.js', 'worker', '--nats', nats.url, '--max-children', String(Math.max(children, 16))]));
      const fresh = () => {
        const d = mkdtempSync(join(tmpdir(), 'subrun-bench-remote-'));
        dirs.push(d);
        return d;
      };
      const emptyDir = fresh();
      const empty = await serving(emptyDir, nats.url, await carrying(emptyDir, nats.url, 0), 0);
      await empty.proc.stop();
      const fullDir = fresh();
      const full = await serving(fullDir, nats.url, await carrying(fullDir, nats.url, children), children);
      procs.push(full.proc);
      opts.log(`remote-restart: ${children} children adopted, serving in ${full.ms.toFixed(0)} ms (empty: ${empty.ms.toFixed(0)} ms)`);
      return [
        row({
          case: 'remote.restart_serving',
          figure: full.ms,
          unit: 'ms',
          baseline: empty.ms,
          baseline_unit: 'ms (the same restart, no children)',
          goal: '<= 2000 ms',
          pass: full.ms <= 2000,
          note: `${children} remote children adopted (listening + list shows them running)`,
        }),
      ];
    } finally {
      for (const p of procs) await p.stop();
      await nats?.dispose();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
};
