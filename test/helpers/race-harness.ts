// The race-test harness shared by test/race.*.test.ts (the method is described in docs/delegation.md, "How the steer promise is proven").
//
// One RaceRun = one runtime whose every await point that matters goes through `yieldTo(label)`:
// the runtime's `checkpoint` seam (each scripted step, each tool's delivery point, each completion
// hand-off), the clock (time moves one timer at a time, only when the scheduler says so) and every
// client operation (steer, interrupt, list, tail, spawn). Whoever backs `yieldTo` (fast-check's
// scheduler, or the exhaustive DFS of race.exhaustive) decides the interleaving.
//
// The run keeps a ledger of every client call with its answer and the position in the event stream
// at which it happened, records every event, and `violations()` checks the steer promise and the
// completion/interrupt invariants against both. Nothing here sleeps or reads real time.
import fc from 'fast-check';
import { z } from 'zod';
import type { Clock } from '../../src/clock.ts';
import { defineRunnerKind } from '../../src/delegation/runners/kinds.ts';
import type { Step } from '../../src/delegation/runners/scripted.ts';
import type { CompletionEntry, DelegationHandle, RunOutcome, Runner, RunnerContext, Steer, TaskSpec } from '../../src/types.ts';
import type { IdMaker } from '../../src/ids.ts';
import type { InterruptResult, SteerResult, TailResult } from '../../src/registry/registry.ts';
import { createRuntime, type Runtime } from '../../src/delegation/runtime.ts';

/** A yield point: resolves when the driver lets the labelled step happen. */
export type YieldTo = (label: string) => Promise<void>;

// ---------------------------------------------------------------------------------------------
// Scenario vocabulary
// ---------------------------------------------------------------------------------------------

/**
 * A child's runner. `scripted` is the built-in runner. The two others are test runners:
 * - `stubborn` spawns after a checkpoint WITHOUT checking its signal first (a runner that notices
 *   an interrupt late), so a spawn can race an interrupt of the spawning child;
 * - `twophase` delivers the way model runners do (takeSteers, a "model call", confirmDelivered)
 *   and, when stopped between taking and confirming, hands back `pending_steer` honestly, not at
 *   all (`none`: the core must rescue them) or with extra bogus claims (`bogus`).
 */
export type AgentSpec =
  | { readonly kind: 'scripted'; readonly steps: readonly Step[] }
  | { readonly kind: 'stubborn'; readonly tasks: readonly TaskGen[] }
  | { readonly kind: 'twophase'; readonly rounds: number; readonly handBack: 'honest' | 'none' | 'bogus' };

export interface TaskGen {
  readonly goal: string;
  readonly agent: AgentSpec;
}

/** A client operation. `pick` chooses the target among the children known so far (+1 unknown id). */
export type ClientOp =
  | { readonly op: 'steer'; readonly pick: number; readonly target?: string }
  | { readonly op: 'interrupt'; readonly pick: number; readonly target?: string }
  | { readonly op: 'list' }
  | { readonly op: 'tail'; readonly pick: number }
  | { readonly op: 'spawn'; readonly task: TaskGen };

export interface Scenario {
  readonly max_spawn_depth: number;
  readonly max_concurrent_children: number;
  /** The first batch, delegated before anything is scheduled. */
  readonly root: readonly TaskGen[];
  /** Independent clients; each runs its operations in order, one scheduled task per operation. */
  readonly clients: readonly (readonly ClientOp[])[];
}

// ---------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------

const leafStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Step>({ op: 'tool', name: 'grep' }) },
  { weight: 1, arbitrary: fc.constant<Step>({ op: 'tool', name: 'build', ms: 3 }) },
  { weight: 1, arbitrary: fc.constant<Step>({ op: 'say', text: 'looking around' }) },
  { weight: 2, arbitrary: fc.constant<Step>({ op: 'sleep', ms: 0 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom<Step>({ op: 'wait_steer', timeout_ms: 0 }, { op: 'wait_steer', timeout_ms: 5 }, { op: 'wait_steer' }),
  },
  { weight: 2, arbitrary: fc.constantFrom<Step>({ op: 'finish', summary: 'done' }, { op: 'fail', error: 'gave up' }) },
  { weight: 1, arbitrary: fc.constant<Step>({ op: 'hang' }) },
);

const scriptedAgent = (steps: readonly Step[]): AgentSpec => ({ kind: 'scripted', steps });

/** A task for a child at `depth` (0 = first level). Children below depth 2 are leaves. */
export function taskArb(depth: number, opts: { readonly twophase?: boolean } = {}): fc.Arbitrary<TaskGen> {
  const goal = `task at depth ${depth}`;
  const steps = fc.array(leafStep, { maxLength: 4 });
  const variants: Array<fc.WeightedArbitrary<AgentSpec>> = [{ weight: 4, arbitrary: steps.map(scriptedAgent) }];
  if (opts.twophase !== false) {
    variants.push({
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('twophase' as const),
        rounds: fc.integer({ min: 1, max: 3 }),
        handBack: fc.constantFrom('honest' as const, 'none' as const, 'bogus' as const),
      }),
    });
  }
  if (depth < 2) {
    const sub = fc.array(taskArb(depth + 1, opts), { minLength: 1, maxLength: 2 });
    variants.push({
      weight: 3,
      arbitrary: fc.tuple(steps, sub, fc.nat()).map(([s, tasks, at]) => {
        const i = at % (s.length + 1);
        return scriptedAgent([...s.slice(0, i), { op: 'spawn', tasks: tasks.map((t) => ({ goal: t.goal, agent: t.agent })) }, ...s.slice(i)]);
      }),
    });
    variants.push({ weight: 1, arbitrary: sub.map((tasks): AgentSpec => ({ kind: 'stubborn', tasks })) });
  }
  return fc.oneof(...variants).map((agent) => ({ goal, agent }));
}

