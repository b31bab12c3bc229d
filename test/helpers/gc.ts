// A full GC for reachability tests, without a node flag on the whole suite: the flag is set at run
// time, and the `gc` global is taken from a fresh context, which is made after the flag.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * How many of `refs` are still reachable after full collections. A WeakRef made in a job stays
 * alive to that job's end, and some holders let go a promise turn after the event that ends them:
 * collect across macrotasks until none is left (at most `rounds` times).
 */
export async function stillReachable(refs: readonly WeakRef<object>[], rounds = 8): Promise<number> {
  let left = refs.length;
  for (let round = 0; round < rounds; round++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    left = refs.filter((r) => r.deref() !== undefined).length;
    if (left === 0) return 0;
  }
  return left;
}
