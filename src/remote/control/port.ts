// What a remote child and its runner need of the placement (placement.ts implements it), kept
// apart so that the placement, the child and the runner do not import each other.
import type { Msg } from '@nats-io/transport-node';
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { CompletionEntry, RunOutcome, RunnerContext, Steer, SteerCommit } from '../../types.ts';
import type { NatsLink } from '../nats.ts';
import type { PreassignedIds } from './preassigned-ids.ts';
import type { WorkerTable } from './worker-table.ts';

/** What a remote child's runner saves as its progress: where the child runs (a restart adopts it there). */
export interface RemoteProgress {
  readonly remote: { readonly worker: string; readonly epoch: number };
  /** Its delegations whose entries its worker still waits for. */
  readonly delegations?: readonly string[];
}

/** One remote child as the runner drives it (remote-child.ts). */
export interface RemoteChildHandle {
  readonly id: string;
  readonly worker: string | undefined;
  readonly epoch: number;
  place(ctx: RunnerContext): Promise<void>;
  run(ctx: RunnerContext): Promise<RunOutcome>;
  publishSteer(steer: Steer): void;
  committed(steer_id: string): Promise<SteerCommit> | undefined;
  disposeIfIdle(): void;
  /** A worker's event about this child (`sr.ev.<child>`). */
  onEvent(data: Uint8Array, subject: string): void;
  /** A worker's request about this child (`sr.cp.<child>.<kind>`). */
  onRequest(m: Msg, kind: string): void;
  /** Tells the worker again that steers wait, if any do. */
  renotify(): void;
  /** Running on a worker (assigned, not settled). */
  readonly placed: boolean;
  /** Adopted after a restart (not placed by this process). */
  readonly adopted: boolean;
  adopt(worker: string, epoch: number): void;
  restoreGranted(taken: readonly Steer[], waiting: boolean): void;
  resumeDelegation(delegation_id: string, results: Promise<CompletionEntry[]>): void;
  /** The runtime gave up on the run: the worker drops the child and its slot is free at once. */
  abandon(): void;
  /** Settles the child as `error` after the steer accounting (default reason `worker_lost`). */
  lost(exit_reason?: string, message?: string): void;
}

export interface PlacementPort {
  readonly link: NatsLink;
  readonly workers: WorkerTable;
  readonly ids: PreassignedIds;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly publish_ms: number;
  readonly outage_ms: number;
  child(id: string, agent: Record<string, unknown>): RemoteChildHandle;
  find(id: string): RemoteChildHandle | undefined;
  nextEpoch(): number;
  bind(c: RemoteChildHandle): void;
  unbind(c: RemoteChildHandle): void;
  fence(worker: string, child: string, epoch: number): void;
  /** Whether a next process adopts the children running on workers (a store keeps them). */
  readonly adoptive: boolean;
  /** Resolves once the workers' events the stream holds by now are handled. */
  caughtUp(): Promise<void>;
  /** Resolves once what the store committed is durable; undefined when it already is. */
  stored(): Promise<void> | undefined;
}