const clientOpArb: fc.Arbitrary<ClientOp> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('steer' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('interrupt' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('list' as const) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('tail' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('spawn' as const), task: taskArb(0) }) },
);

export function scenarioArb(opts: { readonly twophase?: boolean } = {}): fc.Arbitrary<Scenario> {
  return fc.record({
    max_spawn_depth: fc.constantFrom(2, 3),
    max_concurrent_children: fc.constant(2),
    root: fc.array(taskArb(0, opts), { minLength: 1, maxLength: 2 }),
    clients: fc.array(fc.array(clientOpArb, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 3 }),
  });
}

// ---------------------------------------------------------------------------------------------
// Test runners, clock, ids
// ---------------------------------------------------------------------------------------------

function toSpec(t: TaskGen): TaskSpec {
  return { goal: t.goal, agent: t.agent };
}

const aborted = (signal: AbortSignal): Promise<null> =>
  new Promise((resolve) => {
    if (signal.aborted) resolve(null);
    else signal.addEventListener('abort', () => resolve(null), { once: true });
  });

function stubbornRunner(tasks: readonly TaskGen[]): Runner {
  return {
    model: 'stubborn',
    async run(ctx: RunnerContext): Promise<RunOutcome> {
      await ctx.checkpoint('stubborn spawn (signal unchecked)');
      let handle: DelegationHandle | undefined;
      try {
        handle = ctx.delegate(tasks.map(toSpec));
      } catch (err) {
        ctx.write(`[spawn refused] ${err instanceof Error ? err.message : String(err)}`);
      }
      if (handle) await Promise.race([handle.results, aborted(ctx.signal)]);
      await ctx.checkpoint('stubborn deliver');
      ctx.deliverSteers();
      return ctx.signal.aborted ? { status: 'interrupted' } : { status: 'completed', summary: 'stubborn done' };
    },
  };
}

function twophaseRunner(rounds: number, handBack: 'honest' | 'none' | 'bogus'): Runner {
  return {
    model: 'twophase',
    async run(ctx: RunnerContext): Promise<RunOutcome> {
      const delivered: Steer[] = [];
      for (let i = 0; i < rounds; i++) {
        await ctx.checkpoint(`twophase round ${i} take`);
        if (ctx.signal.aborted) return { status: 'interrupted' };
        const taken = ctx.takeSteers();
        await ctx.checkpoint(`twophase round ${i} model call`);
        if (ctx.signal.aborted) {
          const pending = handBack === 'honest' ? taken : handBack === 'bogus' ? [...delivered, ...taken] : [];
          return { status: 'interrupted', pending_steer: pending };
        }
        ctx.confirmDelivered(taken);
        delivered.push(...taken);
      }
      // Takes once more after its last model call: these can only be handed back.
      const late = ctx.takeSteers();
      return { status: 'completed', summary: 'twophase done', pending_steer: handBack === 'none' ? [] : late };
    },
  };
}

export const testRunnerKinds = {
  stubborn: defineRunnerKind(z.object({ kind: z.literal('stubborn'), tasks: z.array(z.any()) }), (spec) => stubbornRunner(spec.tasks as TaskGen[])),
  twophase: defineRunnerKind(z.object({ kind: z.literal('twophase'), rounds: z.number().int(), handBack: z.enum(['honest', 'none', 'bogus']) }), (spec) =>
    twophaseRunner(spec.rounds, spec.handBack),
  ),
};

/**
 * A clock whose time moves one timer at a time. With `autoTick`, each move is a scheduled step
 * (label "clock: ..."), so a sleep, a wait_steer timeout or an interrupt grace period expires at
 * a point the driver picks, in deadline order. Without it, only `tick(ms)` moves time.
 */
export class StepClock implements Clock {
  #now = 1_700_000_000_000;
  #seq = 0;
  readonly #timers = new Map<number, { readonly at: number; readonly seq: number; readonly ms: number; readonly fn: () => void }>();
  readonly #autoTick: YieldTo | undefined;
  #armed = false;

