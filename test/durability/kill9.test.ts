// Crash safety, proven on real processes (../shared/design/durability.md, "Proof"): a server on a
// state directory runs a seeded random schedule (schedule.ts) and is killed with SIGKILL at a
// random moment, requests in flight; a new server starts on the same directory and the hosts do
// what the design tells them to (recovery.ts) while the oracle (oracle.ts) checks the promises
// against what the hosts were told. Several rounds share one directory, each restart serving the
// next round, so a directory also lives through many restarts; each directory is its own test.
// And one deterministic orderly stop: SIGTERM settles every child before exit, so the next start
// has nothing to settle.
//
//   KILL9_ROUNDS   rounds in all (default 100)
//   KILL9_PER_DIR  rounds sharing one state directory (default 5)
//   KILL9_SEED     the first round's seed (default random); round i has seed KILL9_SEED + i
//   KILL9_CHECKPOINT_MS  passes --checkpoint-ms to every server (default: the server's own)
// A failure names the round's seed and the command that reruns it; scripts/soak-kill9.sh runs more.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { killAll, WAIT_MS } from '../helpers/process.ts';
import type { WireEvent } from '../helpers/rpc-client.ts';
import {
  connectHost,
  envInt,
  freshStateDir,
  lastSeen,
  mustCall,
  removeStateDir,
  sigkill,
  sigterm,
  startServer,
  within,
  type Host,
  type Server,
} from './harness.ts';
import * as oracle from './oracle.ts';
import * as recovery from './recovery.ts';
import { newLedger, runSchedule, seededRng, type Ledger } from './schedule.ts';

const ROUNDS = Math.max(1, envInt('KILL9_ROUNDS', 100));
const PER_DIR = Math.max(1, envInt('KILL9_PER_DIR', 5));
const BASE_SEED = envInt('KILL9_SEED', Math.floor(Math.random() * 2 ** 32));
/**
 * A round takes about a second here (a start of the bin ~0.4 s, the schedule up to 0.4 s, the
 * checks); the bound leaves room for a machine loaded by other work.
 */
const ROUND_MS = 20_000;

const rerun = (seed: number, rounds = 1) => `KILL9_SEED=${seed} KILL9_ROUNDS=${rounds} KILL9_PER_DIR=${PER_DIR} npx vitest run test/durability/kill9.test.ts`;

/** One state directory's life: its server now, its epoch, and what earlier rounds left in it. */
interface Directory {
  readonly dir: string;
  server: Server;
  readonly epoch: string;
  /** gateway.ready on the directory's first start (nothing to recover yet). */
  readonly firstReady: WireEvent;
  readonly earlier: recovery.Snapshot[];
  /** Starts after a kill so far. */
  restarts: number;
  /** Sessions created there (answered), and session.create requests the kills cut off. */
  sessions: number;
  createsLost: number;
}

/** What the rounds that passed exercised, printed at the end: a vacuous run would show here. */
const tally = { rounds: 0, children: 0, settled: 0, queued: 0, missed: 0, cut: 0, keys: 0 };

function tallyRound(ledger: Ledger, history: oracle.History): void {
  const settled = oracle.settledByRestart(ledger, history);
  tally.rounds += 1;
  tally.children += oracle.announced(ledger, history).size;
  tally.settled += settled.children;
  tally.queued += ledger.steers.filter((s) => s.reply?.status === 'queued').length;
  tally.missed += settled.steers;
  tally.cut += ledger.createsLost + [...ledger.spawns, ...ledger.steers].filter((x) => !x.reply && !x.error).length;
  tally.keys += new Set(ledger.spawns.flatMap((x) => x.params.idempotency_key ?? [])).size;
}

afterAll(() => {
  const t = tally;
  console.log(
    `kill9: ${t.rounds} rounds passed; ${t.children} children (${t.settled} settled by a restart), ${t.queued} steers queued ` +
      `(${t.missed} missed at a restart), ${t.cut} requests cut off by a kill, ${t.keys} idempotency keys retried`,
  );
});

async function closeAll(hosts: readonly Host[]): Promise<void> {
  await Promise.all(hosts.map((h) => h.close()));
}

