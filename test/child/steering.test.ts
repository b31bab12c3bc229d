import { describe, expect, it } from 'vitest';
import { SteerInbox } from '../../src/child/steering.ts';
import { flush } from '../helpers/manual-clock.ts';

const texts = (steers: ReadonlyArray<{ text: string }>) => steers.map((s) => s.text);
const ids = (steers: ReadonlyArray<{ steer_id: string }>) => steers.map((s) => s.steer_id);

/** Tracks whether a promise has settled, without waiting on it. */
function track(p: Promise<void>): { readonly settled: boolean } {
  const state = { settled: false };
  void p.then(() => {
    state.settled = true;
  });
  return state;
}

describe('SteerInbox', () => {
  it('starts accepting and empty', () => {
    const inbox = new SteerInbox();
    expect(inbox.accepting).toBe(true);
    expect(inbox.queuedCount).toBe(0);
    expect(inbox.take()).toEqual([]);
  });

  it('push returns the steer with a rising acceptance seq', () => {
    const inbox = new SteerInbox();
    const a = inbox.push('st_a', 'one');
    const b = inbox.push('st_b', 'two');
    expect(a).toEqual({ steer_id: 'st_a', text: 'one', seq: 1 });
    expect(b).toEqual({ steer_id: 'st_b', text: 'two', seq: 2 });
    expect(inbox.queuedCount).toBe(2);
  });

  it('takeDelivered hands over the queue in FIFO order as delivered: nothing of it is pending or comes back at seal', () => {
    const inbox = new SteerInbox();
    inbox.push('st_a', 'één');
    inbox.push('st_b', 'two');
    const taken = inbox.take();
    inbox.push('st_c', 'three');
    expect(texts(inbox.takeDelivered())).toEqual(['three']);
    // Only the two-phase steers are still pending (both taken, not confirmed: 'één' is 5 bytes, 'two' 3).
    expect(inbox.pendingCount).toBe(2);
    expect(inbox.pendingBytes).toBe(8);
    expect(inbox.takeDelivered()).toEqual([]);
    expect(texts(inbox.seal())).toEqual(texts(taken));
    inbox.push('st_d', 'late');
    expect(inbox.takeDelivered()).toEqual([]);
  });

  it('take returns everything queued in FIFO order and empties the queue', () => {
    const inbox = new SteerInbox();
    for (const t of ['a', 'b', 'c', 'd']) inbox.push(`st_${t}`, t);
    expect(texts(inbox.take())).toEqual(['a', 'b', 'c', 'd']);
    expect(inbox.queuedCount).toBe(0);
    expect(inbox.take()).toEqual([]);
    inbox.push('st_e', 'e');
    expect(texts(inbox.take())).toEqual(['e']);
  });

  it('confirm returns the steers newly confirmed, once each', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'x');
    inbox.push('st_2', 'y');
    const taken = inbox.take();
    expect(ids(inbox.confirm(taken))).toEqual(['st_1', 'st_2']);
    // A second confirm of the same steers confirms nothing.
    expect(inbox.confirm(taken)).toEqual([]);
    // Confirmed steers are gone: seal has nothing left to hand back.
    expect(inbox.seal()).toEqual([]);
  });

  it('confirm ignores steers that were never taken', () => {
    const inbox = new SteerInbox();
    const queued = inbox.push('st_1', 'still queued');
    expect(queued).not.toBeNull();
    expect(inbox.confirm([queued!])).toEqual([]);
    expect(inbox.confirm([{ steer_id: 'st_ghost', text: 'ghost', seq: 99 }])).toEqual([]);
    expect(texts(inbox.take())).toEqual(['still queued']);
  });

  it('partial confirm leaves the rest taken-unconfirmed', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'a');
    inbox.push('st_2', 'b');
    inbox.push('st_3', 'c');
    const taken = inbox.take();
    expect(ids(inbox.confirm([taken[1]!]))).toEqual(['st_2']);
    expect(texts(inbox.seal())).toEqual(['a', 'c']);
  });

  it('seal returns taken-unconfirmed and queued steers merged in acceptance order', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'a'); // taken, unconfirmed
    inbox.push('st_2', 'b'); // taken, confirmed
    inbox.push('st_3', 'c'); // taken, unconfirmed
    const taken = inbox.take();
    inbox.confirm([taken[1]!]);
    inbox.push('st_4', 'd'); // still queued
    inbox.push('st_5', 'e'); // still queued
    const taken2 = inbox.take(); // d, e taken
    inbox.confirm([taken2[1]!]); // e delivered
    inbox.push('st_6', 'f'); // queued
    const left = inbox.seal();
    expect(texts(left)).toEqual(['a', 'c', 'd', 'f']);
    expect(left.map((s) => s.seq)).toEqual([1, 3, 4, 6]);
    expect(inbox.accepting).toBe(false);
    expect(inbox.queuedCount).toBe(0);
  });

  it('seal orders a later-taken queued steer after an earlier-taken one even when taken in separate batches', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'first');
    inbox.take(); // first taken
    inbox.push('st_2', 'second'); // queued, never taken
    inbox.push('st_3', 'third');
    inbox.take(); // second and third taken
    inbox.push('st_4', 'fourth'); // queued
    expect(texts(inbox.seal())).toEqual(['first', 'second', 'third', 'fourth']);
  });

  it('seal is one-shot: a second seal returns nothing', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'a');
    expect(texts(inbox.seal())).toEqual(['a']);
    expect(inbox.seal()).toEqual([]);
  });

  it('push after seal is refused and changes nothing', () => {
    const inbox = new SteerInbox();
    inbox.seal();
    expect(inbox.push('st_1', 'late')).toBeNull();
    expect(inbox.queuedCount).toBe(0);
    expect(inbox.take()).toEqual([]);
    expect(inbox.seal()).toEqual([]);
  });

  it('take after seal returns nothing', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'a');
    inbox.seal();
    expect(inbox.take()).toEqual([]);
  });

  it('confirm after seal is ignored (the steer already went to missed)', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'a');
    const taken = inbox.take();
    const left = inbox.seal();
    expect(texts(left)).toEqual(['a']);
    expect(inbox.confirm(taken)).toEqual([]);
  });

  it('withdraw removes a queued steer and keeps the others in order', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'a');
    inbox.push('st_2', 'b');
    inbox.push('st_3', 'c');
    expect(inbox.withdraw('st_2')).toBe(true);
    expect(inbox.queuedCount).toBe(2);
    expect(texts(inbox.take())).toEqual(['a', 'c']);
  });

  it('withdraw of an unknown or already-taken steer returns false and changes nothing', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'a');
    inbox.take();
    expect(inbox.withdraw('st_1')).toBe(false);
    expect(inbox.withdraw('st_nope')).toBe(false);
    // The taken steer is still tracked: seal hands it back.
    expect(texts(inbox.seal())).toEqual(['a']);
  });

  it('a withdrawn steer does not appear in seal', () => {
    const inbox = new SteerInbox();
    inbox.push('st_1', 'keep');
    inbox.push('st_2', 'drop');
    inbox.withdraw('st_2');
    expect(texts(inbox.seal())).toEqual(['keep']);
  });

  describe('push with a veto', () => {
    it('a throwing veto queues nothing, wakes no waiter, uses no seq, and propagates', async () => {
      const inbox = new SteerInbox();
      const w = track(inbox.waitForSteer());
      const seen: string[] = [];
      expect(() =>
        inbox.push('st_bad', 'bad', (s) => {
          seen.push(`${s.steer_id}#${s.seq}`);
          throw new Error('no');
        }),
      ).toThrow('no');
      expect(seen).toEqual(['st_bad#1']);
      expect(inbox.queuedCount).toBe(0);
      await flush();
      expect(w.settled).toBe(false);
      expect(inbox.push('st_ok', 'ok')).toEqual({ steer_id: 'st_ok', text: 'ok', seq: 1 });
      await flush(1);
      expect(w.settled).toBe(true);
    });

    it('a veto that returns lets the steer in', () => {
      const inbox = new SteerInbox();
      const s = inbox.push('st_1', 'fine', () => {});
      expect(s).toEqual({ steer_id: 'st_1', text: 'fine', seq: 1 });
      expect(texts(inbox.take())).toEqual(['fine']);
    });

    it('the veto is not consulted once sealed', () => {
      const inbox = new SteerInbox();
      inbox.seal();
      let called = false;
      expect(
        inbox.push('st_1', 'late', () => {
          called = true;
        }),
      ).toBeNull();
      expect(called).toBe(false);
    });
  });

  describe('waitForSteer', () => {
    it('resolves at once when a steer is already queued', async () => {
      const inbox = new SteerInbox();
      inbox.push('st_1', 'a');
      const w = track(inbox.waitForSteer());
      await flush(1);
      expect(w.settled).toBe(true);
    });

    it('stays pending with an empty queue, then resolves on push', async () => {
      const inbox = new SteerInbox();
      const w = track(inbox.waitForSteer());
      await flush();
      expect(w.settled).toBe(false);
      inbox.push('st_1', 'a');
      await flush(1);
      expect(w.settled).toBe(true);
    });

    it('wakes every waiter on one push', async () => {
      const inbox = new SteerInbox();
      const ws = [track(inbox.waitForSteer()), track(inbox.waitForSteer()), track(inbox.waitForSteer())];
      await flush();
      expect(ws.map((w) => w.settled)).toEqual([false, false, false]);
      inbox.push('st_1', 'a');
      await flush(1);
      expect(ws.map((w) => w.settled)).toEqual([true, true, true]);
    });

    it('does not resolve when only taken (not queued) steers exist', async () => {
      const inbox = new SteerInbox();
      inbox.push('st_1', 'a');
      inbox.take();
      const w = track(inbox.waitForSteer());
      await flush();
      expect(w.settled).toBe(false);
    });

    it('resolves on seal', async () => {
      const inbox = new SteerInbox();
      const w = track(inbox.waitForSteer());
      await flush();
      expect(w.settled).toBe(false);
      inbox.seal();
      await flush(1);
      expect(w.settled).toBe(true);
    });

    it('resolves at once after seal', async () => {
      const inbox = new SteerInbox();
      inbox.seal();
      const w = track(inbox.waitForSteer());
      await flush(1);
      expect(w.settled).toBe(true);
    });

    it('resolves on abort', async () => {
      const inbox = new SteerInbox();
      const ac = new AbortController();
      const w = track(inbox.waitForSteer(ac.signal));
      await flush();
      expect(w.settled).toBe(false);
      ac.abort();
      await flush(1);
      expect(w.settled).toBe(true);
    });

    it('resolves at once with an already-aborted signal', async () => {
      const inbox = new SteerInbox();
      const ac = new AbortController();
      ac.abort();
      const w = track(inbox.waitForSteer(ac.signal));
      await flush(1);
      expect(w.settled).toBe(true);
    });

    it('an abort of one waiter does not wake another', async () => {
      const inbox = new SteerInbox();
      const ac = new AbortController();
      const aborted = track(inbox.waitForSteer(ac.signal));
      const other = track(inbox.waitForSteer());
      ac.abort();
      await flush();
      expect(aborted.settled).toBe(true);
      expect(other.settled).toBe(false);
      inbox.push('st_1', 'a');
      await flush(1);
      expect(other.settled).toBe(true);
    });
  });
});
