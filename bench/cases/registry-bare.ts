// The floor for case 1: the least any registry of live children must do per call, on the same
// machine and in the same process, at the same N. A bare Map from id to a child entry (a queue of
// texts, a stopped flag, the AbortController a runner listens on), and per entry as many bytes of
// other live state as a subrun child holds, allocated right after it: a live child is never alone
// in memory (its runner, promises and buffers sit around it), so at N = 100k the entries are as
// far apart as subrun's records are and a random one is as far from cache.
//
// The calls mirror the subrun ones: steer = find the child and queue a text; drain = find it and
// take its queue; interrupt = find it, mark it and abort its controller (one listener, as a parked
// runner has). What the bare structure pays going from N = 10 to 100k is what memory, not code,
// costs; subrun's own growth is judged against it.
import { randomIds } from '../../src/ids.ts';
import type { MicroTask } from '../lib/micro.ts';

/** Other live state per child (bytes): about what a subrun child holds besides its record. */
export const SPREAD_BYTES = 4096;

interface BareChild {
  queue: string[];
  stopped: boolean;
  readonly abort: AbortController;
  /** For the contract's drain: steers with a fate, and a tail of the child's own. */
  steers: BareSteer[];
  readonly tail: Buffer;
  tailAt: number;
}

interface BareSteer {
  readonly steer_id: string;
  readonly text: string;
  fate: 'queued' | 'delivered';
}

/** A bare child's tail: its own allocation, as a live child's transcript buffer is. */
const TAIL_BYTES = 256;
/** The delivered events the contract floor keeps (a replay ring's slots). */
const EVENT_SLOTS = 1024;

export interface BareFleet {
  readonly n: number;
  readonly ids: string[];
  readonly children: Map<string, BareChild>;
  /** Keeps each child's spread alive while the child is. */
  readonly spread: Map<string, number[]>;
  /** Adds one child (its entry, controller, listener and spread); returns its id. */
  add(): string;
}

export function bareFleet(n: number): BareFleet {
  const children = new Map<string, BareChild>();
  const ids: string[] = [];
  const spread = new Map<string, number[]>();
  const add = (): string => {
    const id = randomIds.subagent();
    const child: BareChild = { queue: [], stopped: false, abort: new AbortController(), steers: [], tail: Buffer.allocUnsafeSlow(TAIL_BYTES), tailAt: 0 };
    child.abort.signal.addEventListener('abort', () => undefined, { once: true });
    children.set(id, child);
    // One array of SPREAD_BYTES / 8 slots, allocated next to the entry.
    spread.set(id, new Array<number>(SPREAD_BYTES / 8).fill(0));
    return id;
  };
  for (let i = 0; i < n; i++) ids.push(add());
  return { n, ids, children, spread, add };
}

/** Takes a random id out of `ids` (the last one fills its place), for a call that ends that child. */
export function takeRandom(ids: string[]): string {
  const i = Math.floor(Math.random() * ids.length);
  const id = ids[i] as string;
  ids[i] = ids[ids.length - 1] as string;
  ids.pop();
  return id;
}

/**
 * The delivery point as the contract asks for it, on the bare structure (`bare_drain_contract@<n>`):
 * find the child, take its steers, and for each set its fate, write its `[steer]` line into the
 * child's tail (docs/delegation.md: the tail shows each delivered steer) and keep its
 * `subagent.steer.delivered` event in a ring. What N adds to this is what memory costs a registry
 * that keeps what the contract promises: a steer's fate, the tail, the event.
 */
export function bareContractDrain(f: BareFleet, text: string, batch: number): MicroTask {
  let next = 0;
  let made = 0;
  const drainOps = Math.min(batch, Math.floor(f.n / 2));
  const events: object[] = new Array<object>(EVENT_SLOTS);
  let slot = 0;
  let picked: string[] = [];
  return {
    name: `bare_drain_contract@${f.n}`,
    ops: drainOps,
    beforeEach: () => {
      picked = [];
      for (let i = 0; i < drainOps; i++) {
        const id = f.ids[next++ % f.ids.length] as string;
        picked.push(id);
        f.children.get(id)?.steers.push({ steer_id: `st_${made++}`, text, fate: 'queued' });
      }
    },
    fn: () => {
      const at = Date.now();
      for (const id of picked) {
        const c = f.children.get(id);
        if (!c || c.stopped) throw new Error(`no live bare child ${id}`);
        const taken = c.steers;
        c.steers = [];
        if (taken.length !== 1) throw new Error(`expected one steer queued for ${id}`);
        for (const s of taken) {
          s.fate = 'delivered';
          const line = `[steer] ${s.text}\n`;
          if (c.tailAt + line.length * 3 > TAIL_BYTES) c.tailAt = 0;
          c.tailAt += c.tail.write(line, c.tailAt);
          events[slot++ % EVENT_SLOTS] = { topic: 'subagent.steer.delivered', subagent_id: id, steer_id: s.steer_id, text: s.text, at };
        }
      }
    },
  };
}

/** The three calls on `f`, named `bare_<op>@<n>`, with the same batch sizes as subrun's tasks. */
export function bareTasks(f: BareFleet, text: string, batch: number, interruptBudget: MicroTask['budget']): MicroTask[] {
  let next = 0;
  const pick = () => f.ids[next++ % f.ids.length] as string;
  const drainOps = Math.min(batch, Math.floor(f.n / 2));
  let picked: string[] = [];
  let victim = '';
  const get = (id: string): BareChild => {
    const c = f.children.get(id);
    if (!c || c.stopped) throw new Error(`no live bare child ${id}`);
    return c;
  };
  return [
    {
      name: `bare_steer@${f.n}`,
      ops: batch,
      fn: () => {
        picked = [];
        for (let i = 0; i < batch; i++) {
          const id = pick();
          picked.push(id);
          get(id).queue.push(text);
        }
      },
      afterEach: () => {
        for (const id of picked) get(id).queue = [];
      },
    },
    {
      name: `bare_drain@${f.n}`,
      ops: drainOps,
      beforeEach: () => {
        picked = [];
        for (let i = 0; i < drainOps; i++) {
          const id = pick();
          picked.push(id);
          get(id).queue.push(text);
        }
      },
      fn: () => {
        for (const id of picked) {
          const c = get(id);
          const q = c.queue;
          c.queue = [];
          if (q.length !== 1) throw new Error(`expected one text queued for ${id}`);
        }
      },
    },
    {
      name: `bare_interrupt@${f.n}`,
      ops: 1,
      budget: interruptBudget,
      beforeEach: () => {
        victim = takeRandom(f.ids);
      },
      fn: () => {
        const c = get(victim);
        c.stopped = true;
        c.abort.abort('interrupt');
      },
      afterEach: () => {
        f.children.delete(victim);
        f.spread.delete(victim);
        f.ids.push(f.add());
      },
    },
  ];
}
