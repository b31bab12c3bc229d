// How the NATS client's errors are read (against a real nats-server -js): a request nobody
// answers, as the client really reports it, and a JetStream publish no stream takes (the JetStream
// client wraps its "no responders" in JetStreamNotEnabled), with the outcome a steer's publish gets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { systemClock } from '../../src/clock.ts';
import { silentLogger } from '../../src/log.ts';
import { ChildMailbox } from '../../src/remote/control/child-mailbox.ts';
import { isNoResponders, isTimeout, openNats } from '../../src/remote/nats.ts';
import { STEER_STREAM } from '../../src/remote/wire.ts';
import { startNats, type Nats } from '../helpers/nats.ts';
import { rejection } from '../helpers/rejection.ts';

let nats: Nats;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
});

afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});

describe('isNoResponders', () => {
  it('is true for a request on a subject nobody subscribes to, false for one that times out', async () => {
    // Not under errs.>: the stream would answer those as publishes.
    expect(isNoResponders(await rejection(nc.request('quiet.nobody', 'x', { timeout: 2000 })))).toBe(true);
    const silent = nc.subscribe('quiet.silent');
    expect(isNoResponders(await rejection(nc.request('quiet.silent', 'x', { timeout: 50 })))).toBe(false);
    silent.unsubscribe();
  });

  it('is true for a JetStream publish that no stream takes', async () => {
    const err = await rejection(jetstream(nc).publish('quiet.nostream', 'x', { msgID: 'm1', timeout: 2000 }));
    expect(err).toMatchObject({ name: 'JetStreamNotEnabled' });
    expect(isNoResponders(err)).toBe(true);
  });

  it("refuses a steer's publish when the steer stream is gone (surely not stored), not `unknown`", async () => {
    const link = await openNats(nats.url, 'nats-errors');
    try {
      await link.jsm.streams.delete(STEER_STREAM);
      const mailbox = new ChildMailbox({ link, logger: silentLogger, clock: systemClock, publish_ms: 2000 }, 'sa_gone');
      expect(await mailbox.publish({ steer_id: 'st_gone', text: 'turn left', seq: 1 })).toBe('refused');
    } finally {
      await link.close();
    }
  });
});

describe('isTimeout', () => {
  it('is true for a request nobody answers in time, false for no responders', async () => {
    const silent = nc.subscribe('quiet.slow');
    expect(isTimeout(await rejection(nc.request('quiet.slow', 'x', { timeout: 50 })))).toBe(true);
    silent.unsubscribe();
    expect(isTimeout(await rejection(nc.request('quiet.none', 'x', { timeout: 2000 })))).toBe(false);
  });
});
