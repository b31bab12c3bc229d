// Case 11, scale-out: children on a worker through NATS JetStream, against the parts it is made of,
// measured in the same run. (1) A remote steer's queued reply (host -> control plane -> JetStream
// publish ack -> host) against a bare WebSocket round trip plus a bare JetStream publish-ack
// (goal: at most 1.5x their sum). (2) Spawn to the child's first event, remote against local.
// (3) Control-plane CPU per remote child against a local child (goal: at most 2x), and from it
// how many children one control plane core carries. Needs nats-server (Debian: apt install nats-server).
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { readCpu, sequential, startProcess, wsClient, type RpcClient, type ServerProcess } from '../lib/rpc.ts';
import { median, percentile, row, type Row } from '../lib/stats.ts';
import { connectWs, subrunWs } from '../lib/subrun.ts';
import { startNats, type Nats } from '../../test/helpers/nats.ts';
import { captureTraffic, natsFloorMs } from './scale-out-floor.ts';

interface Sizes {
  /** Steers per loop in all; the loops run interleaved in `rounds`. */
  readonly steers: number;
  readonly rounds: number;
  /**
   * Unmeasured first, for every loop alike: steers per loop, and children per plane. A control
   * plane is a long-running process; measured cold, its first few thousand steers ran while V8 was
   * still optimizing (its CPU per steer halved from the first 4,000 to the next), where the bare
   * servers, a few lines each, were warm at once.
   */
  readonly warmSteers: number;
  readonly warmChildren: number;
  readonly spawns: number;
  readonly children: number;
  /** Children's worth of traffic replayed to the bare NATS floor. */
  readonly floorChildren: number;
}
const SIZES = {
  full: { steers: 2000, rounds: 8, warmSteers: 10000, warmChildren: 2000, spawns: 40, children: 600, floorChildren: 4000 },
  quick: { steers: 600, rounds: 4, warmSteers: 2000, warmChildren: 600, spawns: 15, children: 200, floorChildren: 2000 },
  tiny: { steers: 20, rounds: 1, warmSteers: 10, warmChildren: 2, spawns: 2, children: 6, floorChildren: 20 },
};

/** CPU time of a process, ms (exact: bench/lib/rpc.ts readCpu). */
const cpuMs = (pid: number | undefined): number => readCpu(pid) / 1000;

/**
 * Runs each loop `count` times in all, sequential round trips, interleaved: `rounds` rounds, each
 * a share of every loop, in an order that rotates by round. Latencies in µs, pooled per loop.
 */
async function interleaved<K extends string>(loops: Record<K, () => Promise<unknown>>, count: number, rounds: number): Promise<Map<K, number[]>> {
  const names = Object.keys(loops) as K[];
  const out = new Map<K, number[]>(names.map((k) => [k, []]));
  const per = Math.max(1, Math.ceil(count / rounds));
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < names.length; i++) {
      const k = names[(i + r) % names.length] as K;
      const s = await sequential(loops[k], per, 20_000);
      out.get(k)?.push(...s.latencies);
    }
  }
  return out;
}

interface Plane {
  readonly proc: ServerProcess;
  readonly client: RpcClient;
  readonly session_id: string;
  /** Resolves on the next event of `type` for `subagent_id`. */
  next(type: string, subagent_id: string): Promise<void>;
}

async function plane(flags: readonly string[]): Promise<Plane> {
  const { proc, url } = await subrunWs(['--max-concurrent-children', '64', '--max-queued-steers', '100000', '--max-queued-steer-bytes', '67108864', ...flags]);
  const client = await connectWs(url);
  const waiters = new Map<string, () => void>();
  // An event may come before the reply that names its child: remember what was seen.
  const seen = new Set<string>();
  client.onNotify = (m) => {
    const e = m.params as { type: string; payload: { subagent_id?: string } };
    const key = `${e.type} ${e.payload.subagent_id ?? ''}`;
    const w = waiters.get(key);
    if (w) {
      waiters.delete(key);
      w();
    } else if (e.type === 'subagent.start' || e.type === 'subagent.text' || e.type === 'subagent.complete') seen.add(key);
  };
  const { session_id } = (await client.call('session.create', {})) as { session_id: string };
  return {
    proc,
    client,
    session_id,
    next: (type, id) =>
      new Promise((resolve) => {
        const key = `${type} ${id}`;
        if (seen.delete(key)) resolve();
        else waiters.set(key, resolve);
      }),
  };
}

async function spawnOne(p: Plane, steps: unknown[]): Promise<string> {
  const r = (await p.client.call('delegation.spawn', { session_id: p.session_id, tasks: [{ goal: 'bench', agent: { kind: 'scripted', steps } }] })) as {
    subagent_ids: string[];
  };
  return r.subagent_ids[0] as string;
}

