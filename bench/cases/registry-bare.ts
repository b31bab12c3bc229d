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
}

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
    const child: BareChild = { queue: [], stopped: false, abort: new AbortController() };
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