  constructor(autoTick?: YieldTo) {
    this.#autoTick = autoTick;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const seq = ++this.#seq;
    this.#timers.set(seq, { at: this.#now + Math.max(0, ms), seq, ms, fn });
    this.#arm();
    return seq;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Moves time forward by `ms`, firing due timers synchronously in deadline order. */
  tick(ms: number): void {
    const target = this.#now + ms;
    for (let next = this.#earliest(); next && next.at <= target; next = this.#earliest()) this.#fire(next.seq);
    this.#now = target;
  }

  #earliest() {
    let best: { readonly at: number; readonly seq: number; readonly ms: number } | undefined;
    for (const t of this.#timers.values()) if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    return best;
  }

  #fire(seq: number): void {
    const t = this.#timers.get(seq);
    if (!t) return;
    this.#timers.delete(seq);
    this.#now = Math.max(this.#now, t.at);
    t.fn();
  }

  #arm(): void {
    const autoTick = this.#autoTick;
    const next = this.#earliest();
    if (!autoTick || this.#armed || !next) return;
    this.#armed = true;
    void autoTick(`clock: a ${next.ms} ms timer is due`).then(() => {
      this.#armed = false;
      const due = this.#earliest();
      if (due) this.#fire(due.seq);
      this.#arm();
    });
  }
}

/** Readable deterministic ids: children c1, c2, ...; delegations d1, ...; steers st1, ... */
export function readableIds(): IdMaker {
  let c = 0;
  let d = 0;
  let s = 0;
  let ses = 0;
  return { subagent: () => `c${++c}`, delegation: () => `d${++d}`, steer: () => `st${++s}`, session: () => `ses${++ses}` };
}

/** Lets every queued microtask run (one macrotask turn; no timers, no real time). */
export const macrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

// ---------------------------------------------------------------------------------------------
// The run: runtime + ledger + event record
// ---------------------------------------------------------------------------------------------

export interface RecordedEvent {
  readonly index: number;
  readonly type: string;
  readonly subagent_id?: string;
  readonly parent_id?: string | null;
  readonly delegation_id?: string;
  readonly steer_id?: string;
  readonly text?: string;
  readonly entry?: CompletionEntry;
  readonly results?: CompletionEntry[];
  readonly subagent_ids?: string[];
  /** For subagent.complete: the child's transcript offset at the moment of the event. */
  readonly offsetAtComplete?: number;
  readonly raw: Record<string, unknown>;
}

/** `at`: how many events had been published when the call was made. */
export type LedgerItem =
  | {
      readonly kind: 'steer';
      readonly at: number;
      readonly who: string;
      readonly target: string;
      readonly text: string;
      readonly tag: string;
      /** accepting_steer of the target in a list() taken just before the call (undefined: not listed). */
      readonly acceptingBefore: boolean | undefined;
      readonly queued: boolean;
      readonly result: SteerResult;
    }
  | {
      readonly kind: 'interrupt';
      readonly at: number;
      readonly who: string;
      readonly target: string;
      /** Children with accepting_steer=true in a list() taken just before the call. */
      readonly accepting: ReadonlySet<string>;
      readonly result: InterruptResult;
    }
  | { readonly kind: 'list'; readonly at: number; readonly who: string; readonly ids: string[] }
  | { readonly kind: 'tail'; readonly at: number; readonly who: string; readonly target: string; readonly result: TailResult }
  | { readonly kind: 'spawn'; readonly at: number; readonly who: string; readonly ids: readonly string[] };

export interface RaceRunOptions {
  /** Default: a StepClock ticked through `yieldTo`. */
  readonly clock?: StepClock;
  readonly interrupt_grace_ms?: number;
  /**
   * false: no yield at a child's completion (the seam answers undefined there), so the entry is
   * published in the same turn as the seal: production's path, where there is no seam at all.
   */
  readonly completeSeam?: boolean;
}

const UNKNOWN_ID = 'c999';

export interface RunStats {
  readonly delivered: number;
  readonly missed: number;
  readonly refused: number;
  /** Refused although the child was still live (it was finishing). */
  readonly refusedWhileLive: number;
  readonly interruptsFound: number;
  /** Interrupts that reached at least one descendant. */
  readonly subtreeInterrupts: number;
  /** Interrupts of a live child that was already sealed (finishing): found=false. */
  readonly interruptsWhileFinishing: number;
  /** Children spawned under a stopped ancestor, completed without running. */
  readonly startedStopped: number;
  readonly grandchildren: number;
}

export class RaceRun {
  readonly runtime: Runtime;
  readonly clock: StepClock;
  readonly events: RecordedEvent[] = [];
  readonly ledger: LedgerItem[] = [];
  readonly #yieldTo: YieldTo;
  readonly #scenario: Scenario;
  #tags = 0;

  constructor(yieldTo: YieldTo, scenario: Scenario, options: RaceRunOptions = {}) {
    this.#yieldTo = yieldTo;
    this.#scenario = scenario;
    this.clock = options.clock ?? new StepClock(yieldTo);
    this.runtime = createRuntime({
      max_spawn_depth: scenario.max_spawn_depth,
      max_concurrent_children: scenario.max_concurrent_children,
      interrupt_grace_ms: options.interrupt_grace_ms ?? 10_000,
      clock: this.clock,
      ids: readableIds(),
      runner_kinds: testRunnerKinds,
      checkpoint: (label, id) => (label === 'complete' && options.completeSeam === false ? undefined : yieldTo(`${id ?? '-'} ${label}`)),
    });
    this.runtime.events.subscribe('**', (e) => {
      const raw = { ...e } as Record<string, unknown>;
      const index = this.events.length;
      const id = typeof raw.subagent_id === 'string' ? raw.subagent_id : undefined;
      const offsetAtComplete = e.type === 'subagent.complete' && id !== undefined ? this.runtime.tail(id).offset : undefined;
      this.events.push({
        index,
        type: e.type,
        subagent_id: id,
        parent_id: raw.parent_id as string | null | undefined,
        delegation_id: raw.delegation_id as string | undefined,
        steer_id: raw.steer_id as string | undefined,
        text: raw.text as string | undefined,
        entry: raw.entry as CompletionEntry | undefined,
        results: raw.results as CompletionEntry[] | undefined,
        subagent_ids: raw.subagent_ids as string[] | undefined,
        offsetAtComplete,
        raw,
      });
    });
  }

