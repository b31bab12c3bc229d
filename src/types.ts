// The delegation vocabulary: task specs, the runner contract, steers and owners. The objects that
// also travel on the wire (snapshots, completion entries, statuses, results) are the contract's,
// inferred from its schemas; field names are the wire's (snake_case) in-process too.
import {
  finalStatusSchema,
  type ChildStatus,
  type CompletionEntry,
  type FinalStatus,
  type InterruptResult,
  type Snapshot,
  type Tokens,
  type WireSteerResult,
} from './contract/wire.ts';
import type { RunTelemetry } from './run-telemetry.ts';

export type { ChatEnd, ChatRequest, Ending, RunTelemetry } from './run-telemetry.ts';

export type { ChildStatus, CompletionEntry, FinalStatus, InterruptResult, Snapshot, TailResult, Tokens, ToolTraceItem } from './contract/wire.ts';

export const FINAL_STATUSES: readonly FinalStatus[] = finalStatusSchema.options;

const FINAL_SET: ReadonlySet<ChildStatus> = new Set(FINAL_STATUSES);

export function isFinalStatus(status: ChildStatus): status is FinalStatus {
  return FINAL_SET.has(status);
}

/**
 * Why a steer was refused, the same word on every surface (docs/delegation.md, "Steering"):
 * `not_found` for a child unknown to the caller (never seen, no longer retained, another
 * session's), `finished` for one the caller knows that finished or is finishing, `vetoed` when the
 * runner's `onSteer` refused it. The wire answers `empty` and `too_long` as errors 4002 and 4003,
 * `queue_full` as 4005 and `store_unavailable` as -32002.
 */
export type SteerRejection = 'not_found' | 'finished' | 'empty' | 'too_long' | 'vetoed' | 'queue_full' | 'store_unavailable';

/** A steer's answer: queued (not yet delivered) or rejected, with why in-process. */
export type SteerResult =
  Extract<WireSteerResult, { status: 'queued' }> | (Omit<Extract<WireSteerResult, { status: 'rejected' }>, 'reason'> & { readonly reason: SteerRejection });

/**
 * Who spawned a child, as the RPC layer binds it. Absent for in-process delegations, which are
 * then never reachable over RPC. Never shown in a snapshot, entry or event.
 */
export interface Owner {
  readonly session_id: string;
  /** The transport the spawn request arrived on (informational; authority is the session slot). */
  readonly transport: string;
  readonly generation: number;
}

/** The authority a scoped registry call carries: the caller's session and its live generation. */
export interface Scope {
  readonly session_id: string;
  readonly generation: number;
}

export interface TaskSpec {
  readonly goal: string;
  readonly context?: string;
  /** The runner for this child. Wins over `agent`. */
  readonly runner?: Runner;
  /**
   * A runner described as plain JSON, e.g. `{kind: "scripted", steps: [...]}`, resolved through
   * the runtime's runner kinds. Neither `runner` nor `agent`: the runtime's default runner.
   */
  readonly agent?: unknown;
}

/** A missed steer in an entry's missed_steer_detail (see the wire's completion entry). */
export interface MissedSteer {
  readonly steer_id: string;
  readonly text: string;
  readonly maybe_delivered: boolean;
  /** Queued again by a revival: the steer's id on the lost child. */
  readonly requeued_from?: string;
}

/**
 * Thrown by a runner whose child ran somewhere that is gone (a remote worker that stopped
 * answering). The core settles the child as `error` with this `exit_reason`, ahead of any stop
 * reason: an interrupt that found no worker is a loss, and its steers need the loss accounting.
 */
export class RunnerLostError extends Error {
  override readonly name = 'RunnerLostError';
  constructor(
    message: string,
    readonly exit_reason: string,
    /** steer_ids the lost runner may have delivered (fetched, never acknowledged). */
    readonly maybe_delivered: ReadonlySet<string> = new Set(),
  ) {
    super(message);
  }
}

/** A child's view of its own spawn tree (its children and their descendants), and nothing else. */
export interface SubtreeControl {
  /** Snapshots of the children this child spawned (finished ones while retained) and their live descendants. */
  list(): Snapshot[];
  /** Queues guidance for a descendant; a child outside the subtree is `rejected` as not found. */
  steer(subagent_id: string, text: string): SteerResult;
  /** Interrupts a descendant and its subtree; `found: false` outside the subtree. */
  interrupt(subagent_id: string): InterruptResult;
}

