// One NATS serves one control plane: the leader lease (src/remote/control/lease.ts). The decision
// alone (no NATS); the lease against a real nats-server -js in this process (races, lapse, a foreign
// write, a lost ack); and real `subrun serve --nats` processes: a second plane refused, a standby
// taking over from a SIGKILLed leader, from a cleanly stopped one at once, and a stalled leader
// fenced with exit 3. Every wait is on a line, an event or an exit.
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Kvm, type KV } from '@nats-io/kv';
import { pino } from 'pino';
import { decide, Lease, LEASE_BUCKET, LEASE_KEY, LeaseHeldError, type LeaseRecord, type Seen, type Self } from '../../src/remote/control/lease.ts';
import { Latch } from '../../src/remote/wait.ts';
import { startNats, type Nats } from '../helpers/nats.ts';
import { call, connectWs, killAll, runSubrun, spawnSubrun, startWsServer, WAIT_MS, type Proc } from '../helpers/process.ts';
import { resume, suspend } from '../helpers/suspend.ts';

let nats: Nats | undefined;
afterEach(async () => {
  await killAll();
  await nats?.dispose();
  nats = undefined;
});

describe('decide', () => {
  const self: Self = { holder: 'me', host: 'here', pid_ns: 'pid:[1]', alive: (pid) => pid === 100 };
  const record = (over: Partial<LeaseRecord> = {}): LeaseRecord => ({ holder: 'other', pid: 100, host: 'here', pid_ns: 'pid:[1]', renewed_at: 0, ...over });
  const seen = (over: Partial<Seen> = {}): Seen => ({ revision: 7, created: 10_000, deleted: false, record: record(), ...over });

  it('creates a missing key, and takes a released one at the delete marker’s revision', () => {
    expect(decide(undefined, 0, 3000, self)).toEqual({ take: 'create', previous: 'none' });
    expect(decide(seen({ deleted: true, record: undefined }), 10_001, 3000, self)).toEqual({ take: 'update', revision: 7, previous: 'released' });
  });

  it('waits for a live holder until lease_ms past the server’s created time, then takes it', () => {
    expect(decide(seen(), 13_000, 3000, self)).toEqual({ take: false, holder: record(), lapses_at: 13_000 });
    expect(decide(seen(), 13_001, 3000, self)).toEqual({ take: 'update', revision: 7, previous: 'lapsed' });
    // The holder's own clock says nothing: only `created` counts.
    expect(decide(seen({ record: record({ renewed_at: 0 }) }), 11_000, 3000, self).take).toBe(false);
  });

  it('takes at once from a dead pid on its own host and pid namespace, and only there', () => {
    expect(decide(seen({ record: record({ pid: 55 }) }), 11_000, 3000, self)).toEqual({ take: 'update', revision: 7, previous: 'holder dead' });
    expect(decide(seen({ record: record({ pid: 55, host: 'elsewhere' }) }), 11_000, 3000, self).take).toBe(false);
    expect(decide(seen({ record: record({ pid: 55, pid_ns: 'pid:[2]' }) }), 11_000, 3000, self).take).toBe(false);
    // A value that is no record is only freed by its lapse.
    expect(decide(seen({ record: undefined }), 11_000, 3000, self)).toEqual({ take: false, holder: undefined, lapses_at: 13_000 });
  });
});

/** A pino logger whose lines land in `lines` (parsed), for waiting on one. */
function capture(): { logger: pino.Logger; lines: Array<Record<string, unknown>>; next: (msg: RegExp) => Promise<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<{ msg: RegExp; latch: Latch<Record<string, unknown>> }> = [];
  const logger = pino(
    { level: 'info' },
    {
      write: (s: string) => {
        const line = JSON.parse(s) as Record<string, unknown>;
        lines.push(line);
        for (const w of waiters) if (w.msg.test(String(line.msg))) w.latch.open(line);
      },
    },
  );
  const next = (msg: RegExp) => {
    const seen = lines.find((l) => msg.test(String(l.msg)));
    if (seen) return Promise.resolve(seen);
    const latch = new Latch<Record<string, unknown>>();
    waiters.push({ msg, latch });
    return latch.promise;
  };
  return { logger, lines, next };
}

