// What the delegation stages share: the registry, the clock, ids, logging, the seam for tests and
// the event emitter. One object built by createRuntime() and passed down, so every effect a child
// can have is injected (a test swaps the clock, ids or checkpoint, never a module).
import type { Clock } from '../clock.ts';
import type { IdMaker } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { ChildRecord } from '../child/record.ts';
import type { Registry } from '../registry/registry.ts';
import type { ChildQueue } from './child-queue.ts';
import type { RunnerKinds } from './runners/kinds.ts';
import type { RuntimeObserver } from '../telemetry/observer.ts';
import type { ChildJournal, DelegateOptions, DelegationHandle, Owner, RestoredRun, Runner, TaskSpec } from '../types.ts';

/**
 * A yield point the runtime awaits at each seam; tests pass a scheduler to order them. Returning
 * undefined means "no yield here": the runtime then goes on in the same turn, as it does in
 * production (where there is no seam at all).
 */
export type Checkpoint = (label: string, subagent_id: string | null) => Promise<void> | undefined;

/** Receives every event with its (private) owner; the RPC layer routes on it. */
export type OwnedEventListener = (event: Record<string, unknown> & { type: string }, owner: Owner | undefined) => void;

export interface Limits {
  readonly max_concurrent_children: number;
  readonly max_spawn_depth: number;
  readonly interrupt_grace_ms: number;
}

/** A revived child's place (subagent.revive): the lost child's, with what its run continues from. */
export interface Revival {
  readonly revived_from: string;
  readonly parent_id: string | null;
  readonly depth: number;
  readonly restored: RestoredRun;
}

export interface Core {
  readonly registry: Registry;
  readonly clock: Clock;
  readonly ids: IdMaker;
  readonly logger: Logger;
  readonly limits: Limits;
  readonly defaultRunner: Runner;
  readonly runnerKinds: RunnerKinds;
  /** Where children are written down (docs/durability.md); undefined: nothing is. */
  readonly journal: ChildJournal | undefined;
  /** How often a running child's tail and runner progress are written at most. */
  readonly checkpoint_ms: number;
  /** The test seam; undefined in production, so no await is spent on it. */
  readonly checkpoint: Checkpoint | undefined;
  /** Traces and metrics: told each fact where it happens (telemetry/observer.ts). */
  readonly observer: RuntimeObserver;
  /** Publishes `topic` on the bus and to owned-event listeners. Never throws. */
  emit(topic: string, payload: Record<string, unknown>, owner: Owner | undefined): void;
  /**
   * Publishes `topic` about `record` (its identity, then `extra`), building the payload only if
   * someone listens: an in-process runtime with no subscribers builds no events at all.
   */
  emitAbout(topic: string, record: ChildRecord, extra?: Record<string, unknown>): void;
  /** The p-queue for one parent's children (a session, the local root, or a child). */
  queueFor(key: string): ChildQueue;
  releaseQueue(key: string): void;
  isPaused(owner: Owner | undefined): boolean;
  /** Holds the process alive while a delegation has children left; returns its release. */
  hold(): () => void;
  spawn(parent: ChildRecord | null, tasks: readonly TaskSpec[], options: DelegateOptions, owner: Owner | undefined, revival?: Revival): DelegationHandle;
}