/** A steer accepted into a child's inbox. */
export interface Steer {
  readonly steer_id: string;
  readonly text: string;
  /** Acceptance order within the child (1, 2, ...). */
  readonly seq: number;
  /** Queued again by a revival (subagent.revive): the steer's id on the lost child. */
  readonly requeued_from?: string;
}

/** What a runner reports when it stops. Run failures are reported here, not thrown. */
export interface RunOutcome {
  /**
   * `completed`: the task is done. `failed`: the runner gave up and says why in `error`.
   * `interrupted`: it noticed `signal` and stopped (the core decides interrupted vs timeout).
   */
  readonly status: 'completed' | 'failed' | 'interrupted';
  /** The child's answer; an interrupted child may omit it and keep its last said text. */
  readonly summary?: string;
  readonly error?: string;
  /** Why the loop ended, when more specific than the status (e.g. `max_iterations`). */
  readonly exit_reason?: string;
  readonly api_calls?: number;
  readonly tokens?: Tokens;
  /**
   * @deprecated Ignored, and nothing to hand back: the core itself tracks every steer taken with
   * `takeSteers()` and never confirmed, and lists it in `missed_steer` when the child finishes.
   * Still accepted so that runners written for earlier versions compile and run unchanged.
   */
  readonly pending_steer?: readonly Steer[];
}

export interface ToolCall {
  /** Ends the tool step: writes the result to the transcript and marks the trace item. */
  finish(result?: string, ok?: boolean): void;
}

export interface DelegateOptions {
  /** Per-child timeout from the moment it starts running; none when absent. */
  readonly timeout_ms?: number;
}

export interface DelegationHandle {
  readonly delegation_id: string;
  readonly subagent_ids: readonly string[];
  /** Resolves with one entry per task, ordered by task_index. Never rejects. */
  readonly results: Promise<CompletionEntry[]>;
  /** One promise per task (by task_index), each resolving as soon as that child completes. */
  readonly each: readonly Promise<CompletionEntry>[];
}

/**
 * What a runner can see and do while it runs one child. Everything here becomes inert once the
 * child finishes: late writes, events and deliveries are ignored, never reordered after the entry.
 * Its functions are methods of one object per child: call them on the context (`ctx.write(...)`);
 * do not detach them, spread the context or wrap it in a Proxy (wrap it by delegation instead).
 */
