// The durable store's cost (docs/durability.md, "Proof"), each as a ratio against the same server
// with --no-state in the same run, over `subrun serve --ws` on 127.0.0.1:
// - steer round trip p50 (sequential steers to hanging children): goal <= 1.25x;
// - events/s to one WebSocket host (children saying lines as fast as they can): goal >= 0.7x;
// - spawn per child (batches of 16 short children, until each batch's delegation.complete): <= 1.5x;
// - a restart on a state directory of 10,000 sessions and 100,000 finished children: listening
//   again within 2 s (against the start of an empty --no-state server);
// - the database under 10,000 created-and-closed sessions: within 1.2x of its size after 1,000.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import type { RpcClient } from '../lib/rpc.ts';
import { median, percentile, row, type Row } from '../lib/stats.ts';
import { connectWs, sessionWithChildren, subrunWs } from '../lib/subrun.ts';
import { SqliteStore } from '../../src/store/sqlite.ts';

interface Sizes {
  readonly steers: number;
  readonly say_children: number;
  readonly says: number;
  readonly batches: number;
  readonly restart_sessions: number;
  readonly restart_children: number;
  readonly churn: number;
}

const SIZES = {
  full: { steers: 4000, say_children: 8, says: 2000, batches: 200, restart_sessions: 10_000, restart_children: 100_000, churn: 10_000 },
  quick: { steers: 1000, say_children: 4, says: 500, batches: 50, restart_sessions: 2000, restart_children: 20_000, churn: 2000 },
  tiny: { steers: 20, say_children: 1, says: 10, batches: 2, restart_sessions: 10, restart_children: 20, churn: 20 },
} satisfies Record<string, Sizes>;

// --max-outbound-bytes: kept far above the talkers' bursts on both servers alike, so that no
// outbound bound (src/server/backlog.ts) can drop a reader in the middle of a measure;
// --max-message-bytes: a spawn of 8 talkers of 2,000 lines each is a 1 MiB frame.
/** Alternating rounds per server (each measures a share of the sizes). */
const ROUNDS = 5;

const QUEUE_FLAGS = [
  '--max-queued-steers',
  '100000',
  '--max-queued-steer-bytes',
  '1073741824',
  '--max-concurrent-children',
  '16',
  '--max-outbound-bytes',
  '268435456',
  '--max-message-bytes',
  '16777216',
];

async function steerP50(client: RpcClient, n: number): Promise<number> {
  const { session_id, ids } = await sessionWithChildren(client, 16);
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await client.call('subagent.steer', { session_id, subagent_id: ids[i % ids.length], text: `steer ${i}` });
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return percentile(times, 50);
}

/** Events/s until the session is idle: `children` children each saying `says` lines. */
async function eventsPerSecond(client: RpcClient, children: number, says: number): Promise<number> {
  const s = (await client.call('session.create', {})) as { session_id: string };
  let count = 0;
  let idle!: () => void;
  const done = new Promise<void>((resolve) => (idle = resolve));
  client.onNotify = (m) => {
    count += 1;
    if ((m.params as { type?: string }).type === 'session.idle') idle();
  };
  const steps = Array.from({ length: says }, (_, i) => ({ op: 'say', text: `line ${i} of a child that reports as it goes` }));
  const t0 = process.hrtime.bigint();
  await client.call('delegation.spawn', {
    session_id: s.session_id,
    tasks: Array.from({ length: children }, (_, i) => ({ goal: `talker ${i}`, agent: { kind: 'scripted', steps } })),
  });
  await done;
  const s_ = Number(process.hrtime.bigint() - t0) / 1e9;
  client.onNotify = undefined;
  return count / s_;
}

