// Floors for the HTTP rows, measured in the bench's own process in the same run: what the runtime
// itself spends on a steer and on an event, with no transport at all. The server's cost over
// bare node:http can never go below these (the bare server does none of the work), so a ratio
// against bare that misses its goal is judged against `bare + floor` too.
import { pino } from 'pino';
import { RpcServer } from '../../src/rpc/server.ts';
import { JsonText } from '../../src/server/json-text.ts';
import { Metrics } from '../../src/telemetry/metrics.ts';

const cpuUs = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

function server(metrics = false): RpcServer {
  return new RpcServer({
    ...(metrics ? { metrics: new Metrics() } : {}),
    logger: pino({ level: 'silent' }),
    max_concurrent_children: 1024,
    runtime: { max_queued_steers: 100_000, max_queued_steer_bytes: 256 * 1024 * 1024 },
  });
}

/** An answer's value, whether the method answered an object or its text. */
async function valueOf(answer: unknown): Promise<unknown> {
  const v: unknown = await answer;
  return v instanceof JsonText ? v.parse() : v;
}

async function session(s: RpcServer): Promise<{ session_id: string; session_key: string }> {
  return (await valueOf(s.invoke('session.create', {}, s.transientId()).value)) as { session_id: string; session_key: string };
}

/**
 * CPU µs per steer as the HTTP route runs it (a transient transport attached with the session's
 * key, the method, the detach), round-robin over `children` holders, `n` steers.
 */
export async function steerFloorUs(children: number, n: number, metrics = false): Promise<number> {
  const s = server(metrics);
  try {
    const sess = await session(s);
    const t = s.transientId();
    s.sessions.rebind(sess.session_id, sess.session_key, t);
    const tasks = Array.from({ length: children }, (_, i) => ({ goal: `holder ${i}`, agent: { kind: 'scripted', steps: [{ op: 'hang' }] } }));
    const d = (await valueOf(s.invoke('delegation.spawn', { session_id: sess.session_id, tasks }, t).value)) as { subagent_ids: string[] };
    await new Promise((r) => setTimeout(r, 50));
    const round = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const tr = s.transientId();
        s.sessions.rebind(sess.session_id, sess.session_key, tr);
        await s.invoke('subagent.steer', { session_id: sess.session_id, subagent_id: d.subagent_ids[i % children], text: 'steer text' }, tr).value;
        s.sessions.detach(sess.session_id, tr);
      }
    };
    await round(Math.min(2000, n));
    const c0 = cpuUs();
    await round(n);
    return (cpuUs() - c0) / n;
  } finally {
    await s.shutdown();
  }
}

/** CPU µs per event the runtime makes and serialises for one attached sink, for the given tasks. */
export async function eventFloorUs(tasks: unknown[]): Promise<{ us: number; events: number }> {
  const s = server();
  try {
    const sess = await session(s);
    const run = async (): Promise<{ us: number; events: number }> => {
      let events = 0;
      let bytes = 0;
      let done!: () => void;
      const idle = new Promise<void>((resolve) => (done = resolve));
      const sink = s.attachSink(sess.session_id, sess.session_key, {
        event(_seq, type, text) {
          events++;
          bytes += text.length;
          if (type === 'session.idle') done();
        },
        close() {},
      });
      const c0 = cpuUs();
      await s.invoke('delegation.spawn', { session_id: sess.session_id, tasks }, sink.id).value;
      await idle;
      const us = (cpuUs() - c0) / events;
      s.detachSink(sink.id);
      return bytes > 0 ? { us, events } : { us: Number.NaN, events };
    };
    await run();
    return await run();
  } finally {
    await s.shutdown();
  }
}