  /** Ids of every child that has a spawn_requested event so far, in creation order. */
  get knownIds(): string[] {
    return this.events.filter((e) => e.type === 'subagent.spawn_requested').map((e) => e.subagent_id as string);
  }

  /** Delegates the root batch and starts every client; resolves when every client has run. */
  start(): Promise<void> {
    const at = this.events.length;
    const handle = this.runtime.delegate(this.#scenario.root.map(toSpec));
    this.ledger.push({ kind: 'spawn', at, who: 'setup', ids: handle.subagent_ids });
    return Promise.all(this.#scenario.clients.map((ops, i) => this.#client(`client${i + 1}`, ops))).then(() => undefined);
  }

  #pick(pick: number): string {
    const known = this.knownIds;
    return pick % (known.length + 1) === known.length ? UNKNOWN_ID : (known[pick % (known.length + 1)] as string);
  }

  async #client(who: string, ops: readonly ClientOp[]): Promise<void> {
    for (const op of ops) {
      // The target and the tag are fixed when the operation is scheduled, so the label tells it.
      switch (op.op) {
        case 'steer': {
          const target = op.target ?? this.#pick(op.pick);
          const tag = `<s${++this.#tags}>`;
          await this.#yieldTo(`${who}: steer ${target} ${tag}`);
          this.steer(who, target, tag);
          break;
        }
        case 'interrupt': {
          const target = op.target ?? this.#pick(op.pick);
          await this.#yieldTo(`${who}: interrupt ${target}`);
          this.interrupt(who, target);
          break;
        }
        case 'tail': {
          const target = this.#pick(op.pick);
          await this.#yieldTo(`${who}: tail ${target}`);
          this.tail(who, target);
          break;
        }
        case 'list':
          await this.#yieldTo(`${who}: list`);
          this.list(who);
          break;
        case 'spawn':
          await this.#yieldTo(`${who}: spawn a first-level child (${op.task.agent.kind})`);
          this.spawn(who, op.task);
          break;
      }
    }
  }

  // The client calls, each recorded with the event position it happened at.

  steer(who: string, target: string, tag: string): boolean {
    const at = this.events.length;
    const acceptingBefore = this.runtime.list().find((s) => s.subagent_id === target)?.accepting_steer;
    const text = `steer ${tag} please`;
    const result = this.runtime.steer(target, text);
    this.ledger.push({ kind: 'steer', at, who, target, text, tag, acceptingBefore, queued: result.status === 'queued', result });
    return result.status === 'queued';
  }

  interrupt(who: string, target: string): InterruptResult {
    const at = this.events.length;
    const accepting = new Set(
      this.runtime
        .list()
        .filter((c) => c.accepting_steer)
        .map((c) => c.subagent_id),
    );
    const result = this.runtime.interrupt(target);
    this.ledger.push({ kind: 'interrupt', at, who, target, accepting, result });
    return result;
  }

  list(who: string): string[] {
    const ids = this.runtime.list().map((s) => s.subagent_id);
    this.ledger.push({ kind: 'list', at: this.events.length, who, ids });
    return ids;
  }

  tail(who: string, target: string): TailResult {
    const result = this.runtime.tail(target);
    this.ledger.push({ kind: 'tail', at: this.events.length, who, target, result });
    return result;
  }

  spawn(who: string, task: TaskGen): readonly string[] {
    const at = this.events.length;
    const handle = this.runtime.delegate([toSpec(task)]);
    this.ledger.push({ kind: 'spawn', at, who, ids: handle.subagent_ids });
    return handle.subagent_ids;
  }

  /** Interrupts every live child (the end of every run: children waiting forever are stopped). */
  stopEverything(): void {
    for (const snap of this.runtime.list()) this.interrupt('teardown', snap.subagent_id);
  }

  newTag(): string {
    return `<s${++this.#tags}>`;
  }

  // -------------------------------------------------------------------------------------------
  // The invariants
  // -------------------------------------------------------------------------------------------