/** µs per child: batches of 16 one-step children, each batch awaited to its delegation.complete. */
async function spawnPerChild(client: RpcClient, batches: number): Promise<number> {
  const s = (await client.call('session.create', {})) as { session_id: string };
  const completed = new Set<string>();
  let wake: (() => void) | undefined;
  client.onNotify = (m) => {
    const p = m.params as { type?: string; payload?: { delegation_id?: string } };
    if (p.type !== 'delegation.complete' || p.payload?.delegation_id === undefined) return;
    completed.add(p.payload.delegation_id);
    wake?.();
  };
  const tasks = Array.from({ length: 16 }, (_, i) => ({ goal: `short ${i}`, agent: { kind: 'scripted', steps: [{ op: 'finish', summary: 'ok' }] } }));
  const t0 = process.hrtime.bigint();
  for (let b = 0; b < batches; b++) {
    const r = (await client.call('delegation.spawn', { session_id: s.session_id, tasks })) as { delegation_id: string };
    // Its completion may have come before the reply was read: the set holds it either way.
    while (!completed.has(r.delegation_id)) await new Promise<void>((resolve) => (wake = resolve));
  }
  client.onNotify = undefined;
  return Number(process.hrtime.bigint() - t0) / 1000 / (batches * 16);
}

/** A state directory as a long-lived server leaves it: `sessions` sessions, `children` finished children among them. */
function populate(dir: string, sessions: number, children: number): void {
  const store = SqliteStore.open(dir);
  const entry = (id: string, i: number) => ({
    task_index: i,
    subagent_id: id,
    status: 'completed' as const,
    exit_reason: 'completed',
    summary: 'done',
    api_calls: 0,
    duration_seconds: 0.01,
    model: 'scripted',
    tokens: { input: 0, output: 0 },
    tool_trace: [],
  });
  for (let s = 0; s < sessions; s++) {
    const session_id = `ses_bench${s}`;
    store.sessionSaved({
      session_id,
      key_digest: Buffer.alloc(32, s % 256),
      title: undefined,
      created_at: 0,
      generation: 1,
      close_on_disconnect: false,
      seq: 0,
      turn_running: false,
    });
    const per = Math.floor(children / sessions);
    for (let c = 0; c < per; c++) {
      const subagent_id = `sa_bench${s}_${c}`;
      const delegation_id = `dg_bench${s}_${c}`;
      const owner = { session_id, transport: 'bench', generation: 1 };
      store.delegationDispatched({ delegation_id, session_id, generation: 1, count: 1, done: true });
      store.spawned({
        subagent_id,
        parent_id: null,
        depth: 0,
        delegation_id,
        task_index: 0,
        task_count: 1,
        goal: 'g',
        context: undefined,
        agent: 'default',
        model: 'scripted',
        owner,
        timeout_ms: undefined,
        revived_from: undefined,
      });
      store.finished(subagent_id, entry(subagent_id, 0), 0);
      store.eventAppended(session_id, c + 1, `{"type":"subagent.complete","session_id":"${session_id}","seq":${c + 1},"ts":0,"payload":{}}`);
    }
    if (s % 500 === 499) store.flush();
  }
  store.close();
}

async function listeningMs(flags: readonly string[]): Promise<number> {
  const t0 = process.hrtime.bigint();
  const s = await subrunWs(flags);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  await s.proc.stop();
  return ms;
}

/** The database's bytes on disk: the file and its write-ahead log. */
function dbBytes(dir: string): number {
  let bytes = 0;
  for (const f of ['store.db', 'store.db-wal']) {
    try {
      bytes += statSync(join(dir, f)).size;
    } catch {
      // no WAL right after a checkpoint
    }
  }
  return bytes;
}

/** Sessions `from` to `to`: each created, given a child, and closed. */
async function churn(client: RpcClient, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i++) {
    const s = (await client.call('session.create', {})) as { session_id: string };
    await client.call('delegation.spawn', { session_id: s.session_id, tasks: [{ goal: 'g', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'x' }] } }] });
    await client.call('session.close', { session_id: s.session_id });
  }
}

