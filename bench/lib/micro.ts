// In-process micro-benchmarks on tinybench: each task runs `ops` operations per call (so the
// timer's own cost is spread over many), tinybench warms it up and takes the median of its
// samples, and we repeat the whole bench for a few rounds, alternating the tasks, and keep the
// median of the rounds' medians. Every round is bounded in time by an AbortSignal as well as by
// tinybench's own budget, so a slow task cannot hold the suite.
import { Bench } from 'tinybench';
import { median } from './stats.ts';

export interface MicroTask {
  readonly name: string;
  /** Runs `ops` operations. */
  readonly fn: () => unknown;
  readonly ops: number;
  /** Untimed, before each call (e.g. queue the steers that the timed call drains). */
  readonly beforeEach?: () => void | Promise<void>;
  /** Untimed, after each call (e.g. put back what the timed call consumed). */
  readonly afterEach?: () => void | Promise<void>;
  /** Budgets for this task, over the shared ones (a task with costly hooks counts calls, not time). */
  readonly budget?: Partial<Omit<MicroOptions, 'rounds'>>;
}

export interface MicroOptions {
  /** Timed budget per task per round (ms). */
  readonly timeMs: number;
  /** Warm-up budget per task per round (ms). */
  readonly warmupMs: number;
  readonly rounds: number;
  /** Minimum timed calls per task per round (tinybench runs until both budgets are met). */
  readonly minIterations?: number;
  /** Hard wall-clock bound per task per round, hooks included (ms). Default 10 x timeMs + 2 s. */
  readonly wallMs?: number;
}

export interface MicroResult {
  /** Median over rounds of each round's median, in ns per operation. */
  readonly ns: number;
  /** Each round's median, ns per operation. */
  readonly rounds: number[];
  /** Timed calls over all rounds. */
  readonly samples: number;
}

export async function micro(tasks: readonly MicroTask[], opts: MicroOptions): Promise<Map<string, MicroResult>> {
  const perTask = new Map<string, number[]>(tasks.map((t) => [t.name, []]));
  const samples = new Map<string, number>(tasks.map((t) => [t.name, 0]));
  for (let round = 0; round < opts.rounds; round++) {
    // Alternate the order each round so neither task always runs on a warmer (or busier) machine.
    const ordered = round % 2 === 0 ? tasks : [...tasks].reverse();
    for (const task of ordered) {
      const o = { ...opts, ...task.budget };
      const bench = new Bench({
        time: o.timeMs,
        warmupTime: o.warmupMs,
        iterations: o.minIterations ?? 16,
        warmupIterations: 8,
        throws: true,
        signal: AbortSignal.timeout(o.wallMs ?? o.timeMs * 10 + 2000),
      });
      bench.add(task.name, task.fn, {
        async: false,
        ...(task.beforeEach ? { beforeEach: task.beforeEach } : {}),
        ...(task.afterEach ? { afterEach: task.afterEach } : {}),
      });
      await bench.run();
      const t = bench.tasks[0];
      const result = t?.result;
      if (result?.state === 'aborted') continue; // the wall bound hit before any sample: no figure this round
      if (!result || (result.state !== 'completed' && result.state !== 'aborted-with-statistics')) {
        throw new Error(
          `micro-benchmark ${task.name} did not complete: ${result?.state ?? 'no result'}${result?.state === 'errored' ? `: ${result.error.message}` : ''}`,
        );
      }
      // tinybench reports milliseconds per call.
      perTask.get(task.name)?.push((result.latency.p50 * 1e6) / task.ops);
      samples.set(task.name, (samples.get(task.name) ?? 0) + result.latency.samplesCount);
    }
  }
  const out = new Map<string, MicroResult>();
  for (const [name, rounds] of perTask) out.set(name, { ns: median(rounds), rounds, samples: samples.get(name) ?? 0 });
  return out;
}

/** Yields to the event loop (lets queued children start, completions settle). */
export const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Polls `cond` on every turn of the event loop until it holds; throws after `timeoutMs`. */
export async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await tick();
  }
}