describe('the lease on a real NATS', () => {
  const conns: NatsConnection[] = [];
  const leases: Lease[] = [];
  afterEach(async () => {
    for (const l of leases.splice(0)) await l.release();
    for (const c of conns.splice(0)) await c.close();
  });
  async function conn(): Promise<NatsConnection> {
    nats ??= await startNats();
    const c = await connect({ servers: nats.url });
    conns.push(c);
    return c;
  }
  async function bucket(): Promise<KV> {
    return new Kvm(await conn()).create(LEASE_BUCKET, { history: 1 });
  }
  const ghost = { holder: 'ghost', pid: 4242, host: 'elsewhere', renewed_at: 0 };
  const never = () => expect.unreachable('the lease must not be lost');

  it('two planes racing for a free key: exactly one leads, the other is told who', async () => {
    const { logger } = capture();
    const nc = await conn();
    const results = await Promise.allSettled([Lease.acquire({ nc, logger, onLost: never }), Lease.acquire({ nc, logger, onLost: never })]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    expect(won).toHaveLength(1);
    leases.push(...won.map((r) => r.value));
    expect(lost).toHaveLength(1);
    expect(lost[0]?.reason).toBeInstanceOf(LeaseHeldError);
    expect((lost[0]?.reason as Error).message).toContain(`pid ${process.pid} on `);
  });

  it('a standby waits for a live leader, and takes over when its lease lapses; the leader cut from NATS says so', async () => {
    const a = capture();
    const lost = new Latch<string>();
    const leader = await Lease.acquire({ nc: await conn(), lease_ms: 600, logger: a.logger, onLost: (why) => lost.open(why) });
    const b = capture();
    const standing = Lease.acquire({ nc: await conn(), lease_ms: 600, standby: true, logger: b.logger, onLost: never });
    const waiting = await b.next(/^standby: /);
    expect(waiting).toMatchObject({ holder_pid: process.pid });
    // The leader's connection goes: it cannot renew, so its key lapses for the standby.
    await conns[0]?.close();
    const standby = await standing;
    leases.push(standby);
    expect(await b.next(/^took the lease/)).toMatchObject({ previous: 'lapsed' });
    expect(standby.revision).toBeGreaterThan(leader.revision);
    // Cut off, the old leader cannot act on anything; it says the lease may be gone, and is fenced
    // by its next renew should it ever reach NATS again (below, a stalled leader that does).
    expect(await a.next(/^lease: not renewed within the lease/)).toMatchObject({ lease_ms: 600 });
    expect(lost.opened).toBe(false);
    expect(b.lines.filter((l) => /^standby: /.test(String(l.msg)))).toHaveLength(1);
  });

  it('without standby, a live holder written by anyone is refused in one line naming it', async () => {
    const kv = await bucket();
    await kv.put(LEASE_KEY, JSON.stringify({ ...ghost, listener: 'ws://10.0.0.9:8787/' }));
    const err = await Lease.acquire({ nc: await conn(), lease_ms: 60_000, logger: capture().logger, onLost: never }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseHeldError);
    const message = (err as Error).message;
    expect(message.split('\n')).toHaveLength(1);
    expect(message).toMatch(
      /^another control plane leads on this NATS: pid 4242 on elsewhere \(ws:\/\/10\.0\.0\.9:8787\/\), lease renewed \d+ ms ago; .*--standby/,
    );
  });

  it('a leader whose key someone else rewrote loses it, once', async () => {
    const lost = new Latch<string>();
    let calls = 0;
    const leader = await Lease.acquire({
      nc: await conn(),
      logger: capture().logger,
      onLost: (why) => {
        calls++;
        lost.open(why);
      },
    });
    leases.push(leader);
    await (await bucket()).put(LEASE_KEY, JSON.stringify(ghost));
    expect(await lost.promise).toBe('the NATS lease was taken by pid 4242 on elsewhere');
    expect(calls).toBe(1);
  });

  it('a write of its own whose ack it missed is adopted, not taken for a takeover', async () => {
    const { logger } = capture();
    const leader = await Lease.acquire({ nc: await conn(), logger, onLost: never });
    leases.push(leader);
    const kv = await bucket();
    const watch = await kv.watch({ key: LEASE_KEY });
    // As if a renew landed but its ack was lost: the key is at a revision the leader never saw.
    const landed = await kv.put(LEASE_KEY, JSON.stringify({ holder: leader.holder, pid: process.pid, host: 'here', renewed_at: -1 }));
    let next: { revision: number; holder: string; renewed_at: number } | undefined;
    for await (const e of watch) {
      if (e.revision <= landed) continue;
      next = { revision: e.revision, ...e.json<{ holder: string; renewed_at: number }>() };
      break;
    }
    watch.stop();
    // The write after it is the leader's renew, a CAS that could only succeed on the adopted revision.
    expect(next).toMatchObject({ holder: leader.holder });
    expect(next?.renewed_at).not.toBe(-1);
  });
});

// ---- real processes ----

const PLANE = ['serve', '--ws', '--port', '0', '--token', 'test-token'];
const tookLine = (l: string) => String((JSON.parse(l) as { msg?: unknown }).msg).startsWith('took the lease');
const waitingLine = (l: string) => String((JSON.parse(l) as { msg?: unknown }).msg).startsWith('standby: ');

/** The standby's takeover line, then its listening line; a session on its listener works. */
async function servesAfterTakeover(p: Proc): Promise<{ previous: unknown }> {
  const took = JSON.parse(await p.stderr.take(tookLine, WAIT_MS, 'the takeover line')) as { previous: unknown };
  const listening = await p.stderr.take((l) => l.startsWith('subrun listening on '), WAIT_MS, 'the listening line');
  const url = listening.slice('subrun listening on '.length).trim();
  const { peer } = await connectWs({ proc: p, url, port: Number(new URL(url).port), token: 'test-token' });
  expect(await call(peer, 'session.create')).toHaveProperty('session_id');
  await peer.close();
  return took;
}

describe('serve --nats', () => {
  it('a second control plane on the same NATS exits 2 in one line naming the first; the first serves on', async () => {
    nats = await startNats();
    const first = await startWsServer(['--nats', nats.url]);
    const r = await runSubrun([...PLANE, '--nats', nats.url]);
    expect(r.code).toBe(2);
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`subrun: another control plane leads on this NATS: pid ${first.proc.child.pid} on `);
    expect(lines[0]).toContain(`(${first.url})`);
    const { peer } = await connectWs(first);
    expect(await call(peer, 'session.create')).toHaveProperty('session_id');
    expect(first.proc.stderr.all.join('\n')).not.toContain('fenced');
  });

  it('--standby and --lease-ms need --nats', async () => {
    for (const flag of [['--standby'], ['--lease-ms', '1000']]) {
      const r = await runSubrun([...PLANE, ...flag]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('--standby and --lease-ms need --nats');
    }
  });

  it('--standby waits while the leader lives, and serves once the leader is SIGKILLed', async () => {
    nats = await startNats();
    const leader = await startWsServer(['--nats', nats.url]);
    const standby = spawnSubrun([...PLANE, '--nats', nats.url, '--standby']);
    expect(JSON.parse(await standby.stderr.take(waitingLine, WAIT_MS, 'the waiting line'))).toMatchObject({ holder_pid: leader.proc.child.pid });
    // Waiting, it serves nothing, and the leader serves on.
    const { peer } = await connectWs(leader);
    expect(await call(peer, 'session.create')).toHaveProperty('session_id');
    expect(standby.stderr.all.some((l) => l.startsWith('subrun listening on '))).toBe(false);
    await leader.proc.kill();
    // Same machine: its pid is gone, so the standby need not wait out the lease.
    expect(await servesAfterTakeover(standby)).toMatchObject({ previous: 'holder dead' });
  });

  it('a leader stopped with SIGTERM releases the lease: the standby takes over without waiting it out', async () => {
    nats = await startNats();
    // A lease far longer than any wait here: a takeover seen at all was not a lapse.
    const lease = ['--nats', nats.url, '--lease-ms', '600000'];
    const leader = await startWsServer(lease);
    const standby = spawnSubrun([...PLANE, ...lease, '--standby']);
    await standby.stderr.take(waitingLine, WAIT_MS, 'the waiting line');
    leader.proc.child.kill('SIGTERM');
    expect(await servesAfterTakeover(standby)).toMatchObject({ previous: 'released' });
    expect(await leader.proc.waitExit()).toEqual({ code: 0, signal: null });
  });

  it('a stalled leader whose lease a standby took exits 3 with one line when it resumes', async () => {
    nats = await startNats();
    const lease = ['--nats', nats.url, '--lease-ms', '1000'];
    const leader = await startWsServer(lease);
    // Its last start line: stopped before it, the leader would print it on resume.
    await leader.proc.stderr.take((l) => l.startsWith('subrun dashboard: '), WAIT_MS, 'the dashboard line');
    await suspend(leader.proc.child);
    let before = leader.proc.stderr.all.length;
    try {
      const standby = spawnSubrun([...PLANE, ...lease, '--standby']);
      // The stopped leader's pid lives: only the lapse frees the key.
      expect(await servesAfterTakeover(standby)).toMatchObject({ previous: 'lapsed' });
    } finally {
      before = leader.proc.stderr.all.length;
      resume(leader.proc.child);
    }
    expect(await leader.proc.waitExit()).toEqual({ code: 3, signal: null });
    await leader.proc.stderr.whenEnded();
    // One line for the operator (pino's JSON log lines aside: the stall it noticed, if any).
    const after = leader.proc.stderr.all.slice(before).filter((l) => !l.startsWith('{'));
    expect(after, JSON.stringify(after)).toHaveLength(1);
    expect(after[0]).toMatch(/^subrun: the NATS lease was taken by pid \d+ on .*; this control plane stops serving \(exit 3\)$/);
  });
});
