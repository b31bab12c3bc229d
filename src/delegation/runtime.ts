// createRuntime(): wires the registry, the event bus, the per-parent queues and the delegation
// stages into the one object a parent agent (or the RPC server) holds.
import { systemClock } from '../clock.ts';
import { refuseUnknownKeys } from '../suggest.ts';
import { DELEGATE_OPTIONS, RUNTIME_OPTIONS, type DelegateCallOptions, type RuntimeOptions } from './runtime-options.ts';
import { ChildQueue } from './child-queue.ts';
import type { Core, Limits, OwnedEventListener } from './core.ts';
import { spawn } from './delegate.ts';
import { builtinRunnerKinds } from './runners/kinds.ts';
import { scripted } from './runners/scripted.ts';
import type { ChildJournal, DelegationHandle, Owner, Scope, SteerFate, TaskSpec } from '../types.ts';
import { revive, settleLost, type Revived, type ReviveOptions, type SettledChild } from './recover.ts';
import { adoptChosen, chooseAdoptions } from './adopt.ts';
import { ErrorCode, SubrunError } from '../errors.ts';
import { randomIds } from '../ids.ts';
import { silentLogger } from '../log.ts';
import { EventBus } from '../registry/events.ts';
import { typedEvents, type RuntimeEvents } from './runtime-events.ts';
import type { ChildRecord } from '../child/record.ts';
import {
  DEFAULT_MAX_QUEUED_STEER_BYTES,
  DEFAULT_MAX_QUEUED_STEERS,
  Registry,
  type InterruptResult,
  type ListOptions,
  type SteerResult,
  type TailResult,
} from '../registry/registry.ts';
import type { Snapshot } from '../child/snapshot.ts';
import { combine, type TurnFacts, type TurnTelemetry } from '../telemetry/observer.ts';
import { Traces } from '../telemetry/traces.ts';
import type { Timeline } from '../contract/entities.ts';
import { TimelineLog } from './timeline.ts';

export type { DelegateCallOptions, RuntimeOptions } from './runtime-options.ts';

export type { EventEnvelope, RuntimeEvents, Subscriber } from './runtime-events.ts';

export interface Runtime {
  readonly events: RuntimeEvents;
  readonly limits: Limits;
  /** Delegates a batch; returns at once. Throws a SubrunError for a bad batch. */
  delegate(tasks: readonly TaskSpec[], options?: DelegateCallOptions): DelegationHandle;
  list(options?: ListOptions): Snapshot[];
  tail(subagent_id: string, since?: number): TailResult;
  /**
   * Queues guidance for a child. `queued` means accepted, not delivered: it ends delivered or in the
   * entry's missed_steer. `rejected` changes nothing and says why (`reason`).
   */
  steer(subagent_id: string, text: string): SteerResult;
  /**
   * For a steer `steer` answered `queued`: the promise that it reached the child's mailbox, when
   * the child's runner keeps one elsewhere (a remote worker); undefined otherwise (in-process, the
   * inbox is the mailbox). Resolves `queued` when the steer is in the mailbox, `uncertain` when its
   * outcome is unknown (it is accounted all the same: delivered or missed), `refused` when it never
   * reached the mailbox and was taken back, leaving no trace.
   */
  steerCommitted(subagent_id: string, steer_id: string): Promise<SteerFate> | undefined;
  /**
   * Stops the child and its whole subtree; `interrupted` lists the target, then the descendants it
   * reached. `found: false` if unknown, finished, finishing or already stopped.
   */
  interrupt(subagent_id: string): InterruptResult;
  /** The same calls, refusing a foreign, retired or unknown child as not found. */
  readonly scoped: {
    list(scope: Scope, options?: ListOptions): Snapshot[];
    tail(scope: Scope, subagent_id: string, since?: number): TailResult;
    steer(scope: Scope, subagent_id: string, text: string): SteerResult;
    interrupt(scope: Scope, subagent_id: string): InterruptResult;
    /** Whether the child is in reach of the scope: live, or finished and still retained. */
    has(scope: Scope, subagent_id: string): boolean;
    /** The scope's children with their times, steers with their fates, interrupt marks (delegation/timeline.ts). */
    timeline(scope: Scope): Timeline;
  };
  /** Pauses (or resumes) every new spawn of one session, at any depth. */
  setPaused(session_id: string, paused: boolean): void;
  isPaused(session_id: string): boolean;
  /** Interrupts every live child of a session (all generations, all depths); returns the ids. */
  interruptSession(session_id: string, generation?: number): string[];
  /**
   * A session is closed: interrupts its live children (all generations, all depths) and lets go of
   * everything the runtime kept for it: its finished children now, its live ones as they finish
   * (their entries, `done` promises and events still come as always, but none is retained for
   * list or tail), then its queue and pause flag. Returns the ids interrupted.
   */
  releaseSession(session_id: string): string[];
  /**
   * A session was reset: interrupts the live children of generations up to `generation` and stops
   * retaining them (finished ones are dropped now, live ones are not kept when they finish): no
   * scope can reach them again. Returns the ids interrupted.
   */
  retireGeneration(session_id: string, generation: number): string[];
  /** Interrupts every live child; resolves when all have completed. */
  shutdown(): Promise<void>;
  /**
   * The children the last process on this store lost (running or queued when it died), each
   * settled at this runtime's start with its one entry (`error`, `server_restart`). Empty
   * without a store.
   */
  recovered(): readonly SettledChild[];
  /**
   * Starts a new child continuing a lost one (docs/durability.md, "Revive"); throws a SubrunError
   * (`not_revivable`, `already_revived`). In-process, any child of the store; scoped, only the scope's.
   */
  revive(subagent_id: string, options?: ReviveOptions & { readonly owner?: Owner; readonly scope?: Scope }): Revived;
  /** A parent agent's turn starts: its span (under the request being handled) and its model metrics. */
  turn(t: TurnFacts): TurnTelemetry;
  /** Every event together with its private owner binding (for the RPC layer's routing). */
  onOwnedEvent(listener: OwnedEventListener): () => void;
  readonly liveCount: number;
  /** Parent queues held (each parent with children, and each session's root); for diagnostics. */
  readonly queueCount: number;
}