export const durabilityCase: BenchCase = {
  name: 'durability',
  title: 'The durable store (SQLite) against --no-state: steer p50, events/s, spawn per child, restart, size under churn',
  async run(opts: CaseOptions): Promise<Row[]> {
    const z = bySize<Sizes>(opts.mode, SIZES);
    const dirs: string[] = [];
    const fresh = () => {
      const d = mkdtempSync(join(tmpdir(), 'subrun-bench-state-'));
      dirs.push(d);
      return d;
    };
    const figures = new Map<string, { mem: number; disk: number }>();
    try {
      // Both servers up at once, measured in alternating rounds (mem, disk, mem, disk, ...): the
      // machine's drift lands on both alike; each figure is the median of its rounds.
      const servers = {
        mem: await subrunWs(['--no-state', ...QUEUE_FLAGS]),
        disk: await subrunWs(['--state-dir', fresh(), ...QUEUE_FLAGS]),
      };
      const clients = { mem: await connectWs(servers.mem.url), disk: await connectWs(servers.disk.url) };
      const samples = new Map<string, { mem: number[]; disk: number[] }>();
      const put = (k: string, mode: 'mem' | 'disk', v: number) => {
        const s = samples.get(k) ?? { mem: [], disk: [] };
        s[mode].push(v);
        samples.set(k, s);
      };
      try {
        for (const mode of ['mem', 'disk'] as const) await steerP50(clients[mode], Math.min(200, z.steers)); // warm-up
        for (let round = 0; round < ROUNDS; round++) {
          for (const mode of ['mem', 'disk'] as const) {
            const c = clients[mode];
            put('steer', mode, await steerP50(c, Math.ceil(z.steers / ROUNDS)));
            put('events', mode, await eventsPerSecond(c, z.say_children, Math.ceil(z.says / ROUNDS)));
            put('spawn', mode, await spawnPerChild(c, Math.ceil(z.batches / ROUNDS)));
          }
          opts.log(`durability: round ${round + 1} of ${ROUNDS}`);
        }
      } finally {
        for (const mode of ['mem', 'disk'] as const) {
          await clients[mode].close();
          await servers[mode].proc.stop();
        }
      }
      for (const [k, v] of samples) figures.set(k, { mem: median(v.mem), disk: median(v.disk) });
      const big = fresh();
      populate(big, z.restart_sessions, z.restart_children);
      const restart = await listeningMs(['--state-dir', big]);
      const empty = await listeningMs(['--no-state']);

      // Measured with the server stopped (its WAL checkpointed into the file): the database itself.
      const churnDir = fresh();
      const tenth = Math.max(1, Math.floor(z.churn / 10));
      const churnRound = async (from: number, to: number) => {
        const srv = await subrunWs(['--state-dir', churnDir]);
        const client = await connectWs(srv.url);
        await churn(client, from, to);
        await client.close();
        await srv.proc.stop();
        return dbBytes(churnDir);
      };
      const first = await churnRound(0, tenth);
      const last = await churnRound(tenth, z.churn);

      const f = (k: string) => figures.get(k) ?? { mem: 0, disk: 0 };
      return [
        row({
          case: 'durability.steer_rtt_p50',
          figure: f('steer').disk,
          unit: 'µs',
          baseline: f('steer').mem,
          baseline_unit: 'µs (--no-state)',
          goal: '<= 1.25',
        }),
        row({
          case: 'durability.events_per_s',
          figure: f('events').disk,
          unit: 'events/s',
          baseline: f('events').mem,
          baseline_unit: 'events/s (--no-state)',
          goal: '>= 0.7',
          note: 'one WebSocket host',
        }),
        row({
          case: 'durability.spawn_per_child',
          figure: f('spawn').disk,
          unit: 'µs',
          baseline: f('spawn').mem,
          baseline_unit: 'µs (--no-state)',
          goal: '<= 1.5',
        }),
        row({
          case: 'durability.restart_listening',
          figure: restart,
          unit: 'ms',
          baseline: empty,
          baseline_unit: 'ms (empty, --no-state)',
          pass: restart <= 2000,
          goal: '<= 2000 ms',
          note: `${z.restart_sessions} sessions, ${z.restart_children} finished children`,
        }),
        row({
          case: 'durability.size_under_churn',
          figure: last,
          unit: 'bytes',
          baseline: first,
          baseline_unit: `bytes after ${tenth} sessions`,
          goal: '<= 1.2',
          note: `${z.churn} sessions created, given a child, closed`,
        }),
      ];
    } finally {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
};
