// A worker's mailbox of receipts, in process with a receipt port the test answers: a wait for a
// steer ends when a receipt asked for elsewhere (a runner's delivery point that did not await it)
// brings a steer, and a wait never outlives a steer that is ready.
import { describe, expect, it } from 'vitest';
import type { Steer } from '../../src/types.ts';
import { Mailbox } from '../../src/remote/worker/mailbox.ts';
import { flush, ManualClock } from '../helpers/manual-clock.ts';

function rig() {
  const asks: Array<(steers: readonly Steer[] | undefined) => void> = [];
  const mailbox = new Mailbox({ clock: new ManualClock(), ask: () => new Promise((resolve) => asks.push(resolve)) });
  return { mailbox, asks };
}

const steer = (n: number): Steer => ({ steer_id: `st_${n}`, text: `s${n}`, seq: n });

describe('the mailbox of receipts', () => {
  it('wakes a wait when a receipt asked for by a delivery point brings a steer', async () => {
    const { mailbox, asks } = rig();
    const signal = new AbortController().signal;
    mailbox.notice();
    let first = false;
    void mailbox.arrived(signal).then(() => (first = true));
    await flush();
    mailbox.notice(); // a second steer's notice, while the first receipt is in flight
    asks.shift()?.([steer(1)]);
    await flush();
    expect(first).toBe(true);
    // The delivery point: takes what is ready and asks for the rest without waiting.
    expect(mailbox.take().map((s) => s.steer_id)).toEqual(['st_1']);
    void mailbox.prepare();
    await flush();
    let second = false;
    void mailbox.arrived(signal).then(() => (second = true));
    await flush();
    expect(second).toBe(false);
    asks.shift()?.([steer(1), steer(2)]);
    await flush();
    expect(second).toBe(true);
    expect(mailbox.take().map((s) => s.steer_id)).toEqual(['st_2']);
  });

  it('keeps the acceptance order of what it was granted', async () => {
    const { mailbox, asks } = rig();
    mailbox.notice();
    const p = mailbox.prepare();
    asks.shift()?.([steer(3), steer(4)]);
    await p;
    expect(mailbox.take().map((s) => s.seq)).toEqual([3, 4]);
  });
});
