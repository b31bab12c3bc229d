// What createRuntime() and delegate() take, and the tables that hold a JavaScript caller to those
// names (a key not in them is a slip, refused by name: src/suggest.ts).
import type { Clock } from '../clock.ts';
import type { IdMaker } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { RuntimeObserver } from '../telemetry/observer.ts';
import type { ChildJournal, Owner, Runner } from '../types.ts';
import type { Adopter } from './adopt.ts';
import type { Checkpoint } from './core.ts';
import type { RunnerKinds } from './runners/kinds.ts';

/** Runtime options: one readonly object, each field validated at construction. */
export interface RuntimeOptions {
  /** Children one parent runs at once, and the largest batch it may delegate. Default 3. */
  readonly max_concurrent_children?: number;
  /** Depth bound: 1 (default) makes first-level children leaves; 2 lets them spawn once more. */
  readonly max_spawn_depth?: number;
  /** Finished children kept per owner for late list/tail. Default 100. */
  readonly retain_finished?: number;
  /** Undelivered steers one child may hold before more are refused (`queue_full`). Default 64. */
  readonly max_queued_steers?: number;
  /** The same bound in UTF-8 bytes. Default 262144 (256 KiB). */
  readonly max_queued_steer_bytes?: number;
  /** How long a stopped runner may take to return before it is abandoned. Default 10000 ms. */
  readonly interrupt_grace_ms?: number;
  /** Runner for tasks that name none. Default: a scripted runner with no steps. */
  readonly default_runner?: Runner;
  /** Extra runner kinds for `agent: {kind, ...}` task specs (scripted is built in). */
  readonly runner_kinds?: RunnerKinds;
  readonly clock?: Clock;
  readonly ids?: IdMaker;
  readonly logger?: Logger;
  /** Seam for race tests: awaited at every step boundary and before each completion. */
  readonly checkpoint?: Checkpoint;
  /**
   * Where children are written down, so that a restart forgets none (`openStore(dir)`;
   * docs/durability.md). Absent: memory only, and the runtime never touches a file.
   */
  readonly store?: ChildJournal;
  /** How often a running child's tail and progress are written at most. Default 200 ms. */
  readonly checkpoint_ms?: number;
  /**
   * With a store: `each_call` (default) commits before delegate/steer/revive return; `by_caller`
   * leaves the commit to the caller, so that one commit holds the call, its events and its kept
   * answer (the server's methods commit once, before they reply).
   */
  readonly commit?: 'each_call' | 'by_caller';
  /**
   * With a store: claims children the last process left running elsewhere (a remote worker's,
   * which kept running them), so that they continue instead of being settled as lost.
   */
  readonly adopt?: Adopter;
  /**
   * Told each fact as it happens, besides the runtime's own traces (which go to the OpenTelemetry
   * API: a no-op until the application registers a provider). The server's metrics are one.
   */
  readonly observer?: RuntimeObserver;
}

export interface DelegateCallOptions {
  /** Per-child timeout (ms) from the moment each child starts running. */
  readonly timeout_ms?: number;
  /** The RPC layer's binding; absent in-process, so such children are never reachable over RPC. */
  readonly owner?: Owner;
}

/** Every option createRuntime takes: a key not here is a slip (`max_children`), refused by name. */
export const RUNTIME_OPTIONS: Readonly<Record<keyof RuntimeOptions, true>> = {
  max_concurrent_children: true,
  max_spawn_depth: true,
  retain_finished: true,
  max_queued_steers: true,
  max_queued_steer_bytes: true,
  interrupt_grace_ms: true,
  default_runner: true,
  runner_kinds: true,
  clock: true,
  ids: true,
  logger: true,
  checkpoint: true,
  store: true,
  checkpoint_ms: true,
  commit: true,
  adopt: true,
  observer: true,
};

export const DELEGATE_OPTIONS: Readonly<Record<keyof DelegateCallOptions, true>> = { timeout_ms: true, owner: true };
