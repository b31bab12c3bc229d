// delegate(): validate a batch, make a record per task, register it, queue it on the parent's
// p-queue and return at once with the ids and a promise of the entries (ordered by task_index).
import { z } from 'zod';
import { ErrorCode, SubrunError, type Issue } from '../errors.ts';
import type { ChildRecord, SettleListener } from '../child/record.ts';
import type { Core, Revival } from './core.ts';

export type { Revival };
import type { RunnerKinds } from './runners/kinds.ts';
import { LiveChild } from './run-child.ts';
import {
  StoreUnavailableError,
  type CompletionEntry,
  type DelegateOptions,
  type DelegationHandle,
  type JournaledChild,
  type Owner,
  type Runner,
  type TaskSpec,
} from '../types.ts';

function isRunner(v: unknown): v is Runner {
  return typeof v === 'object' && v !== null && 'run' in v && typeof v.run === 'function' && 'model' in v && typeof v.model === 'string';
}

/** Any non-array object: reading any of its keys gives an unknown. */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const runnerSchema = z.custom<Runner>(isRunner, { message: 'expected a runner: an object with a string `model` and a `run` function' });

const taskSchema = z.looseObject({
  goal: z.string({ error: 'goal must be a string' }).trim().min(1, { error: 'goal must not be empty' }),
  context: z.string({ error: 'context must be a string' }).optional(),
  runner: runnerSchema.optional(),
  agent: z.looseObject({ kind: z.string({ error: 'agent.kind must be a string' }) }, { error: 'agent must be an object {kind, ...}' }).optional(),
});

const optionsSchema = z.looseObject({
  timeout_ms: z.number().int().positive({ error: 'timeout_ms must be a positive integer' }).optional(),
});

/** Converts zod issues to ours, with dotted paths rooted at `root`. */
export function toIssues(error: z.ZodError, root: string): Issue[] {
  return error.issues.map((i) => ({
    path: [root, ...i.path.map(String)].filter((p) => p !== '').join('.'),
    message: i.message,
  }));
}

export interface ResolvedTask {
  readonly goal: string;
  readonly context: string | undefined;
  /** undefined: the runtime's default runner. */
  readonly runner: Runner | undefined;
  /** How a later process could make the same runner (the journal keeps it for a revival). */
  readonly agent: JournaledChild['agent'];
}

/** A batch is a non-empty array of at most `maxConcurrent` tasks (a worker's delegate() checks the same). */
export function checkBatch(tasks: unknown, maxConcurrent: number): asserts tasks is readonly unknown[] {
  if (!Array.isArray(tasks) || tasks.length === 0) {
    throw new SubrunError(ErrorCode.TasksRequired, 'tasks required: pass a non-empty array of {goal, context?, runner?}', [
      { path: 'tasks', message: Array.isArray(tasks) ? 'must not be empty' : 'must be an array' },
    ]);
  }
  if (tasks.length > maxConcurrent) {
    throw new SubrunError(
      ErrorCode.TooManyTasks,
      `too many tasks: ${tasks.length} given, at most ${maxConcurrent} (max_concurrent_children) per batch; split the batch`,
      [{ path: 'tasks', message: `at most ${maxConcurrent} tasks` }],
    );
  }
}

