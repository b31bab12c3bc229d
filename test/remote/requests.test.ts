// The link's own request-reply (src/remote/requests.ts), against a real nats-server -js: answers
// matched to their requests out of order, each way a request gets no answer told apart as the
// callers need it (a timeout, no responders, a closed connection), and a steer's publish ack with
// the fate each outcome gives the steer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DiscardPolicy, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { systemClock } from '../../src/clock.ts';
import { silentLogger } from '../../src/log.ts';
import { ChildMailbox } from '../../src/remote/control/child-mailbox.ts';
import { isNoResponders, isTimeout, openNats, type NatsLink } from '../../src/remote/nats.ts';
import { NoAnswerError, PublishRefusedError } from '../../src/remote/requests.ts';
import { STEER_STREAM, subjects } from '../../src/remote/wire.ts';
import { startNats, type Nats } from '../helpers/nats.ts';
import { rejection } from '../helpers/rejection.ts';

let nats: Nats;
let link: NatsLink;
/** The other side: answers what the tests ask it to. */
let peer: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  link = await openNats(nats.url, 'requests-test');
  peer = await connect({ servers: nats.url });
});

afterAll(async () => {
  await peer?.close();
  await link?.close();
  await nats?.dispose();
});

const text = (d: Uint8Array) => new TextDecoder().decode(d);

describe('link.request', () => {
  it('gives each request its own answer when the answers come in the other order', async () => {
    const held: Array<{ data: string; respond(d: string): boolean }> = [];
    const sub = peer.subscribe('rq.echo', { callback: (_e, m) => void held.push({ data: text(m.data), respond: (d) => m.respond(d) }) });
    await peer.flush();
    const asked = ['a', 'b', 'c'].map((x) => link.request('rq.echo', x, { timeout: 5000 }));
    while (held.length < 3) await new Promise((r) => setTimeout(r, 5));
    for (const h of [...held].reverse()) h.respond(`re:${h.data}`);
    expect((await Promise.all(asked)).map((m) => text(m.data))).toEqual(['re:a', 're:b', 're:c']);
    sub.unsubscribe();
  });

  it('tells a timeout from no responders, and ignores an answer that comes after its timeout', async () => {
    const late: Array<() => void> = [];
    const sub = peer.subscribe('rq.slow', { callback: (_e, m) => void late.push(() => void m.respond('late')) });
    await peer.flush();
    const slow = await rejection(link.request('rq.slow', 'x', { timeout: 50 }));
    expect(slow).toBeInstanceOf(NoAnswerError);
    expect([isTimeout(slow), isNoResponders(slow)]).toEqual([true, false]);
    // The answer after the timeout reaches nobody, and the next request still gets its own.
    for (const answer of late) answer();
    const none = await rejection(link.request('rq.nobody', 'x', { timeout: 5000 }));
    expect([isTimeout(none), isNoResponders(none)]).toEqual([false, true]);
    sub.unsubscribe();
  });

  it('rejects what is in flight when the connection closes, as neither a timeout nor no responders', async () => {
    const own = await openNats(nats.url, 'requests-closing');
    const sub = peer.subscribe('rq.never');
    await peer.flush();
    const pending = rejection(own.request('rq.never', 'x', { timeout: 60_000 }));
    await own.nc.close();
    const err = await pending;
    expect(err).toMatchObject({ name: 'NoAnswerError', reason: 'closed' });
    expect([isTimeout(err), isNoResponders(err)]).toEqual([false, false]);
    // Asked after the close: it never leaves.
    expect(await rejection(own.request('rq.never', 'x', { timeout: 60_000 }))).toMatchObject({ reason: 'closed' });
    sub.unsubscribe();
  });
});

describe('link.publishAck', () => {
  it('resolves once stored, and a message id published twice is stored once', async () => {
    const jsm = await jetstreamManager(peer);
    await jsm.streams.add({ name: 'RQ_STORE', subjects: ['rqs.>'], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
    await link.publishAck('rqs.one', 'x', { msgID: 'm-1', timeout: 5000 });
    await link.publishAck('rqs.one', 'x', { msgID: 'm-1', timeout: 5000 });
    await link.publishAck('rqs.one', 'y', { msgID: 'm-2', timeout: 5000 });
    expect((await jsm.streams.info('RQ_STORE')).state.messages).toBe(2);
  });

  it('refuses what a full stream will not store, and the steer that published it has no effect', async () => {
    const jsm = await jetstreamManager(peer);
    await jsm.streams.add({
      name: 'RQ_FULL',
      subjects: ['rqf.>'],
      retention: RetentionPolicy.Limits,
      storage: StorageType.Memory,
      max_msgs: 1,
      discard: DiscardPolicy.New,
    });
    await link.publishAck('rqf.one', 'x', { msgID: 'f-1', timeout: 5000 });
    expect(await rejection(link.publishAck('rqf.one', 'y', { msgID: 'f-2', timeout: 5000 }))).toBeInstanceOf(PublishRefusedError);
    // The steer stream itself, full: the steer's fate is `refused` (an error to the host), not `unknown`.
    await jsm.streams.purge(STEER_STREAM);
    await jsm.streams.update(STEER_STREAM, { max_msgs: 1, discard: DiscardPolicy.New });
    try {
      const mailbox = new ChildMailbox({ link, logger: silentLogger, clock: systemClock, publish_ms: 2000 }, 'sa_full');
      expect(await mailbox.publish({ steer_id: 'st_first', text: 'one', seq: 1 })).toBe('stored');
      expect(await mailbox.publish({ steer_id: 'st_second', text: 'two', seq: 2 })).toBe('refused');
      expect((await jsm.streams.getMessage(STEER_STREAM, { last_by_subj: subjects.steer('sa_full') }))?.string()).toContain('st_first');
    } finally {
      await jsm.streams.update(STEER_STREAM, { max_msgs: -1, discard: DiscardPolicy.Old });
    }
  });

  it('is no responders when no stream takes the subject', async () => {
    const err = await rejection(link.publishAck('rqn.nostream', 'x', { msgID: 'n-1', timeout: 5000 }));
    expect(isNoResponders(err)).toBe(true);
  });
});