export interface RunnerContext {
  readonly subagent_id: string;
  readonly parent_id: string | null;
  readonly depth: number;
  readonly goal: string;
  readonly context: string | undefined;
  /** Whether this child may spawn at all (its depth is below the limit). */
  readonly can_delegate: boolean;
  /** The largest batch one delegate() call may carry (max_concurrent_children). */
  readonly max_batch: number;
  /**
   * Aborted on interrupt (of this child or an ancestor) and on timeout. Made on first read (already
   * aborted if the child was stopped before); a runner that never reads it costs no controller.
   */
  readonly signal: AbortSignal;
  /** Milliseconds since the Unix epoch, from the runtime's clock. */
  now(): number;
  /**
   * Waits `ms` on the runtime's clock; resolves early (never rejects) when `signal` or `cancel`
   * aborts. Pass `cancel` to end a wait that lost a race, so it leaves no timer behind.
   */
  sleep(ms: number, cancel?: AbortSignal): Promise<void>;
  /**
   * A yield point the runtime may use to order concurrent work (tests inject a scheduler here).
   * Runners call it at each step boundary; in production it costs one resolved promise or less.
   */
  checkpoint(label: string): Promise<void>;
  /**
   * Where this run may continue from: what the lost child it revives last passed to
   * `saveProgress` (subagent.revive, docs/durability.md); undefined for a fresh child.
   */
  readonly restored: RestoredRun | undefined;
  /**
   * Records how far the run got, as plain JSON (the scripted runner: its next step; the
   * OpenAI-compatible runner: its conversation after the last completed model turn). A store
   * keeps the latest, coalesced; a revival of this child after a restart gets it as `restored`.
   */
  saveProgress(state: unknown): void;
  /** Appends a line to the child's transcript (the 16 KiB tail hosts can read). */
  write(line: string): void;
  /** Reasoning text: transcript + `subagent.thinking`. */
  thinking(text: string): void;
  /** Assistant text: transcript + `subagent.text`; the last one is an interrupted child's summary. */
  text(text: string): void;
  /**
   * Streamed assistant text: each delta is a `subagent.text` event; consecutive deltas share one
   * transcript line; the text streamed so far is an interrupted child's summary.
   */
  textDelta(delta: string): void;
  /** Streamed reasoning: `subagent.thinking` per delta, one transcript line per block. */
  thinkingDelta(delta: string): void;
  /** Starts a tool step: counts in tool_count/last_tool, emits `subagent.tool`. */
  startTool(name: string, args?: unknown, call_id?: string): ToolCall;
  /**
   * Where the runner reports its model requests (one `chat` span and the model metrics each) and
   * anything it runs as a tool outside startTool. Absent on a context built by hand.
   */
  readonly telemetry?: RunTelemetry;
  /**
   * A delivery point for runners that deliver as they take (the scripted runner): takes every
   * queued steer in acceptance order, marks each delivered (transcript + `subagent.steer.delivered`)
   * and returns them.
   */
  deliverSteers(): Steer[];
  /**
   * Two-phase delivery for runners that put steers into a conversation: take now, then
   * `confirmDelivered` once they really reached the model. Anything taken and never confirmed
   * ends in `missed_steer`.
   */
  takeSteers(): Steer[];
  confirmDelivered(steers: readonly Steer[]): void;
  /** Resolves when a steer is queued (at once if one is), or when `signal` or `cancel` aborts. */
  steerArrived(cancel?: AbortSignal): Promise<void>;
  /**
   * Awaited right before a delivery point (`deliverSteers` / `takeSteers`). In-process it resolves
   * at once. On a worker it obtains the control plane's taken receipt for the steers fetched by
   * then, without which no steer may be delivered; a runner that skips it still delivers them,
   * one delivery point later (docs/scale-out.md, "Exact accounting").
   */
  prepareDelivery(): Promise<void>;
  /**
   * Delegates further. Throws a SubrunError (`depth_exceeded`, `spawn_paused`, ...) when this
   * child may not spawn; the grandchildren inherit this child's owner.
   */
  delegate(tasks: readonly TaskSpec[], options?: DelegateOptions): DelegationHandle;
  /** Control over this child's own descendants (never a sibling's). */
  readonly subtree: SubtreeControl;
}

/**
 * Where an accepted steer stands once its runner's commit settles (Runner.committed): `stored` (in
 * the mailbox), `refused` (surely never stored: withdrawn, no trace) or `unknown` (it may yet
 * arrive: the steer stays in the ledger, ending delivered or missed).
 */
export type SteerCommit = 'stored' | 'refused' | 'unknown';

/**
 * What the host is told of a steer once its commit settles: `queued`, `uncertain` (queued, its
 * publish outcome unknown; accounted like any queued steer) or `refused` (an error: no effect).
 */
export type SteerFate = 'queued' | 'uncertain' | 'refused';

/**
 * A runner runs one child. The contract:
 * - It must not throw for run failures: it reports them as `{status: 'failed', error}`. A throw is
 *   still caught and becomes status `error`.
 * - It honours `ctx.signal`: every wait ends early on abort, and it returns soon after. A runner
 *   that does not return within the runtime's interrupt grace is abandoned and its later effects
 *   are ignored.
 * - It takes steering only at safe points (after a tool step, before its next model call). What it
 *   takes and never confirms delivered ends in `missed_steer`: the core keeps that record itself.
 */
export interface Runner {
  /** Shown as the child's `model` (e.g. `"scripted"`). */
  readonly model: string;
  run(ctx: RunnerContext): Promise<RunOutcome>;
  /**
   * Optional veto, called synchronously when a steer is about to be queued. If it throws, the
   * steer is refused (`steer` answers `rejected`, reason `vetoed`) and leaves no trace.
   */
  onSteer?(steer: Steer, ctx: RunnerContext): void;
  /**
   * Optional, for runners whose child runs elsewhere (a remote worker): awaited before the child
   * starts, while it still counts as `queued` (it waits for a place to run, as for a concurrency
   * slot). It must settle when `ctx.signal` aborts; a child stopped meanwhile never starts.
   */
  place?(ctx: RunnerContext): Promise<void>;
  /**
   * Optional, with `onSteer`: whether an accepted steer reached the child's mailbox (a remote
   * runner publishes it and settles on the publish ack). A host is told `queued` only once it
   * resolves `stored`; undefined means nothing to wait for. See SteerCommit for the other two; a
   * rejection counts as `refused`.
   */
  committed?(subagent_id: string, steer_id: string): Promise<SteerCommit> | undefined;
  /**
   * Optional: the runtime gave up on this child's run (it ignored a stop for the interrupt grace)
   * and its entry is out. A runner holding resources elsewhere (a worker slot) lets them go now.
   */
  abandon?(subagent_id: string): void;
  /**
   * Optional: whether the child runs elsewhere and goes on without this process (a remote worker's,
   * with a store a next process adopts it from). A shutdown then leaves it running, unsettled.
   */
  outlives?(subagent_id: string): boolean;
}