  /** Every violated invariant, as readable sentences (empty: the run kept every promise). */
  violations(): string[] {
    const out: string[] = [];
    const bad = (msg: string) => out.push(msg);
    const ev = this.events;
    const spawnedAt = new Map<string, number>();
    const parentOf = new Map<string, string | null>();
    const completes = new Map<string, RecordedEvent[]>();
    for (const e of ev) {
      if (e.type === 'subagent.spawn_requested' && e.subagent_id) {
        if (spawnedAt.has(e.subagent_id)) bad(`${e.subagent_id} was spawned twice`);
        spawnedAt.set(e.subagent_id, e.index);
        parentOf.set(e.subagent_id, e.parent_id ?? null);
      }
      if (e.type === 'subagent.complete' && e.subagent_id) {
        const list = completes.get(e.subagent_id) ?? [];
        list.push(e);
        completes.set(e.subagent_id, list);
      }
    }
    const ids = [...spawnedAt.keys()];
    const completeAt = (id: string): number => completes.get(id)?.[0]?.index ?? Number.POSITIVE_INFINITY;
    const entryOf = (id: string): CompletionEntry | undefined => completes.get(id)?.[0]?.entry;
    const isLive = (id: string, at: number): boolean => (spawnedAt.get(id) ?? Number.POSITIVE_INFINITY) < at && completeAt(id) >= at;
    const ancestors = (id: string): string[] => {
      const chain: string[] = [];
      for (let p = parentOf.get(id) ?? null; p !== null; p = parentOf.get(p) ?? null) chain.push(p);
      return chain;
    };
    const finalTail = new Map(ids.map((id) => [id, this.runtime.tail(id)] as const));

    // (c) exactly one completion entry per child, nothing of the child after it, and its
    // transcript frozen from that moment (offset unchanged, the status line last).
    const afterComplete = new Set(['subagent.start', 'subagent.thinking', 'subagent.tool', 'subagent.text', 'subagent.steer.delivered', 'subagent.complete']);
    for (const id of ids) {
      const c = completes.get(id) ?? [];
      if (c.length !== 1) {
        bad(`${id} has ${c.length} subagent.complete events (expected exactly 1${c.length === 0 ? ': an orphan or a stuck child' : ''})`);
        continue;
      }
      const done = c[0] as RecordedEvent;
      for (const e of ev) {
        if (e.index > done.index && e.subagent_id === id && afterComplete.has(e.type))
          bad(`${id}: ${e.type} (event #${e.index}) after its subagent.complete (#${done.index})`);
      }
      const tail = finalTail.get(id) as TailResult;
      if (!tail.available) bad(`${id}: its finished transcript is no longer available`);
      if (tail.truncated) bad(`${id}: transcript over the window; the test cannot check it`);
      if (tail.offset !== done.offsetAtComplete) bad(`${id}: transcript offset moved after the entry (${done.offsetAtComplete} -> ${tail.offset})`);
      const entry = done.entry as CompletionEntry;
      const statusLine = `[${entry.status}] ${entry.status === 'completed' ? entry.summary : (entry.error ?? '')}\n`;
      if (!tail.text.endsWith(statusLine)) bad(`${id}: the transcript does not end with its status line ${JSON.stringify(statusLine)}`);
      if (entry.subagent_id !== id) bad(`${id}: its entry names ${entry.subagent_id}`);
    }

    // (d) post-order: every child completes before its parent; delegation.complete after all of
    // its children, carrying exactly their entries.
    for (const id of ids) {
      const p = parentOf.get(id);
      if (p && completeAt(id) > completeAt(p)) bad(`post-order broken: ${id} completed (#${completeAt(id)}) after its parent ${p} (#${completeAt(p)})`);
    }
    for (const e of ev) {
      if (e.type !== 'delegation.complete') continue;
      for (const r of e.results ?? []) {
        if (completeAt(r.subagent_id) > e.index) bad(`delegation ${e.delegation_id} completed before its child ${r.subagent_id}`);
        const own = entryOf(r.subagent_id);
        if (own && JSON.stringify(own) !== JSON.stringify(r))
          bad(`delegation ${e.delegation_id}: its result for ${r.subagent_id} differs from the subagent.complete entry`);
      }
    }

    // Who was stopped, replayed in order: by the ledger's interrupts (the target and the
    // descendants it reached), and, for a child spawned under a stopped ancestor, at its spawn
    // (such a child must start stopped and never run).
    const stopped = new Set<string>();
    const tailOffsets = new Map<string, number>();
    const effectivelyStopped = (id: string) => [id, ...ancestors(id)].some((x) => stopped.has(x));
    // Event i happened after every call made with `at` <= i and before every call with `at` > i.
    const timeline: Array<{ readonly key: number; readonly order: number; readonly run: () => void }> = [];
    for (const e of ev) {
      if (e.type !== 'subagent.spawn_requested' || !e.subagent_id) continue;
      const id = e.subagent_id;
      timeline.push({
        key: e.index + 0.5,
        order: 0,
        run: () => {
          if (!ancestors(id).some((a) => stopped.has(a))) return;
          stopped.add(id);
          const entry = entryOf(id);
          if (ev.some((x) => x.type === 'subagent.start' && x.subagent_id === id)) bad(`${id} was spawned under a stopped ancestor but started running`);
          if (entry && (entry.status !== 'interrupted' || !entry.error?.startsWith('interrupted before it started'))) {
            bad(`${id} was spawned under a stopped ancestor but ended ${entry.status} (${entry.error ?? ''}), not "interrupted before it started"`);
          }
        },
      });
    }
    this.ledger.forEach((item, order) => {
      timeline.push({
        key: item.at,
        order,
        run: () => this.#checkCall(item, { isLive, effectivelyStopped, stopped, parentOf, spawnedAt, done: completes, tailOffsets, bad }),
      });
    });
    timeline.sort((a, b) => a.key - b.key || a.order - b.order);
    for (const t of timeline) t.run();
    for (const id of stopped) {
      const entry = entryOf(id);
      if (entry && entry.status !== 'interrupted') bad(`${id} was stopped but ended ${entry.status}`);
    }

    // (a) + (b): the steer promise, per child.
    const steers = this.ledger.filter((l): l is Extract<LedgerItem, { kind: 'steer' }> => l.kind === 'steer');
    for (const id of ids) {
      const accepted = steers.filter((s) => s.queued && s.target === id);
      const acceptedTexts = accepted.map((s) => s.text);
      const deliveredEv = ev.filter((e) => e.type === 'subagent.steer.delivered' && e.subagent_id === id);
      const deliveredTexts = deliveredEv.map((e) => e.text as string);
      const lines = (finalTail.get(id)?.text ?? '').split('\n');
      const steerLines = lines.filter((l) => l.startsWith('[steer] ')).map((l) => l.slice('[steer] '.length));
      const missed = entryOf(id)?.missed_steer?.split('\n') ?? [];
      if (JSON.stringify(steerLines) !== JSON.stringify(deliveredTexts)) {
        bad(`${id}: [steer] transcript lines ${JSON.stringify(steerLines)} differ from its delivered events ${JSON.stringify(deliveredTexts)}`);
      }
      for (const t of [...deliveredTexts, ...missed]) {
        if (!acceptedTexts.includes(t)) bad(`${id}: ${JSON.stringify(t)} was delivered or listed as missed but never accepted for this child`);
      }
      const fate: Array<'delivered' | 'missed'> = [];
      for (const s of accepted) {
        const d = deliveredTexts.filter((t) => t === s.text).length;
        const m = missed.filter((t) => t === s.text).length;
        if (d + m !== 1) bad(`${id}: queued steer ${s.tag} was delivered ${d}x and listed missed ${m}x (expected exactly one of them, once)`);
        fate.push(d > 0 ? 'delivered' : 'missed');
        const de = deliveredEv.find((e) => e.text === s.text);
        if (de && s.result?.status === 'queued' && de.steer_id !== s.result.steer_id)
          bad(`${id}: ${s.tag} delivered with steer_id ${de.steer_id}, accepted as ${s.result.steer_id}`);
      }
      const wantDelivered = accepted.filter((_, i) => fate[i] === 'delivered').map((s) => s.text);
      const wantMissed = accepted.filter((_, i) => fate[i] === 'missed').map((s) => s.text);
      if (JSON.stringify(deliveredTexts) !== JSON.stringify(wantDelivered))
        bad(`${id}: delivery order ${JSON.stringify(deliveredTexts)} is not acceptance order ${JSON.stringify(wantDelivered)}`);
      if (JSON.stringify(missed) !== JSON.stringify(wantMissed))
        bad(`${id}: missed_steer order ${JSON.stringify(missed)} is not acceptance order ${JSON.stringify(wantMissed)}`);
      const lastDelivered = fate.lastIndexOf('delivered');
      const firstMissed = fate.indexOf('missed');
      if (firstMissed >= 0 && lastDelivered > firstMissed) bad(`${id}: a steer accepted earlier was missed while a later one was delivered`);
    }
    // A refused steer leaves no trace: not in any event (delivered, entry, summary, error,
    // delegation results) and not in any transcript.
    const everything = JSON.stringify(ev.map((e) => e.raw)) + [...finalTail.values()].map((t) => t.text).join('\n');
    for (const s of steers) {
      if (!s.queued && everything.includes(s.tag)) bad(`refused steer ${s.tag} (to ${s.target}) left a trace`);
      if (s.queued && !ids.includes(s.target)) bad(`steer ${s.tag} was queued for ${s.target}, which was never spawned`);
    }
    return out;
  }

