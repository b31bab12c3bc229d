// An interrupt a worker never answers is asked a bounded number of times, then the child settles
// alone as child_lost: the real runtime and RemoteChild over a NATS link the test plays, manual clock.
import { describe, expect, it } from 'vitest';
import { errors, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { silentLogger } from '../../src/log.ts';
import type { NatsLink } from '../../src/remote/nats.ts';
import { encode, subjects } from '../../src/remote/wire.ts';
import { INTERRUPT_TRIES, RemoteChild } from '../../src/remote/control/remote-child.ts';
import { RemoteRunner } from '../../src/remote/control/remote-runner.ts';
import { WorkerTable } from '../../src/remote/control/worker-table.ts';
import { PreassignedIds } from '../../src/remote/control/preassigned-ids.ts';
import type { PlacementPort, RemoteChildHandle } from '../../src/remote/control/port.ts';
import { runtimeHarness } from '../helpers/runtime-harness.ts';
import { flush } from '../helpers/manual-clock.ts';

const WORKER = 'wk_silent';

/** The NATS side of one worker that takes every assignment; the test answers each interrupt. */
class WorkerNats {
  /** Interrupt requests in flight, oldest first. */
  readonly interrupts: Array<{ answer(): void; timeOut(): void }> = [];
  interruptsAsked = 0;

  request(subject: string): Promise<{ data: Uint8Array }> {
    if (subject === subjects.assign(WORKER)) return Promise.resolve({ data: encode({ ok: true }) });
    if (subject.startsWith('sr.ctl.')) {
      this.interruptsAsked++;
      return new Promise((resolve, reject) =>
        this.interrupts.push({ answer: () => resolve({ data: encode({ ok: true }) }), timeOut: () => reject(new errors.TimeoutError()) }),
      );
    }
    return Promise.reject(new Error(`unexpected request on ${subject}`));
  }
  publish(): void {}
  isClosed(): boolean {
    return false;
  }
}

/** An empty mailbox: removed without a server (no steer is ever published here). */
const jsm = { streams: { purge: () => Promise.resolve({ purged: 0 }) } };

function rig() {
  const { clock, rt, find } = runtimeHarness();
  const nats = new WorkerNats();
  const link: NatsLink = {
    nc: nats as unknown as NatsConnection,
    js: {} as JetStreamClient,
    jsm: jsm as unknown as JetStreamManager,
    connected: true,
    downSince: undefined,
    whenUp: () => Promise.resolve(true),
    request: (subject) => nats.request(subject) as Promise<Msg>,
    publishAck: () => Promise.reject(new Error('no steer is published here')),
    close: () => Promise.resolve(),
  };
  const workers = new WorkerTable({ loss_ms: 3_600_000, outage_ms: 3_600_000, logger: silentLogger, clock, downSince: () => undefined, onLost: () => {} });
  workers.heartbeat({ worker: WORKER, capacity: 4, children: [] });
  const children = new Map<string, RemoteChildHandle>();
  const fenced: Array<{ worker: string; child: string; epoch: number }> = [];
  let epoch = 0;
  const port: PlacementPort = {
    link,
    workers,
    ids: new PreassignedIds(),
    logger: silentLogger,
    clock,
    publish_ms: 1000,
    outage_ms: 1000,
    child(id, agent) {
      let c = children.get(id);
      if (!c) children.set(id, (c = new RemoteChild(port, id, agent)));
      return c;
    },
    find: (id) => children.get(id),
    nextEpoch: () => ++epoch,
    bind() {},
    unbind: (c) => void children.delete(c.id),
    fence: (worker, child, e) => void fenced.push({ worker, child, epoch: e }),
    caughtUp: () => Promise.resolve(),
    stored: () => undefined,
    adoptive: false,
  };
  return { clock, rt, find, nats, fenced, workers, children, runner: new RemoteRunner(port, { kind: 'scripted' }, 'remote') };
}

describe('an interrupt the worker never answers', () => {
  it(`is asked ${INTERRUPT_TRIES} times, then the child settles alone as child_lost`, async () => {
    const { clock, rt, find, nats, fenced, workers, runner } = rig();
    const handle = rt.delegate([{ goal: 'unreachable', runner }]);
    const [id = ''] = handle.subagent_ids;
    await flush();
    expect(find(id)?.status).toBe('running');

    rt.interrupt(id);
    for (let i = 0; i < INTERRUPT_TRIES; i++) {
      await flush();
      expect(nats.interrupts).toHaveLength(1);
      nats.interrupts.shift()?.timeOut();
    }
    await flush();
    // Bounded: no further request once the tries are spent.
    expect(nats.interruptsAsked).toBe(INTERRUPT_TRIES);
    expect(nats.interrupts).toHaveLength(0);

    // A moment for a finish that might still be on its way; none comes.
    await clock.advance(2000);
    const [entry] = await handle.results;
    expect(entry).toMatchObject({ status: 'error', exit_reason: 'child_lost' });
    expect(entry?.error).toContain(`did not answer ${INTERRUPT_TRIES} interrupts on worker ${WORKER}`);
    expect(fenced).toEqual([{ worker: WORKER, child: id, epoch: 1 }]);
    expect(nats.interruptsAsked).toBe(INTERRUPT_TRIES);
    workers.close();
  });

  it('is asked again after a timeout, and a later answer lets the worker finish the child', async () => {
    const { rt, nats, fenced, workers, children, runner } = rig();
    const handle = rt.delegate([{ goal: 'slow', runner }]);
    const [id = ''] = handle.subagent_ids;
    await flush();
    rt.interrupt(id);
    await flush();
    nats.interrupts.shift()?.timeOut();
    await flush();
    expect(nats.interruptsAsked).toBe(2);
    nats.interrupts.shift()?.answer();
    // The worker's finish, as the placement routes `sr.ev.<child>` to its child.
    children
      .get(id)
      ?.onEvent(encode({ type: 'finish', epoch: 1, worker: WORKER, outcome: { status: 'interrupted', summary: 'stopped' } }), subjects.events(id));
    const [entry] = await handle.results;
    expect(entry).toMatchObject({ status: 'interrupted' });
    expect(nats.interruptsAsked).toBe(2);
    expect(fenced).toEqual([]);
    workers.close();
  });
});