export function positiveInt(name: string, value: unknown, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new SubrunError(ErrorCode.InvalidOptions, `${name} must be an integer >= ${min}, got ${JSON.stringify(value)}`, [
      { path: name, message: `expected an integer >= ${min}` },
    ]);
  }
  return value;
}

export function createRuntime(options: RuntimeOptions = {}): Runtime {
  refuseUnknownKeys('createRuntime', options, RUNTIME_OPTIONS);
  const limits: Limits = {
    max_concurrent_children: positiveInt('max_concurrent_children', options.max_concurrent_children, 3),
    max_spawn_depth: positiveInt('max_spawn_depth', options.max_spawn_depth, 1),
    interrupt_grace_ms: positiveInt('interrupt_grace_ms', options.interrupt_grace_ms, 10_000, 0),
  };
  const retain = positiveInt('retain_finished', options.retain_finished, 100, 0);
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? randomIds;
  const logger = options.logger ?? silentLogger;
  const bus = new EventBus({ logger, now: () => clock.now() });
  const journal = options.store;
  const registry = new Registry(
    ids,
    retain,
    positiveInt('max_queued_steers', options.max_queued_steers, DEFAULT_MAX_QUEUED_STEERS),
    positiveInt('max_queued_steer_bytes', options.max_queued_steer_bytes, DEFAULT_MAX_QUEUED_STEER_BYTES, 1),
    journal,
    options.commit !== 'by_caller',
  );
  const traces = new Traces();
  const timeline = new TimelineLog(
    (id) => registry.get(id),
    () => clock.now(),
  );
  const own = combine(traces, timeline.observer);
  const observer = options.observer ? combine(own, options.observer) : own;
  const queues = new Map<string, ChildQueue>();
  const paused = new Set<string>();
  const ownedListeners = new Set<OwnedEventListener>();
  // One keep-alive for the whole runtime, held while any delegation has children left.
  let holds = 0;
  let releaseClock: (() => void) | undefined;
  const hold = (): (() => void) => {
    if (holds++ === 0) releaseClock = clock.keepAlive?.();
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      if (--holds === 0) {
        releaseClock?.();
        releaseClock = undefined;
      }
    };
  };

  const listening = (topic: string): boolean => ownedListeners.size > 0 || bus.hasSubscribers(topic);
  const deliver = (topic: string, payload: Record<string, unknown>, owner: Owner | undefined): void => {
    const event = bus.publish(topic, payload);
    for (const listener of ownedListeners) {
      try {
        listener(event, owner);
      } catch (err) {
        logger.error({ err, topic }, 'owned event listener threw');
      }
    }
  };

  const core: Core = {
    registry,
    clock,
    ids,
    logger,
    limits,
    defaultRunner: options.default_runner ?? scripted([]),
    runnerKinds: { ...builtinRunnerKinds, ...options.runner_kinds },
    checkpoint: options.checkpoint,
    journal,
    checkpoint_ms: positiveInt('checkpoint_ms', options.checkpoint_ms, 200, 1),
    observer,
    emit(topic, payload, owner) {
      if (listening(topic)) deliver(topic, payload, owner);
    },
    emitAbout(topic, record, extra) {
      if (listening(topic)) deliver(topic, record.eventPayload(extra), record.owner);
    },
    queueFor(key) {
      let q = queues.get(key);
      if (!q) queues.set(key, (q = new ChildQueue(limits.max_concurrent_children)));
      return q;
    },
    // Called when the parent's entry is out. Its children have all finished by then (post-order)
    // and its context is closed (no more spawns), so the queue is dropped even if p-queue has not
    // yet counted the last task done: waiting for size 0 and pending 0 here kept a queue per
    // parent forever whenever its last child's slot was still being released.
    releaseQueue(key) {
      queues.delete(key);
    },
    isPaused: (owner) => paused.has(owner?.session_id ?? ''),
    hold,
    spawn: (parent, tasks, opts, owner, revival) => spawn(core, parent, tasks, opts, owner, revival),
  };
  // Settled before anything can be asked of this runtime: a lost child is never seen "running".
  // Children still running elsewhere are adopted instead (decided first, rebuilt once the rest is
  // settled, so their delegations hold every sibling's entry).
  const adopted = journal && options.adopt ? chooseAdoptions(journal, options.adopt) : undefined;
  const recovered = journal ? settleLost(journal, clock.now(), adopted) : [];
  if (journal && adopted && adopted.size > 0) adoptChosen(core, journal, adopted);
  /** Written before the caller is told (a library caller has no reply to hold back). */
  const written = <T>(value: T): T => {
    if (options.commit !== 'by_caller') journal?.flush();
    return value;
  };

  const steered = (r: SteerResult, scope?: Scope): SteerResult => {
    if (r.status === 'queued') observer.steerQueued(r.subagent_id, r.steer_id, Buffer.byteLength(r.text, 'utf8'), clock.now());
    else {
      observer.steerRejected(r.subagent_id, r.reason);
      // Refused to the caller's own child (it takes no more): a mark on its row. A foreign or
      // unknown child's leaves none; a full queue or a store that cannot write is an error, not a fate.
      const own = r.reason === 'not_found' || r.reason === 'finished' || r.reason === 'vetoed' ? registry.getScoped(scope, r.subagent_id) : undefined;
      if (own) timeline.rejected(own);
    }
    return r;
  };
  const interrupted = (r: InterruptResult): InterruptResult => {
    observer.interrupted(r.subagent_id, r.found, r.interrupted);
    return r;
  };

  const interruptAll = (records: Iterable<ChildRecord>): string[] => {
    const out: string[] = [];
    for (const r of [...records]) {
      // Stop top-most live records; stopping a parent reaches its subtree.
      if (r.stop('interrupt')) out.push(r.subagent_id);
    }
    return out;
  };

  return {
    events: typedEvents(bus),
    limits,
    delegate: (tasks, opts = {}) => {
      refuseUnknownKeys('delegate', opts, DELEGATE_OPTIONS);
      return written(spawn(core, null, tasks, { timeout_ms: opts.timeout_ms }, opts.owner));
    },
    list: (o) => registry.list(o),
    tail: (id, since) => {
      // The wire's rule (subagent.tail's `since`): a byte offset, never negative or fractional.
      if (since !== undefined && !(Number.isSafeInteger(since) && since >= 0))
        throw new RangeError(`tail: since must be a non-negative integer, got ${String(since)}`);
      return storedTail(registry.tail(id, since), journal, undefined, since);
    },
    steer: (id, text) => steered(registry.steer(id, text)),
    steerCommitted(id, steer_id) {
      const record = registry.get(id);
      const pending = record?.runner.committed?.(id, steer_id);
      if (!record || !pending) return undefined;
      // Refused: withdrawn if still queued here (no trace); if it was taken or sealed meanwhile it
      // is in the ledger already and ends delivered or missed, so it stays accepted. An unknown
      // outcome is kept and said so: the host hears `queued` with `uncertain`, and the steer ends
      // delivered or missed like any other (an error would have to mean "no effect").
      const refused = (): SteerFate => {
        const withdrawn = record.withdrawSteer(steer_id);
        if (withdrawn) {
          journal?.steerWithdrawn(id, steer_id);
          observer.steerWithdrawn(id, steer_id);
        }
        return withdrawn ? 'refused' : 'queued';
      };
      return pending.then((commit) => (commit === 'refused' ? refused() : commit === 'stored' ? 'queued' : 'uncertain'), refused);
    },
    interrupt: (id) => interrupted(registry.interrupt(id)),
    turn: (t) => observer.turn(t),
    scoped: {
      list: (scope, o) => registry.listScoped(scope, o),
      tail: (scope, id, since) => storedTail(registry.tail(id, since, scope), journal, scope, since),
      steer: (scope, id, text) => steered(registry.steer(id, text, scope), scope),
      interrupt: (scope, id) => interrupted(registry.interrupt(id, scope)),
      has: (scope, id) => registry.getScoped(scope, id) !== undefined,
      timeline: (scope) => timeline.view(scope, registry.recordsScoped(scope), clock.now()),
    },
    setPaused(session_id, value) {
      if (value) paused.add(session_id);
      else paused.delete(session_id);
    },
    isPaused: (session_id) => paused.has(session_id),
    interruptSession(session_id, generation) {
      const records = registry.liveOf(session_id).filter((r) => generation === undefined || r.owner?.generation === generation);
      return interruptAll(records);
    },
    releaseSession(session_id) {
      const interrupted = interruptAll(registry.liveOf(session_id));
      paused.delete(session_id);
      timeline.release(session_id);
      // Dropped only once its children are all out: a spawn racing the close still finds the queue
      // (and the concurrency bound) its siblings hold slots in.
      registry.release(session_id, () => queues.delete(`root:${session_id}`));
      return interrupted;
    },
    retireGeneration(session_id, generation) {
      const interrupted = interruptAll(registry.liveOf(session_id).filter((r) => (r.owner?.generation ?? 0) <= generation));
      registry.retireBefore(session_id, generation + 1);
      timeline.retire(session_id, generation);
      return interrupted;
    },
    async shutdown() {
      const live = [...registry.liveRecords()];
      // A child that goes on elsewhere (a worker's, adopted by the next process) is left running:
      // its latest transcript and progress are written, and nothing of it is settled.
      // One already stopped (an interrupt on its way) finishes here as it would have.
      const stays = (r: ChildRecord) => !r.stopped && r.runner.outlives?.(r.subagent_id) === true;
      for (const r of live) if (stays(r)) journal?.progress(r.subagent_id, r.readTail().text, r.progress);
      const stopped = live.filter((r) => !stays(r));
      interruptAll(stopped);
      await Promise.all(stopped.map((r) => r.done));
    },
    recovered: () => recovered,
    revive: (id, o = {}) => written(revive(core, o.scope, id, o, o.owner)),
    onOwnedEvent(listener) {
      ownedListeners.add(listener);
      return () => ownedListeners.delete(listener);
    },
    get liveCount() {
      return registry.liveCount;
    },
    get queueCount() {
      return queues.size;
    },
  };
}

/**
 * A tail the registry no longer has, from the journal: a child the last process lost keeps its
 * last written tail for subagent.tail (docs/durability.md, promise 2).
 */
function storedTail(tail: TailResult, journal: ChildJournal | undefined, scope: Scope | undefined, since: number | undefined): TailResult {
  if (tail.available || journal === undefined) return tail;
  const c = journal.child(tail.subagent_id);
  if (!c?.entry) return tail;
  if (scope && (c.owner?.session_id !== scope.session_id || c.owner.generation !== scope.generation)) return tail;
  // The written window counts from 0: its offsets in the lost process are gone with it.
  const bytes = Buffer.from(c.tail, 'utf8');
  const from = since === undefined ? 0 : Math.min(Math.max(0, Math.floor(since)), bytes.length);
  return { subagent_id: tail.subagent_id, available: true, text: bytes.subarray(from).toString('utf8'), truncated: false, offset: bytes.length };
}
