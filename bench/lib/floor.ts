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

/** A server as the floors run it (a `serve --ws` keeps metrics; the runtime's bounds as the case's server has them). */
export function floorServer(metrics = false): RpcServer {
  return new RpcServer({
    ...(metrics ? { metrics: new Metrics() } : {}),
    logger: pino({ level: 'silent' }),
    max_concurrent_children: 1024,
    runtime: { max_queued_steers: 100_000, max_queued_steer_bytes: 256 * 1024 * 1024 },
  });
}

/** An answer's value, whether the method answered an object or its text. */
export async function valueOf(answer: unknown): Promise<unknown> {
  const v: unknown = await answer;
  return v instanceof JsonText ? v.parse() : v;
}

export async function session(s: RpcServer): Promise<{ session_id: string; session_key: string }> {
  return (await valueOf(s.invoke('session.create', {}, s.transientId()).value)) as { session_id: string; session_key: string };
}

/** `children` scripted children that hang (hold their steers), spawned on the session's transport `t`. */
export async function holders(s: RpcServer, session_id: string, t: string, children: number): Promise<string[]> {
  const tasks = Array.from({ length: children }, (_, i) => ({ goal: `holder ${i}`, agent: { kind: 'scripted', steps: [{ op: 'hang' }] } }));
  return ((await valueOf(s.invoke('delegation.spawn', { session_id, tasks }, t).value)) as { subagent_ids: string[] }).subagent_ids;
}

/** One keep-alive connection: the route proves a session's key once per connection, not per request. */
const CONNECTION = {};

/** `count` steers round-robin over `ids`, each as the HTTP route runs it: a transient transport attached with the key (proved once per connection), the method, the detach. */
async function steers(s: RpcServer, sess: { session_id: string; session_key: string }, ids: readonly string[], count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const tr = s.transientId();
    s.sessions.rebind(sess.session_id, sess.session_key, tr, CONNECTION);
    await s.invoke('subagent.steer', { session_id: sess.session_id, subagent_id: ids[i % ids.length], text: 'steer text' }, tr).value;
    s.sessions.detach(sess.session_id, tr);
  }
}

/**
 * CPU µs per steer as the HTTP route runs it (a transient transport attached with the session's
 * key, the method, the detach), round-robin over `children` holders, `n` steers.
 */
export async function steerFloorUs(children: number, n: number, metrics = false): Promise<number> {
  const s = floorServer(metrics);
  try {
    const sess = await session(s);
    const t = s.transientId();
    s.sessions.rebind(sess.session_id, sess.session_key, t);
    const ids = await holders(s, sess.session_id, t, children);
    await new Promise((r) => setTimeout(r, 50));
    await steers(s, sess, ids, Math.min(2000, n));
    const c0 = cpuUs();
    await steers(s, sess, ids, n);
    return (cpuUs() - c0) / n;
  } finally {
    await s.shutdown();
  }
}

/**
 * What a steer costs as its child's queue grows: CPU µs per steer (as the route runs it, with the
 * server's metrics on, as `serve --ws` keeps them) over a window of `window` steers per child, at
 * each of `depths` steers already queued per child. Each repetition is a fresh session with fresh
 * children; the first is a warm-up; medians over the rest. Equal figures: nothing in the steer
 * path grows with the queue (issue 24's bench rounds hold ~4,000 queued steers per child).
 */
export async function steerCostByDepthUs(children: number, depths: readonly number[], window: number, reps: number, metrics = true): Promise<number[]> {
  const s = floorServer(metrics);
  try {
    const sess = await session(s);
    const t = s.transientId();
    s.sessions.rebind(sess.session_id, sess.session_key, t);
    const figures: number[][] = depths.map(() => []);
    for (let rep = 0; rep <= reps; rep++) {
      const ids = await holders(s, sess.session_id, t, children);
      await new Promise((r) => setTimeout(r, 20));
      let queued = 0;
      for (const [k, depth] of depths.entries()) {
        await steers(s, sess, ids, (depth - queued) * children);
        const c0 = cpuUs();
        await steers(s, sess, ids, window * children);
        if (rep > 0) figures[k]?.push((cpuUs() - c0) / (window * children));
        queued = depth + window;
      }
      // The children go (their steers with them), wound down before the next repetition's first window.
      for (const id of ids) await valueOf(s.invoke('subagent.interrupt', { session_id: sess.session_id, subagent_id: id }, t).value);
      const scope = s.sessions.scopeOf(s.sessions.authorize(sess.session_id, t));
      while (s.runtime.scoped.list(scope).length > 0) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 20));
    }
    return figures.map((f) => [...f].sort((a, b) => a - b)[Math.floor(f.length / 2)] ?? Number.NaN);
  } finally {
    await s.shutdown();
  }
}

/** CPU µs per event the runtime makes and serialises for one attached sink, for the given tasks. */
export async function eventFloorUs(tasks: unknown[]): Promise<{ us: number; events: number }> {
  const s = floorServer();
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