/** Promises 2-5 and `recovered`, over the history of a round whose server was killed and restarted. */
async function checkRestart(d: Directory, ledger: Ledger, hosts: Host[], history: oracle.History, v: oracle.Violations): Promise<void> {
  await recovery.awaitCompletions(ledger, hosts, history, v);
  await recovery.awaitDelegations(ledger, hosts, history, v);
  oracle.checkSeqs(history, v);
  oracle.checkChildren(ledger, history, v);
  oracle.checkSteers(ledger, history, v);
  oracle.checkQuiet(ledger, history, v);
  oracle.checkDelegationsComplete(ledger, history, v);
  await recovery.checkResults(ledger, hosts, history, v);
  const settled = oracle.settledByRestart(ledger, history);
  const want = { min: d.sessions, max: d.sessions + d.createsLost, children: settled.children, steers: settled.steers };
  oracle.checkRecovered('gateway.ready after the restart', hosts[0]!.ready.payload.recovered, want, v);
  oracle.checkRecovered('server.info after the restart', (await mustCall(hosts[0]!, 'server.info', {})).recovered, want, v);
  if (d.restarts === 1)
    oracle.checkRecovered('gateway.ready on a fresh directory', d.firstReady.payload.recovered, { min: 0, max: 0, children: 0, steers: 0 }, v);
}

/** One round: schedule, SIGKILL, restart on the same directory, re-bind, replay, check. */
async function round(d: Directory, seed: number, where: string): Promise<void> {
  const r = seededRng(seed);
  const before = await Promise.all(Array.from({ length: r.int(1, 3) }, (_, i) => connectHost(d.server, i)));
  const ledger = newLedger(seed, before);
  await runSchedule(r, ledger, () => sigkill(d.server));
  d.server = await startServer(d.dir);
  d.restarts += 1;
  d.sessions += ledger.sessions.length;
  d.createsLost += ledger.createsLost;
  const v = new oracle.Violations(where);
  const hosts = await recovery.reattach(d.server, ledger, d.epoch, v);
  try {
    // Without the sessions re-bound there is nothing to read: say so before anything else.
    v.throwIfAny('on re-binding after the restart');
    await recovery.checkEarlier(hosts[0]!, d.earlier, v);
    const history = await recovery.replay(ledger, hosts, d.epoch, v);
    v.throwIfAny('in the replay after the restart');
    await checkRestart(d, ledger, hosts, history, v);
    const fresh = await recovery.retryKeys(ledger, hosts, history, v);
    await recovery.checkNoNewChildren(ledger, hosts, history, fresh, v);
    v.throwIfAny('after the restart');
    tallyRound(ledger, history);
    await recovery.stopFresh(hosts, fresh);
    d.earlier.push(...(await recovery.snapshotRings(ledger, hosts)));
  } finally {
    await closeAll(hosts);
  }
}

async function openDirectory(): Promise<Directory> {
  const dir = await freshStateDir();
  const server = await startServer(dir);
  const probe = await connectHost(server, 0);
  await probe.close();
  return { dir, server, epoch: probe.ready.payload.replay_epoch as string, firstReady: probe.ready, earlier: [], restarts: 0, sessions: 0, createsLost: 0 };
}

/** The round and its kept directory on every failure; the stack only where it says more than a list. */
function annotated(err: unknown, where: string, dir: string): Error {
  const message = err instanceof Error ? err.message : String(err);
  const kept = `\n(state directory kept at ${dir})`;
  if (message.startsWith(where)) return new Error(`${message}${kept}`);
  return new Error(`${where}: ${message}${kept}`, { cause: err });
}

afterEach(async () => {
  await killAll();
});

describe('kill -9 at a random moment, then a start on the same state directory', () => {
  for (let from = 0; from < ROUNDS; from += PER_DIR) {
    const count = Math.min(PER_DIR, ROUNDS - from);
    const dirSeed = (BASE_SEED + from) >>> 0;
    it(
      `rounds ${from + 1}-${from + count} of ${ROUNDS} on one directory (seeds ${dirSeed}+${count - 1})`,
      async () => {
        const d = await openDirectory();
        try {
          for (let i = 0; i < count; i++) {
            const seed = (dirSeed + i) >>> 0;
            const withEarlier = i === 0 ? '' : `; with its directory's earlier rounds: ${rerun(dirSeed, i + 1)}`;
            const where = `kill9 seed ${seed} (round ${from + i + 1}; rerun it: ${rerun(seed)}${withEarlier})`;
            await round(d, seed, where).catch((err: unknown) => {
              throw annotated(err, where, d.dir);
            });
          }
        } finally {
          await sigkill(d.server);
        }
        await removeStateDir(d.dir);
      },
      count * ROUND_MS + 10_000,
    );
  }
});

const hang = (goal: string, first: unknown = { op: 'say', text: `${goal} is up` }) => ({ goal, agent: { kind: 'scripted', steps: [first, { op: 'hang' }] } });