export const scaleOutCase: BenchCase = {
  name: 'scale-out',
  title: 'Children on workers through NATS JetStream: steer reply, spawn to first event, control-plane CPU',
  async run(opts: CaseOptions): Promise<Row[]> {
    const sizes = bySize<Sizes>(opts.mode, SIZES);
    const procs: ServerProcess[] = [];
    const clients: RpcClient[] = [];
    let nats: Nats | undefined;
    try {
      nats = await startNats();
      const remote = await plane(['--nats', nats.url]);
      procs.push(remote.proc);
      clients.push(remote.client);
      const worker = startProcess(['bin/subrun.js', 'worker', '--nats', nats.url, '--max-children', '256']);
      procs.push(worker);
      const local = await plane([]);
      procs.push(local.proc);
      clients.push(local.client);

      // (1) The steer's queued reply, and the two parts it cannot do without. All four loops are
      // set up first and then run interleaved, in rounds that rotate their order: run one after
      // the other, a busy spell of this shared machine landed on one side of the ratio only.
      const rid = await spawnOne(remote, [{ op: 'hang' }]);
      await remote.next('subagent.start', rid);
      const lid = await spawnOne(local, [{ op: 'hang' }]);
      await local.next('subagent.start', lid);

      const bare = startProcess(['--import', 'tsx', 'bench/servers/ws-bare.ts'], {
        BENCH_RESULT: JSON.stringify({ status: 'queued', subagent_id: rid, text: 'steer', steer_id: 'st_000000000000' }),
      });
      procs.push(bare);
      bare.child.stdout?.setEncoding('utf8');
      const [first] = (await once(bare.child.stdout as NodeJS.ReadableStream, 'data')) as [string];
      const bareClient = await wsClient(`ws://127.0.0.1:${/listening (\d+)/.exec(first)?.[1]}/`);
      clients.push(bareClient);

      const nc = await connect({ servers: nats.url });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: 'BENCH', subjects: ['bench.>'], retention: RetentionPolicy.Workqueue, storage: StorageType.File });
      const js = jetstream(nc);
      let n = 0;
      const steerLoops = {
        remote: () => remote.client.call('subagent.steer', { session_id: remote.session_id, subagent_id: rid, text: 'steer' }),
        local: () => local.client.call('subagent.steer', { session_id: local.session_id, subagent_id: lid, text: 'steer' }),
        ws: () => bareClient.call('subagent.steer', { session_id: 'x', subagent_id: rid, text: 'steer' }),
        ack: () => js.publish('bench.steer', '{"steer_id":"st","text":"steer","seq":1}', { msgID: `m${++n}` }),
      };
      await interleaved(steerLoops, sizes.warmSteers, 1);
      const lat = await interleaved(steerLoops, sizes.steers, sizes.rounds);
      await nc.close();
      const p50 = (k: keyof typeof steerLoops) => percentile(lat.get(k) ?? [], 50);
      const steerRemote = p50('remote');
      const steerLocal = p50('local');
      const wsRtt = p50('ws');
      const pubAck = p50('ack');
      opts.log(
        `scale-out: steer p50 remote ${steerRemote.toFixed(0)} µs, local ${steerLocal.toFixed(0)} µs, bare ws ${wsRtt.toFixed(0)} µs, publish-ack ${pubAck.toFixed(0)} µs`,
      );

      // (2) Spawn to the child's first event (its runner's first text), one child at a time.
      const firstEvent = async (p: Plane): Promise<number> => {
        const lat: number[] = [];
        for (let i = 0; i < sizes.spawns; i++) {
          const t = performance.now();
          const id = await spawnOne(p, [{ op: 'say', text: 'first' }, { op: 'finish' }]);
          await p.next('subagent.text', id);
          lat.push((performance.now() - t) * 1000);
        }
        return median(lat);
      };
      // Spawns are awaited by id after the reply; the events come later, so waiting is safe.
      const spawnRemote = await firstEvent(remote);
      const spawnLocal = await firstEvent(local);

      // (3) Control-plane CPU per child, spawn to entry, with a tool step and two texts each.
      const steps = [
        { op: 'say', text: 'working' },
        { op: 'tool', name: 'read_file' },
        { op: 'say', text: 'done' },
        { op: 'finish', summary: 'ok' },
      ];
      // One batch of up to 50 children, spawn to the last entry; returns the plane's CPU, ms.
      const batchCpu = async (p: Plane, size: number): Promise<number> => {
        const before = cpuMs(p.proc.child.pid);
        const r = (await p.client.call('delegation.spawn', {
          session_id: p.session_id,
          tasks: Array.from({ length: size }, () => ({ goal: 'cpu', agent: { kind: 'scripted', steps } })),
        })) as { subagent_ids: string[] };
        await Promise.all(r.subagent_ids.map((id) => p.next('subagent.complete', id)));
        return cpuMs(p.proc.child.pid) - before;
      };
      // Both planes' batches alternate (which goes first alternates too), for the same reason.
      const cpuPerChild = async (a: Plane, b: Plane, children = sizes.children): Promise<[number, number]> => {
        let cpuA = 0;
        let cpuB = 0;
        for (let left = children, k = 0; left > 0; k++) {
          const size = Math.min(left, 50);
          if (k % 2 === 0) {
            cpuA += await batchCpu(a, size);
            cpuB += await batchCpu(b, size);
          } else {
            cpuB += await batchCpu(b, size);
            cpuA += await batchCpu(a, size);
          }
          left -= size;
        }
        return [cpuA / children, cpuB / children];
      };
      // The floor's traffic, from one untimed batch (the tap is one more subscriber on nats-server).
      const traffic = await captureTraffic(nats.url, async () => {
        await batchCpu(remote, 50);
      });
      await cpuPerChild(remote, local, sizes.warmChildren);
      const [cpuRemote, cpuLocal] = await cpuPerChild(remote, local);
      const natsFloor = await natsFloorMs(nats.url, traffic, sizes.floorChildren);
      const carried = cpuRemote > 0 ? Math.floor(1000 / cpuRemote) : 0;
      opts.log(`scale-out: control-plane CPU per child remote ${cpuRemote.toFixed(3)} ms, local ${cpuLocal.toFixed(3)} ms`);
      // (3b) The same with a state directory on both (the default of `serve --ws`): the remote
      // plane then reads its workers' events through the durable feed, so a restart adopts them.
      // One control plane per NATS: the stateless one goes first.
      await remote.client.close();
      await remote.proc.stop();
      const stateDir = () => mkdtempSync(join(tmpdir(), 'subrun-bench-so-'));
      const durableRemote = await plane(['--nats', nats.url, '--state-dir', stateDir()]);
      procs.push(durableRemote.proc);
      clients.push(durableRemote.client);
      const durableLocal = await plane(['--state-dir', stateDir()]);
      procs.push(durableLocal.proc);
      clients.push(durableLocal.client);
      await cpuPerChild(durableRemote, durableLocal, sizes.warmChildren);
      const [cpuDurableRemote, cpuDurableLocal] = await cpuPerChild(durableRemote, durableLocal);
      opts.log(`scale-out: with a state directory, remote ${cpuDurableRemote.toFixed(3)} ms, local ${cpuDurableLocal.toFixed(3)} ms`);

      return [
        row({
          case: 'remote.steer_queued_p50',
          figure: steerRemote,
          unit: 'µs',
          baseline: wsRtt + pubAck,
          baseline_unit: 'µs (bare ws rtt + bare publish-ack)',
          goal: '<= 1.5',
          note: `ws ${wsRtt.toFixed(0)} + ack ${pubAck.toFixed(0)}`,
        }),
        row({
          case: 'remote.steer_local_p50',
          figure: steerLocal,
          unit: 'µs',
          baseline: wsRtt,
          baseline_unit: 'µs (bare ws rtt)',
          note: 'the same steer, in-process child',
        }),
        row({ case: 'remote.spawn_first_event_p50', figure: spawnRemote, unit: 'µs', baseline: spawnLocal, baseline_unit: 'µs (local child)' }),
        row({
          case: 'remote.cp_cpu_per_child',
          figure: cpuRemote,
          unit: 'ms',
          baseline: cpuLocal,
          baseline_unit: 'ms (local child)',
          goal: '<= 2',
          note: '4 runner events each, spawn to entry',
        }),
        row({
          case: 'remote.cp_cpu_per_child.over_floor',
          figure: cpuRemote,
          unit: 'ms',
          baseline: cpuLocal + natsFloor,
          baseline_unit: 'ms (local child + the NATS client alone on its traffic)',
          goal: '<= 1.2',
          note: `NATS floor ${natsFloor.toFixed(3)} ms a child: ${traffic.events.length} worker events (${traffic.events.reduce((n, e) => n + e.length, 0)} bytes) and one assignment, decoded by a bare client (bench/servers/nats-bare.ts)`,
        }),
        row({
          case: 'remote.cp_cpu_per_child_durable',
          figure: cpuDurableRemote,
          unit: 'ms',
          baseline: cpuDurableLocal,
          baseline_unit: 'ms (local child, same store)',
          goal: '<= 2',
          note: 'both with --state-dir: events through the durable feed, acked after commit',
        }),
        row({
          case: 'remote.children_per_cp_core_second',
          figure: carried,
          unit: 'children/s',
          note: 'remote children one control-plane core takes from spawn to entry per second',
        }),
      ];
    } finally {
      for (const c of clients) await c.close().catch(() => undefined);
      for (const p of procs) await p.stop();
      await nats?.dispose();
    }
  },
};