/**
 * What the runtime writes down about its children so that a restart forgets nothing a host was
 * told (docs/durability.md). A store implements it (src/store); without one nothing is written.
 * Every call only queues the fact: `flush()` makes everything queued durable in one transaction,
 * and the runtime calls it before it answers (a spawn's ids, a steer's `queued`) or before a steer
 * it took reaches a model request. A store that cannot write throws StoreUnavailableError from
 * flush, and keeps what was queued for its next flush.
 */
export interface ChildJournal {
  /** False once a flush failed, until one succeeds: writes are refused meanwhile. */
  readonly available: boolean;
  spawned(child: JournaledChild): void;
  started(subagent_id: string, at: number): void;
  /** The transcript's tail window and the runner's checkpoint, coalesced by the runtime. */
  progress(subagent_id: string, tail: string, checkpoint: unknown): void;
  finished(subagent_id: string, entry: CompletionEntry, at: number): void;
  steerAccepted(subagent_id: string, steer: Steer, at: number): void;
  /** A steer taken back before it reached anything (a remote mailbox refused it). */
  steerWithdrawn(subagent_id: string, steer_id: string): void;
  /** Handed to a model request that has not confirmed yet: missed with maybe_delivered if lost now. */
  steersTaken(subagent_id: string, steer_ids: readonly string[]): void;
  steersDelivered(subagent_id: string, steer_ids: readonly string[]): void;
  flush(): void;
  /** Children whose entry was never written: the last process died while they ran or waited. */
  unfinished(): StoredChild[];
  child(subagent_id: string): StoredChild | undefined;
  /** The children of one delegation, by task_index (finished ones with their entries). */
  delegationChildren(delegation_id: string): StoredChild[];
  /** The revival of `subagent_id` (subagent.revive): a second one is refused. */
  revived(subagent_id: string, revived_as: string): void;
}

export type SteerState = 'queued' | 'taken' | 'delivered';

export interface StoredSteer {
  readonly steer_id: string;
  readonly seq: number;
  readonly text: string;
  readonly state: SteerState;
  readonly requeued_from: string | undefined;
}

/** A child as the journal has it. */
export interface StoredChild extends JournaledChild {
  readonly status: ChildStatus;
  readonly started_at: number | null;
  readonly entry: CompletionEntry | undefined;
  readonly tail: string;
  readonly checkpoint: unknown;
  readonly revived_to: string | undefined;
  /** Steers not yet finished with (a finished child's are in its entry). */
  readonly steers: readonly StoredSteer[];
}

/** What a revived run continues from (RunnerContext.restored). */
export interface RestoredRun {
  /** The lost child's last saveProgress() (undefined: it saved none; start from the beginning). */
  readonly progress: unknown;
  /** Why the run is continued, for a runner that tells its model: the restart, and the host's text. */
  readonly note: string;
}

/** Who a child is: its ids, its place in the tree and its task. */
export interface ChildIdentity {
  readonly subagent_id: string;
  readonly parent_id: string | null;
  readonly depth: number;
  readonly delegation_id: string;
  readonly task_index: number;
  readonly task_count: number;
  readonly goal: string;
}

/** A child as the journal keeps it: enough to settle it after a restart and to revive it. */
export interface JournaledChild extends ChildIdentity {
  readonly context: string | undefined;
  /**
   * How to run it again: the task's JSON agent spec, `default` for the runtime's default runner,
   * or `object` for a runner object (which no later process has: not revivable).
   */
  readonly agent: { readonly spec: unknown } | 'default' | 'object';
  readonly model: string;
  readonly owner: Owner | undefined;
  readonly timeout_ms: number | undefined;
  readonly revived_from: string | undefined;
}

/** The store could not write (disk full, read-only, corrupt): nothing was acknowledged. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
}
