// Case 11's floor for control-plane CPU per remote child: what the NATS client alone spends on the
// traffic a control plane receives for one remote child (its assignment's request and reply, and
// every `sr.ev.<child>` message its worker sends), captured from the real run and replayed to a
// bare process (bench/servers/nats-bare.ts) that only decodes it. A remote child cannot cost its
// control plane less than a local child plus this.
import { once } from 'node:events';
import { connect } from '@nats-io/transport-node';
import { startProcess } from '../lib/rpc.ts';

export interface Traffic {
  /** One child's worker events, as sent. */
  readonly events: readonly Uint8Array[];
  /** The assignment request the control plane sent a worker. */
  readonly assign: Uint8Array;
}

/** Taps the worker events and assignments of the remote children `run` spawns (untimed: a second subscriber). */
export async function captureTraffic(url: string, run: () => Promise<void>): Promise<Traffic> {
  const nc = await connect({ servers: url, noAsyncTraces: true });
  const byChild = new Map<string, Uint8Array[]>();
  let assign: Uint8Array | undefined;
  nc.subscribe('sr.ev.*', {
    callback: (_err, m) => {
      let list = byChild.get(m.subject);
      if (!list) byChild.set(m.subject, (list = []));
      list.push(m.data);
    },
  });
  nc.subscribe('sr.w.*.assign', {
    callback: (_err, m) => {
      assign ??= m.data;
    },
  });
  await nc.flush();
  await run();
  await nc.flush();
  await nc.close();
  // Every child runs the same steps: the one that sent the most is one that was seen whole.
  const events = [...byChild.values()].reduce<Uint8Array[]>((a, b) => (b.length > a.length ? b : a), []);
  if (events.length === 0 || assign === undefined) throw new Error('no remote traffic captured');
  return { events, assign };
}

const ASSIGNED = JSON.stringify({ ok: true });

/** The bare process's CPU per child for `children` children's worth of `t`, ms (after one warm-up round). */
export async function natsFloorMs(url: string, t: Traffic, children: number): Promise<number> {
  const proc = startProcess(['--import', 'tsx', 'bench/servers/nats-bare.ts'], { NATS_URL: url });
  const nc = await connect({ servers: url, noAsyncTraces: true });
  try {
    const stdout = proc.child.stdout;
    if (!stdout) throw new Error('no stdout');
    stdout.setEncoding('utf8');
    await once(stdout, 'data');
    nc.subscribe('bare.assign', {
      callback: (_err, m) => {
        m.respond(ASSIGNED);
      },
    });
    const round = async (n: number): Promise<number> => {
      const done = new Promise<void>((resolve) => nc.subscribe('bare.done', { max: 1, callback: () => resolve() }));
      await nc.flush();
      const cpu0 = proc.cpu();
      await nc.request('bare.go', JSON.stringify({ children: n, events: t.events.length, assign: new TextDecoder().decode(t.assign) }), { timeout: 60_000 });
      for (let i = 0; i < n; i++) {
        for (const e of t.events) nc.publish(`bare.ev.c${i}`, e);
        if (i % 50 === 49) await nc.flush();
      }
      await done;
      return (proc.cpu() - cpu0) / 1000 / n;
    };
    await round(Math.min(200, children));
    return await round(children);
  } finally {
    await nc.close();
    await proc.stop();
  }
}