describe('SIGTERM, then a start on the same state directory', () => {
  it('interrupts every child and sends its completion before exit; the next start settles nothing', async () => {
    const dir = await freshStateDir();
    let server = await startServer(dir);
    const host = await connectHost(server, 0);
    const a = await mustCall<{ session_id: string; session_key: string }>(host, 'session.create', {});
    const b = await mustCall<{ session_id: string; session_key: string }>(host, 'session.create', {});
    type Spawned = { delegation_id: string; subagent_ids: string[] };
    const spawns = [
      { session: a, reply: await mustCall<Spawned>(host, 'delegation.spawn', { session_id: a.session_id, tasks: [hang('a0'), hang('a1'), hang('a2')] }) },
      // The session's fourth child waits behind three running ones: queued at the stop.
      { session: a, reply: await mustCall<Spawned>(host, 'delegation.spawn', { session_id: a.session_id, tasks: [hang('a3')] }) },
      { session: b, reply: await mustCall<Spawned>(host, 'delegation.spawn', { session_id: b.session_id, tasks: [hang('b0', { op: 'wait_steer' })] }) },
    ];
    const a0 = spawns[0]!.reply.subagent_ids[0]!;
    const b0 = spawns[2]!.reply.subagent_ids[0]!;
    for (const id of [...spawns[0]!.reply.subagent_ids, b0]) {
      await within(
        host.client.waitForEvent((e) => e.type === 'subagent.start' && e.payload.subagent_id === id),
        WAIT_MS,
        `the start of ${id}`,
      );
    }
    // One steer a hanging child can never take (missed at the stop), one taken by wait_steer.
    const missed = await mustCall<{ status: string; steer_id: string }>(host, 'subagent.steer', {
      session_id: a.session_id,
      subagent_id: a0,
      text: 'never taken',
    });
    const taken = await mustCall<{ status: string; steer_id: string }>(host, 'subagent.steer', { session_id: b.session_id, subagent_id: b0, text: 'taken' });
    await within(
      host.client.waitForEvent((e) => e.type === 'subagent.steer.delivered' && e.payload.steer_id === taken.steer_id),
      WAIT_MS,
      'the delivery',
    );

    expect(await sigterm(server)).toEqual({ code: 0, signal: null });
    await host.client.closed;
    const completionOf = (id: string) => host.client.events.filter((e) => e.type === 'subagent.complete' && e.payload.subagent_id === id);
    for (const id of spawns.flatMap((s) => s.reply.subagent_ids)) {
      expect(
        completionOf(id).map((e) => e.payload.status),
        `${oracle.P2}: ${id} ends once, interrupted, its completion sent before exit`,
      ).toEqual(['interrupted']);
    }
    const detail = completionOf(a0)[0]!.payload.missed_steer_detail as Array<{ steer_id: string }> | undefined;
    expect(
      detail?.map((m) => m.steer_id),
      `${oracle.P3}: the steer a0 never took is missed`,
    ).toEqual([missed.steer_id]);

    server = await startServer(dir);
    const again = await connectHost(server, 0);
    for (const s of [a, b]) {
      const reply = await again.client.call('session.attach', { session_id: s.session_id, session_key: s.session_key });
      expect(reply.error, `${oracle.P1}: session.attach ${s.session_id} after a SIGTERM and a start`).toBeUndefined();
    }
    const recovered = { sessions: 2, children_settled: 0, steers_missed: 0 };
    expect(again.ready.payload.recovered, `${oracle.RECOVERED}: gateway.ready after an orderly stop`).toEqual(recovered);
    expect((await mustCall(again, 'server.info', {})).recovered, `${oracle.RECOVERED}: server.info after an orderly stop`).toEqual(recovered);
    for (const s of [a, b]) {
      const last_seen = lastSeen(host, s.session_id);
      const r = await mustCall<{ events: WireEvent[]; truncated: boolean; epoch: string }>(again, 'session.events.since', {
        session_id: s.session_id,
        session_key: s.session_key,
        last_seen,
      });
      expect(r, `${oracle.P4}: the replay after an orderly stop`).toMatchObject({ truncated: false, epoch: host.ready.payload.replay_epoch });
      expect(r.events.map((e) => e.seq)).toEqual(r.events.map((_, k) => last_seen + 1 + k));
      // The host read every completion before exit; what it may lack is a turn-later delegation.complete or session.idle.
      const more = r.events.filter((e) => e.type !== 'delegation.complete' && e.type !== 'session.idle');
      expect(more, `${oracle.QUIET}: after an orderly stop the start settles nothing`).toEqual([]);
    }
    for (const { session, reply } of spawns) {
      const r = await mustCall<{ done: boolean; results: Array<{ subagent_id: string; status: string }> }>(again, 'delegation.result', {
        session_id: session.session_id,
        delegation_id: reply.delegation_id,
      });
      expect(r.done, `${oracle.P5}: delegation.result ${reply.delegation_id} after the start`).toBe(true);
      expect(r.results.map((e) => [e.subagent_id, e.status])).toEqual(reply.subagent_ids.map((id) => [id, 'interrupted']));
    }
    await again.close();
    await sigkill(server);
    await removeStateDir(dir);
  });
});
