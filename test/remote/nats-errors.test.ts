// How the NATS client's errors are read (against a real nats-server -js): a request nobody
// answers, as the client really reports it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { isNoResponders, isTimeout } from '../../src/remote/nats.ts';
import { startNats, type Nats } from '../helpers/nats.ts';

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

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.unreachable('expected a rejection'),
    (err: unknown) => err,
  );
}

describe('isNoResponders', () => {
  it('is true for a request on a subject nobody subscribes to, false for one that times out', async () => {
    // Not under errs.>: the stream would answer those as publishes.
    expect(isNoResponders(await rejection(nc.request('quiet.nobody', 'x', { timeout: 2000 })))).toBe(true);
    const silent = nc.subscribe('quiet.silent');
    expect(isNoResponders(await rejection(nc.request('quiet.silent', 'x', { timeout: 50 })))).toBe(false);
    silent.unsubscribe();
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
