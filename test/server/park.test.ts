// A parked session closes once it has stayed empty for the whole park TTL, counted from the last
// time its slot emptied: one timer per parking serves every attach and leave in between (an HTTP
// call attaches and leaves on each request), so the timer must re-arm, never close early, and
// never close a session that is attached when it fires.
import { afterEach, describe, expect, it } from 'vitest';
import { RpcServer } from '../../src/rpc/server.ts';
import { ManualClock } from '../helpers/manual-clock.ts';
import { connectMemory, ok } from '../helpers/rpc-client.ts';

const TTL = 60_000;

/** A manual clock whose wall time can be stepped (NTP, a VM resumed) while its timers' time runs on. */
class SteppedClock extends ManualClock {
  step = 0;
  /** setTimeout calls made: one parking must cost one timer however many requests come and go. */
  armed = 0;
  override now(): number {
    return super.now() + this.step;
  }
  monotonic(): number {
    return super.now();
  }
  override setTimeout(fn: () => void, ms: number): unknown {
    this.armed++;
    return super.setTimeout(fn, ms);
  }
}
const servers: RpcServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
});

async function parked(): Promise<{ server: RpcServer; clock: SteppedClock; session_id: string; session_key: string }> {
  const clock = new SteppedClock();
  const server = new RpcServer({ clock, park_ttl_ms: TTL });
  servers.push(server);
  const ep = connectMemory(server);
  const s = await ok(ep.client, 'session.create', {});
  ep.close();
  await ep.conn.whenClosed;
  return { server, clock, session_id: s.session_id, session_key: s.session_key };
}

describe('park expiry', () => {
  it('counts the TTL from the last leave, across requests that attach and leave', async () => {
    const { server, clock, session_id, session_key } = await parked();
    const armed = clock.armed;
    for (let i = 0; i < 4; i++) {
      await clock.advance(TTL / 2);
      const t = server.transientId();
      server.sessions.rebind(session_id, session_key, t);
      server.sessions.detach(session_id, t);
    }
    // The one timer fired at TTL, 1.5 and 2 TTL, each time re-arming for the rest: three timers for
    // four requests (one per request, the old way, was four), however many requests come between.
    expect(clock.armed - armed).toBe(3);
    // Two TTLs since the first parking; the TTL now counts from the last leave.
    await clock.advance(TTL - 1_000);
    expect(server.sessions.get(session_id)).toBeDefined();
    await clock.advance(1_000);
    expect(server.sessions.get(session_id)).toBeUndefined();
  });

  it('never closes a session attached when the timer fires, and parks it again when it leaves', async () => {
    const { server, clock, session_id, session_key } = await parked();
    const t = server.transientId();
    await clock.advance(TTL / 2);
    server.sessions.rebind(session_id, session_key, t);
    await clock.advance(TTL * 3);
    expect(server.sessions.get(session_id)).toBeDefined();
    server.sessions.detach(session_id, t);
    await clock.advance(TTL - 1);
    expect(server.sessions.get(session_id)).toBeDefined();
    await clock.advance(1);
    expect(server.sessions.get(session_id)).toBeUndefined();
  });

  it("counts on the timers' time: a wall-clock step forward closes nothing early", async () => {
    const { server, clock, session_id, session_key } = await parked();
    await clock.advance(TTL / 2);
    const t = server.transientId();
    server.sessions.rebind(session_id, session_key, t);
    server.sessions.detach(session_id, t);
    clock.step = TTL * 10;
    // The first parking's timer fires now: half a TTL since the leave on the timers' clock.
    await clock.advance(TTL / 2);
    expect(server.sessions.get(session_id)).toBeDefined();
    await clock.advance(TTL / 2);
    expect(server.sessions.get(session_id)).toBeUndefined();
  });
});