  #checkCall(
    item: LedgerItem,
    k: {
      isLive: (id: string, at: number) => boolean;
      effectivelyStopped: (id: string) => boolean;
      stopped: Set<string>;
      parentOf: Map<string, string | null>;
      spawnedAt: Map<string, number>;
      done: Map<string, RecordedEvent[]>;
      tailOffsets: Map<string, number>;
      bad: (msg: string) => void;
    },
  ): void {
    const { isLive, bad } = k;
    switch (item.kind) {
      case 'steer': {
        const live = isLive(item.target, item.at);
        if (item.queued && !live) bad(`${item.who}: steer ${item.tag} to ${item.target} was queued while it was not live`);
        if (item.queued !== (item.acceptingBefore === true)) {
          bad(
            `${item.who}: steer ${item.tag} to ${item.target} answered ${item.queued ? 'queued' : 'rejected'} while list() said accepting_steer=${item.acceptingBefore}`,
          );
        }
        // Not live: finished (spawned before, so known: `finished`), or not spawned yet (`not_found`).
        const expected = (k.spawnedAt.get(item.target) ?? Number.POSITIVE_INFINITY) < item.at ? 'finished' : 'not_found';
        if (item.result?.status === 'rejected' && !live && item.result.reason !== expected)
          bad(`${item.who}: steer ${item.tag} to a non-live child rejected as ${item.result.reason}, not ${expected}`);
        return;
      }
      case 'interrupt': {
        // A live child is found unless it was already stopped or is finishing (sealed: its
        // outcome is decided and it no longer accepts steers).
        const live = isLive(item.target, item.at);
        const finishing = live && !item.accepting.has(item.target);
        const expectFound = live && !finishing && !k.effectivelyStopped(item.target);
        if (item.result.found !== expectFound) {
          bad(`${item.who}: interrupt ${item.target} answered found=${item.result.found}; expected ${expectFound} (live=${live}, finishing=${finishing})`);
        }
        if (!item.result.found) {
          if (item.result.interrupted.length !== 0) bad(`${item.who}: interrupt ${item.target} found nothing but lists ${item.result.interrupted.join(',')}`);
          return;
        }
        const expected = [...k.spawnedAt.keys()].filter(
          (id) =>
            id === item.target || (isLive(id, item.at) && item.accepting.has(id) && isDescendant(k.parentOf, id, item.target) && !k.effectivelyStopped(id)),
        );
        if (item.result.interrupted[0] !== item.target || JSON.stringify([...item.result.interrupted].sort()) !== JSON.stringify([...expected].sort())) {
          bad(
            `${item.who}: interrupt ${item.target} listed [${item.result.interrupted.join(',')}], expected the target first and then [${expected.join(',')}]`,
          );
        }
        for (const id of item.result.interrupted) k.stopped.add(id);
        return;
      }
      case 'list': {
        const expected = [...k.spawnedAt.keys()].filter((id) => isLive(id, item.at));
        if (JSON.stringify([...item.ids].sort()) !== JSON.stringify(expected.sort()))
          bad(`${item.who}: list() gave [${item.ids.join(',')}], live were [${expected.join(',')}]`);
        return;
      }
      case 'tail': {
        const spawned = (k.spawnedAt.get(item.target) ?? Number.POSITIVE_INFINITY) < item.at;
        if (item.result.available !== spawned) bad(`${item.who}: tail ${item.target} available=${item.result.available}, spawned=${spawned}`);
        const previous = k.tailOffsets.get(item.target) ?? 0;
        if (item.result.offset < previous) bad(`${item.who}: tail ${item.target} offset went back from ${previous} to ${item.result.offset}`);
        k.tailOffsets.set(item.target, item.result.offset);
        const done = k.done.get(item.target)?.[0];
        if (done && done.index < item.at && item.result.offset !== done.offsetAtComplete) {
          bad(`${item.who}: tail of finished ${item.target} at offset ${item.result.offset}, its entry was at ${done.offsetAtComplete}`);
        }
        return;
      }
      case 'spawn':
        for (const id of item.ids) if (!k.spawnedAt.has(id)) bad(`${item.who}: spawned ${id} but no subagent.spawn_requested`);
        return;
    }
  }

