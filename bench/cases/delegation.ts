// Case 6, delegation overhead: 10,000 scripted children that finish at once (a script with no
// steps), at concurrency 64, against a bare p-queue (same version, same concurrency) running the
// same number of no-op async functions. Both are timed from the first add to the last completion;
// the figure is the time per child. Each run starts from a fresh runtime / queue, the runs
// alternate (subrun, p-queue, subrun, ...) and the median of each is kept.
import PQueue from 'p-queue';
import { scripted } from '../../src/delegation/runners/scripted.ts';
import type { Owner, TaskSpec } from '../../src/types.ts';
import { createRuntime } from '../../src/delegation/runtime.ts';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { median, row, type Row } from '../lib/stats.ts';

const CONCURRENCY = 64;
const OWNER: Owner = { session_id: 'ses_bench', transport: 'tr_bench', generation: 1 };

/** Delegates `n` no-op scripted children in batches of CONCURRENCY; resolves when all are done. */
export async function runSubrun(n: number): Promise<number> {
  const runtime = createRuntime({ max_concurrent_children: CONCURRENCY });
  const runner = scripted([]);
  const t0 = performance.now();
  const done: Promise<unknown>[] = [];
  for (let left = n; left > 0; left -= CONCURRENCY) {
    const size = Math.min(CONCURRENCY, left);
    const tasks: TaskSpec[] = Array.from({ length: size }, (_, i) => ({ goal: `no-op ${i}`, runner }));
    done.push(runtime.delegate(tasks, { owner: OWNER }).results);
  }
  const entries = (await Promise.all(done)) as Array<Array<{ status: string }>>;
  const ms = performance.now() - t0;
  const completed = entries.flat().filter((e) => e.status === 'completed').length;
  if (completed !== n) throw new Error(`${completed} of ${n} children completed`);
  return ms;
}

/** The same count of no-op async functions through a bare p-queue. */
export async function runPQueue(n: number): Promise<number> {
  const queue = new PQueue({ concurrency: CONCURRENCY });
  const noop = async () => ({ status: 'completed' });
  const t0 = performance.now();
  const done: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) done.push(queue.add(noop));
  await Promise.all(done);
  return performance.now() - t0;
}

export const delegationCase: BenchCase = {
  name: 'delegation',
  title: 'Delegation overhead: 10,000 no-op scripted children at concurrency 64 vs a bare p-queue',
  async run(opts: CaseOptions): Promise<Row[]> {
    const n = bySize(opts.mode, { full: 10_000, quick: 10_000, tiny: 200 });
    const runs = bySize(opts.mode, { full: 9, quick: 5, tiny: 1 });
    const budgetMs = bySize(opts.mode, { full: 60_000, quick: 20_000, tiny: 5_000 });
    // Warm-up: one of each, unmeasured.
    await runSubrun(Math.min(n, 2000));
    await runPQueue(Math.min(n, 2000));
    const sub: number[] = [];
    const pq: number[] = [];
    const t0 = performance.now();
    // A full GC before every run: each side starts from a clean heap instead of paying for the
    // garbage the other one left (which made the p-queue figure swing 2x with the order).
    const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
    const timed = async (f: (n: number) => Promise<number>) => {
      gc();
      return f(n);
    };
    for (let i = 0; i < runs && (i === 0 || performance.now() - t0 < budgetMs); i++) {
      if (i % 2 === 0) {
        sub.push(await timed(runSubrun));
        pq.push(await timed(runPQueue));
      } else {
        pq.push(await timed(runPQueue));
        sub.push(await timed(runSubrun));
      }
    }
    const perSub = (median(sub) * 1e6) / n;
    const perPq = (median(pq) * 1e6) / n;
    opts.log(`delegation: subrun ${sub.map((x) => x.toFixed(0)).join(' ')} ms; p-queue ${pq.map((x) => x.toFixed(0)).join(' ')} ms (n=${n})`);
    return [
      row({
        case: 'delegation.per_child',
        figure: perSub / 1000,
        unit: 'µs/child',
        baseline: perPq / 1000,
        baseline_unit: 'µs/task (bare p-queue)',
        // Issue 24's goal (it was 3x under issue 5).
        goal: '<= 2',
        note: `${n} children, concurrency ${CONCURRENCY}, ${sub.length} runs each`,
      }),
    ];
  },
};
