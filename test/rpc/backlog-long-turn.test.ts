// The stop check's interval counts from the end of the turn that queued the burst, not from inside
// it: a peer gets a whole interval in which it could drain before it is judged. A turn that outlasts
// the interval (an overloaded server making a large burst) must not drop a peer that reads as soon
// as it can. Real timers: the turn is a callback in the check phase that holds the loop past the
// interval; the peer's first chance to read is the next check phase (the timers phase runs before it).
import { expect, it } from 'vitest';
import { Backlog, type DropReason } from '../../src/server/backlog.ts';

const CHECK_MS = 30;

/** Holds the event loop for `ms`: the burst's own turn, as long as a loaded server makes it. */
function holdLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // the turn's work
  }
}

it('gives a peer a whole interval after a burst turn longer than the interval before judging it', async () => {
  let buffered = 0;
  const drops: DropReason[] = [];
  const backlog = new Backlog({ max_bytes: 1000, check_ms: CHECK_MS, buffered: () => buffered, drop: (reason) => void drops.push(reason) });
  const judged = new Promise<void>((resolve) => {
    setImmediate(() => {
      // The burst: three times the bound in one turn, which then runs past the interval.
      for (let i = 0; i < 30; i++) backlog.send(() => void (buffered += 100));
      holdLoop(3 * CHECK_MS);
      // The peer reads at its first chance (the next check phase) ...
      setImmediate(() => {
        buffered -= 100;
        // ... and is judged an interval after the interval started (armed in this same phase, just
        // before this callback): the next check, an interval later again, is past the end.
        setTimeout(resolve, CHECK_MS * 1.5);
      });
    });
  });
  await judged;
  expect(drops).toEqual([]);
  // It was watched all the while: reading nothing more, it is dropped at the check after.
  await new Promise((resolve) => setTimeout(resolve, CHECK_MS * 2));
  expect(drops).toEqual(['stalled']);
  backlog.close();
});