  /** What this run exercised (to show a generator reaches every outcome it is meant to). */
  stats(): RunStats {
    const completes = this.events.filter((e) => e.type === 'subagent.complete');
    const steers = this.ledger.filter((l): l is Extract<LedgerItem, { kind: 'steer' }> => l.kind === 'steer');
    const interrupts = this.ledger.filter((l): l is Extract<LedgerItem, { kind: 'interrupt' }> => l.kind === 'interrupt');
    const liveAt = (id: string, at: number) =>
      this.events.some((e) => e.index < at && e.type === 'subagent.spawn_requested' && e.subagent_id === id) &&
      !this.events.some((e) => e.index < at && e.type === 'subagent.complete' && e.subagent_id === id);
    return {
      delivered: this.events.filter((e) => e.type === 'subagent.steer.delivered').length,
      missed: completes.reduce((n, e) => n + (e.entry?.missed_steer?.split('\n').length ?? 0), 0),
      refused: steers.filter((s) => !s.queued).length,
      refusedWhileLive: steers.filter((s) => !s.queued && liveAt(s.target, s.at)).length,
      interruptsFound: interrupts.filter((i) => i.who !== 'teardown' && i.result.found).length,
      subtreeInterrupts: interrupts.filter((i) => i.result.interrupted.length > 1).length,
      interruptsWhileFinishing: interrupts.filter((i) => liveAt(i.target, i.at) && !i.accepting.has(i.target)).length,
      startedStopped: completes.filter((e) => e.entry?.error?.startsWith('interrupted before it started')).length,
      grandchildren: this.events.filter((e) => e.type === 'subagent.spawn_requested' && e.parent_id !== null).length,
    };
  }

  /** The ledger and the event stream merged, one line each: the story of a failing run. */
  story(): string {
    const lines: Array<[number, number, string]> = [];
    for (const e of this.events) {
      let what = `${e.type}${e.subagent_id ? ` ${e.subagent_id}` : ''}`;
      if (e.type === 'subagent.spawn_requested') what += ` (parent ${e.parent_id ?? 'root'})`;
      if (e.type === 'subagent.steer.delivered') what += ` ${e.text}`;
      if (e.type === 'subagent.complete' && e.entry)
        what += ` ${e.entry.status}${e.entry.missed_steer ? ` missed=${JSON.stringify(e.entry.missed_steer)}` : ''}`;
      lines.push([e.index, 0, `  #${e.index} ${what}`]);
    }
    this.ledger.forEach((l, i) => {
      let what: string;
      switch (l.kind) {
        case 'steer':
          what = `steer ${l.target} ${l.tag} -> ${l.queued ? `queued${l.result?.status === 'queued' ? ` ${l.result.steer_id}` : ''}` : `rejected${l.result?.status === 'rejected' ? ` (${l.result.reason})` : ''}`}`;
          break;
        case 'interrupt':
          what = `interrupt ${l.target} -> found=${l.result.found} [${l.result.interrupted.join(',')}]`;
          break;
        case 'list':
          what = `list -> [${l.ids.join(',')}]`;
          break;
        case 'tail':
          what = `tail ${l.target} -> offset ${l.result.offset}`;
          break;
        case 'spawn':
          what = `spawn -> [${l.ids.join(',')}]`;
          break;
      }
      lines.push([l.at - 0.5, 1 + i, `  ${l.who}: ${what}`]);
    });
    lines.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    return lines.map((l) => l[2]).join('\n');
  }