/** Validates a batch and resolves each task's runner; throws a SubrunError naming the field. */
export function validateTasks(tasks: unknown, maxConcurrent: number, kinds: RunnerKinds): ResolvedTask[] {
  checkBatch(tasks, maxConcurrent);
  const issues: Issue[] = [];
  const parsed: ResolvedTask[] = [];
  tasks.forEach((task, i) => {
    if (!isPlainObject(task)) {
      issues.push({ path: `tasks.${i}`, message: 'each task must be an object {goal, context?, runner?}' });
      return;
    }
    const plain = plainTask(task);
    if (plain) {
      parsed.push(plain);
      return;
    }
    const r = taskSchema.safeParse(task);
    if (!r.success) {
      issues.push(...toIssues(r.error, `tasks.${i}`));
      return;
    }
    let runner = r.data.runner;
    if (!runner && r.data.agent) {
      const kind = Object.hasOwn(kinds, r.data.agent.kind) ? kinds[r.data.agent.kind] : undefined;
      if (!kind) {
        issues.push({
          path: `tasks.${i}.agent.kind`,
          message: `unknown runner kind ${JSON.stringify(r.data.agent.kind)}; known: ${Object.keys(kinds).join(', ')}`,
        });
        return;
      }
      const spec = kind.schema.safeParse(r.data.agent);
      if (!spec.success) {
        issues.push(...toIssues(spec.error, `tasks.${i}.agent`));
        return;
      }
      runner = kind.create(spec.data);
    }
    // A runner object with an `agent` spec beside it: the spec says how a later process makes it again.
    const agent: JournaledChild['agent'] = r.data.agent ? { spec: r.data.agent } : r.data.runner ? 'object' : 'default';
    parsed.push({ goal: r.data.goal, context: r.data.context, runner, agent });
  });
  if (issues.length > 0) {
    throw new SubrunError(ErrorCode.InvalidTasks, `invalid tasks: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues);
  }
  return parsed;
}

/**
 * The common task ({goal, context?, runner?}, all well-typed) checked by hand, sparing it a zod
 * parse; anything else (an agent spec, or something wrong) goes through the schema, which names the field.
 */
function plainTask(task: Record<string, unknown>): ResolvedTask | undefined {
  const { goal, context, runner, agent } = task;
  if (typeof goal !== 'string' || agent !== undefined) return undefined;
  if (context !== undefined && typeof context !== 'string') return undefined;
  if (runner !== undefined && !isRunner(runner)) return undefined;
  const trimmed = goal.trim();
  if (trimmed === '') return undefined;
  return { goal: trimmed, context, runner, agent: runner ? 'object' : 'default' };
}

export function spawn(
  core: Core,
  parent: ChildRecord | null,
  rawTasks: readonly TaskSpec[],
  rawOptions: DelegateOptions,
  owner: Owner | undefined,
  revival?: Revival,
): DelegationHandle {
  const { limits, journal } = core;
  // Nothing is started that could not be written down (docs/durability.md, promise 7).
  if (journal && !journal.available) throw new StoreUnavailableError('store unavailable');
  if (parent && parent.depth + 1 >= limits.max_spawn_depth) {
    throw new SubrunError(
      ErrorCode.DepthExceeded,
      `spawn depth limit reached: this subagent is at depth ${parent.depth} and max_spawn_depth is ${limits.max_spawn_depth}`,
    );
  }
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a runner (the embedder's code) may pass no options at run time
  const opts = optionsSchema.safeParse(rawOptions ?? {});
  if (!opts.success) {
    const issues = toIssues(opts.error, '');
    throw new SubrunError(ErrorCode.InvalidOptions, `invalid options: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues);
  }
  const tasks = validateTasks(rawTasks, limits.max_concurrent_children, core.runnerKinds);
  if (core.isPaused(owner)) throw new SubrunError(ErrorCode.SpawnPaused, 'spawning is paused');

  const delegation_id = core.ids.delegation();
  const parent_id = revival ? revival.parent_id : (parent?.subagent_id ?? null);
  core.observer.delegated({ delegation_id, task_count: tasks.length, parent_id, session_id: owner?.session_id });
  const batch = new Batch(tasks.length, core.hold());
  const records: ChildRecord[] = [];
  const lives: LiveChild[] = [];
  let task_index = 0;
  for (const task of tasks) {
    const live = new LiveChild(core, {
      subagent_id: core.ids.subagent(),
      parent_id,
      depth: revival ? revival.depth : parent ? parent.depth + 1 : 0,
      delegation_id,
      task_index: task_index++,
      task_count: tasks.length,
      goal: task.goal,
      context: task.context,
      runner: task.runner ?? core.defaultRunner,
      owner,
      parent,
      timeout_ms: opts.data.timeout_ms,
      batch,
      agent: task.agent,
      revived_from: revival?.revived_from,
      restored: revival?.restored,
    });
    records.push(live.record);
    lives.push(live);
    core.observer.created(live.record);
    core.emitAbout('subagent.spawn_requested', live.record);
  }
  const subagent_ids = records.map((r) => r.subagent_id);
  core.emit('delegation.dispatched', { delegation_id, subagent_ids, count: subagent_ids.length, src: delegation_id }, owner);

  // A child spawned under a parent that is already stopping starts stopped (and completes at once).
  if (parent?.stopped) for (const record of records) record.stop('interrupt');

  const queue = core.queueFor(parent?.subagent_id ?? `root:${owner?.session_id ?? ''}`);
  for (const live of lives) if (!live.record.finished) queue.add(live);

  // Emitted a turn after the last child's entry, so after its subagent.complete.
  const results = batch.results.then((entries) => {
    core.observer.delegationDone(delegation_id, entries);
    core.emit('delegation.complete', { delegation_id, results: entries, src: delegation_id }, owner);
    return entries;
  });
  let each: Promise<CompletionEntry>[] | undefined;
  return {
    delegation_id,
    subagent_ids,
    results,
    get each() {
      return (each ??= records.map((r) => r.done));
    },
  };
}

/** Collects one delegation's entries by task_index; resolves when the last child settles. */
export class Batch implements SettleListener {
  readonly #entries: CompletionEntry[];
  #left: number;
  #resolve!: (entries: CompletionEntry[]) => void;
  /** Lets the process exit once the last entry is out (see Clock.keepAlive). */
  readonly #release: () => void;
  readonly results: Promise<CompletionEntry[]>;

  constructor(count: number, release: () => void) {
    this.#entries = new Array<CompletionEntry>(count);
    this.#left = count;
    this.#release = release;
    this.results = new Promise((resolve) => (this.#resolve = resolve));
  }

  childSettled(record: Pick<ChildRecord, 'task_index'>, entry: CompletionEntry): void {
    this.#entries[record.task_index] = entry;
    if (--this.#left !== 0) return;
    // Released in the same turn as the resolve: a caller's `await results` runs in this turn's
    // microtasks, before the event loop could see nothing left and exit.
    this.#release();
    this.#resolve(this.#entries);
  }
}
