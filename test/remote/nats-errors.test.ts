// How the NATS client's errors are read (against a real nats-server -js): a consumer or stream
// that does not exist, and a request nobody answers, each as the client really reports them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { isNoResponders, isNotFound } from '../../src/remote/nats.ts';
import { startNats, type Nats } from '../helpers/nats.ts';

let nats: Nats;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'ERRS', subjects: ['errs.>'] });
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

describe('isNotFound', () => {
  it('is true for a missing consumer (info and delete) and a missing stream', async () => {
    expect(isNotFound(await rejection(jsm.consumers.info('ERRS', 'nobody')))).toBe(true);
    expect(isNotFound(await rejection(jsm.consumers.delete('ERRS', 'nobody')))).toBe(true);
    expect(isNotFound(await rejection(jsm.streams.info('NO_SUCH_STREAM')))).toBe(true);
  });

  it('is false for other errors', async () => {
    expect(isNotFound(await rejection(jsm.streams.add({ name: 'ERRS2', subjects: ['errs.>'] })))).toBe(false);
    expect(isNotFound(new Error('consumer not found'))).toBe(false);
    expect(isNotFound(undefined)).toBe(false);
  });
});

describe('isNoResponders', () => {
  it('is true for a request on a subject nobody subscribes to, false for one that times out', async () => {
    // Not under errs.>: the stream would answer those as publishes.
    expect(isNoResponders(await rejection(nc.request('quiet.nobody', 'x', { timeout: 2000 })))).toBe(true);
    const silent = nc.subscribe('quiet.silent');
    expect(isNoResponders(await rejection(nc.request('quiet.silent', 'x', { timeout: 50 })))).toBe(false);
    silent.unsubscribe();
  });
});