  /** Throws with every violation and the run's story. */
  assertInvariants(): void {
    const v = this.violations();
    if (v.length > 0) throw new Error(`steer/completion invariants violated:\n- ${v.join('\n- ')}\nstory:\n${this.story()}`);
  }
}

function isDescendant(parentOf: Map<string, string | null>, id: string, ancestor: string): boolean {
  for (let p = parentOf.get(id) ?? null; p !== null; p = parentOf.get(p) ?? null) if (p === ancestor) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Driving with fast-check's scheduler
// ---------------------------------------------------------------------------------------------

/** Runs the scheduler until nothing is scheduled and nothing is about to be. */
export async function settle(s: fc.Scheduler): Promise<void> {
  for (let i = 0; i < 10_000; i++) {
    await s.waitIdle();
    await macrotask();
    if (s.count() === 0) return;
  }
  throw new Error('the scheduler never became idle');
}

/**
 * One Layer-1 run: the root batch and the clients under `s`, then every still-live child
 * interrupted (a child in wait_steer or hang would otherwise wait forever), then settled.
 */
export async function runScheduled(s: fc.Scheduler, scenario: Scenario, options: RaceRunOptions = {}): Promise<RaceRun> {
  const run = new RaceRun((label) => s.schedule(Promise.resolve(), label), scenario, options);
  const clients = run.start();
  await s.waitFor(clients);
  await settle(s);
  run.stopEverything();
  await settle(s);
  if (run.runtime.liveCount !== 0) {
    throw new Error(
      `children still live after the final interrupt: ${run.runtime
        .list()
        .map((c) => c.subagent_id)
        .join(', ')}\nstory:\n${run.story()}`,
    );
  }
  return run;
}

/** The body of the Layer-1 property: one scenario under one schedule; throws on any violation. */
export async function checkScenario(scenario: Scenario, s: fc.Scheduler, options: RaceRunOptions = {}): Promise<RaceRun> {
  const run = await runScheduled(s, scenario, options);
  run.assertInvariants();
  return run;
}

/** The Layer-1 property: any scenario, any interleaving, every invariant holds. */
export function raceProperty(arb: fc.Arbitrary<Scenario> = scenarioArb()): fc.IAsyncProperty<[Scenario, fc.Scheduler]> {
  return fc.asyncProperty(arb, fc.scheduler(), async (scenario, s) => {
    await checkScenario(scenario, s);
  });
}

// ---------------------------------------------------------------------------------------------
// Driving every interleaving (Layer 2)
// ---------------------------------------------------------------------------------------------

/**
 * Runs `make` once per interleaving of its yield points, depth first: at each point, every
 * pending step is a branch. A run is replayed from scratch down the chosen prefix (the runtime is
 * deterministic given the order), then extended with first choices. Quiescence between steps is
 * one macrotask turn: every microtask has run, and nothing here uses timers. Returns the number of
 * complete interleavings visited; `visit` gets each run and its trace of labels.
 */
export async function exploreAll(
  make: (yieldTo: YieldTo) => RaceRun,
  visit: (run: RaceRun, trace: readonly string[]) => void,
  maxRuns = 100_000,
): Promise<number> {
  const path: Array<{ choice: number; readonly count: number; readonly labels: string }> = [];
  for (let runs = 1; runs <= maxRuns; runs++) {
    const pending: Array<{ readonly label: string; readonly release: () => void }> = [];
    const run = make((label) => new Promise<void>((release) => pending.push({ label, release })));
    void run.start();
    const trace: string[] = [];
    for (let depth = 0; ; depth++) {
      await macrotask();
      if (pending.length === 0) break;
      const labels = pending.map((p) => p.label).join(' | ');
      let step = path[depth];
      if (step === undefined) {
        step = { choice: 0, count: pending.length, labels };
        path.push(step);
      } else if (step.labels !== labels) {
        throw new Error(`replay diverged at step ${depth}: expected [${step.labels}], got [${labels}]`);
      }
      const [task] = pending.splice(step.choice, 1) as [{ readonly label: string; readonly release: () => void }];
      trace.push(task.label);
      task.release();
    }
    if (path.length > trace.length) throw new Error('replay ended early');
    visit(run, trace);
    // Backtrack: the deepest step with an untried sibling.
    while (path.length > 0) {
      const last = path[path.length - 1] as { choice: number; readonly count: number };
      if (last.choice + 1 < last.count) {
        last.choice++;
        break;
      }
      path.pop();
    }
    if (path.length === 0) return runs;
  }
  throw new Error(`more than ${maxRuns} interleavings`);
}
