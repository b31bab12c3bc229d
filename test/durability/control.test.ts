// The kill -9 oracle's control experiment: the same seeded schedule, re-binding and checks as
// kill9.test.ts, but the server lives and the hosts drop their connections instead of the
// server dying. Every promise that needs no store holds on any correct server, today's included,
// so a false alarm of the oracle shows here, where nothing was lost. Nothing restarts to settle
// the children still running, so the hosts interrupt them before the checks.
import { afterEach, describe, it } from 'vitest';
import { killAll } from '../helpers/process.ts';
import { connectHost, envInt, freshStateDir, mustCall, removeStateDir, sigkill, startServer, type Host } from './harness.ts';
import * as oracle from './oracle.ts';
import * as recovery from './recovery.ts';
import { newLedger, runSchedule, seededRng, type Ledger } from './schedule.ts';

const ROUNDS = 10;
const BASE_SEED = envInt('KILL9_SEED', Math.floor(Math.random() * 2 ** 32));

/** What the restart would have settled: every announced child without a completion is stopped. */
async function stopTheRest(ledger: Ledger, hosts: Host[], history: oracle.History): Promise<void> {
  for (const child of oracle.announced(ledger, history).values()) {
    if (oracle.completions(history, child).length > 0) continue;
    const session = ledger.sessions.find((s) => s.session_id === child.sid)!;
    const reply = await mustCall<{ found: boolean; interrupted: string[] }>(hosts[session.hosts[0]!]!, 'subagent.interrupt', {
      session_id: child.sid,
      subagent_id: child.id,
    });
    ledger.interrupts.push({ session_id: child.sid, subagent_id: child.id, reply });
  }
}

afterEach(async () => {
  await killAll();
});

describe('the kill -9 oracle on a living server whose hosts drop their connections', () => {
  it(`holds every promise that needs no store (seeds ${BASE_SEED}+${ROUNDS - 1})`, async () => {
    const dir = await freshStateDir();
    const server = await startServer(dir);
    for (let i = 0; i < ROUNDS; i++) {
      const seed = (BASE_SEED + i) >>> 0;
      const r = seededRng(seed);
      const before = await Promise.all(Array.from({ length: r.int(1, 3) }, (_, k) => connectHost(server, k)));
      const epoch = before[0]!.ready.payload.replay_epoch as string;
      const ledger = newLedger(seed, before);
      await runSchedule(r, ledger, async () => {
        await Promise.all(before.map((h) => h.close()));
      });
      const v = new oracle.Violations(`kill9 control seed ${seed} (rerun: KILL9_SEED=${seed} npx vitest run test/durability/control.test.ts)`);
      const hosts = await recovery.reattach(server, ledger, epoch, v);
      v.throwIfAny('on re-binding');
      const history = await recovery.replay(ledger, hosts, epoch, v);
      v.throwIfAny('in the replay');
      await stopTheRest(ledger, hosts, history);
      await recovery.awaitCompletions(ledger, hosts, history, v);
      await recovery.awaitDelegations(ledger, hosts, history, v);
      oracle.checkSeqs(history, v);
      oracle.checkChildren(ledger, history, v);
      oracle.checkSteers(ledger, history, v);
      oracle.checkDelegationsComplete(ledger, history, v);
      await recovery.checkResults(ledger, hosts, history, v);
      const fresh = await recovery.retryKeys(ledger, hosts, history, v);
      await recovery.checkNoNewChildren(ledger, hosts, history, fresh, v);
      v.throwIfAny('on a living server');
      await recovery.stopFresh(hosts, fresh);
      await Promise.all(hosts.map((h) => h.close()));
    }
    await sigkill(server);
    await removeStateDir(dir);
  }, 60_000);
});
