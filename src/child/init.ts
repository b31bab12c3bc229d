// What a child record is made from: its identity and birth facts, and the hooks the runtime gives it.
import type { ChildIdentity, JournaledChild, Owner, RestoredRun, Runner, Steer } from '../types.ts';

export type { ChildIdentity };

/** Why a child's signal was aborted. */
export type StopReason = 'interrupt' | 'timeout';

/** The runtime's side of one child (run-child.ts), given to its record at construction. */
export interface ChildLifecycle {
  /** Told when the child is stopped, before any other hook and before its signal aborts. */
  childStopped(): void;
  /** Sees each steer before it is queued and throws to refuse it (the runner's onSteer); undefined: none. */
  readonly steerVeto: ((steer: Steer) => void) | undefined;
}

/** A child's birth facts (record.ts's ChildInit adds the batch it settles into). */
export interface ChildBirth extends ChildIdentity {
  readonly context: string | undefined;
  readonly runner: Runner;
  readonly owner: Owner | undefined;
  readonly timeout_ms: number | undefined;
  /** How a later process could run it again (see JournaledChild.agent). */
  readonly agent: JournaledChild['agent'];
  /** A revival (subagent.revive): the lost child it continues, and that child's last progress. */
  readonly revived_from?: string;
  readonly restored?: RestoredRun;
  /**
   * A child that still runs elsewhere after a restart (on a remote worker): rebuilt as it was
   * (running since `started_at`, its transcript), it continues instead of starting again.
   */
  readonly adopted?: { readonly started_at: number; readonly tail: string };
}
