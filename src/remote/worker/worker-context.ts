// What a runner sees on a worker: the in-process RunnerContext, whose effects travel to the control
// plane as events, whose delivery points take from the child's mailbox and whose time is the Clock.
import { sleep, type Clock } from '../../clock.ts';
import { checkBatch } from '../../delegation/delegate.ts';
import { ErrorCode, SubrunError } from '../../errors.ts';
import { randomIds } from '../../ids.ts';
import type {
  CompletionEntry,
  DelegateOptions,
  DelegationHandle,
  RunnerContext,
  RunTelemetry,
  Steer,
  SubtreeControl,
  TaskSpec,
  ToolCall,
} from '../../types.ts';
import { NO_RUN } from '../../telemetry/observer.ts';
import type { Assign, WorkerEvent } from '../wire.ts';
import type { Mailbox } from './mailbox.ts';

/** What the context needs from the worker: sending, spawning, and the clock. */
export interface ContextPort {
  readonly clock: Clock;
  send(ev: DistributiveOmit<WorkerEvent, 'epoch' | 'worker'>): void;
  /** The entries of a spawn, one per task in task order. */
  spawn(delegation_id: string, subagent_ids: readonly string[], tasks: readonly TaskSpec[], options: DelegateOptions): Promise<CompletionEntry[]>;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

export class WorkerContext implements RunnerContext {
  readonly #assign: Assign;
  readonly #port: ContextPort;
  readonly #mailbox: Mailbox;
  readonly #abort = new AbortController();
  #open = true;
  #tools = 0;
  /** The worker's spans for this child (worker-trace.ts), under the child's span on the control plane. */
  readonly telemetry: RunTelemetry;

  constructor(assign: Assign, port: ContextPort, mailbox: Mailbox, telemetry: RunTelemetry = NO_RUN) {
    this.#assign = assign;
    this.#port = port;
    this.#mailbox = mailbox;
    this.telemetry = telemetry;
  }

  /** Makes the context inert (finished, or dropped by the control plane). */
  close(): void {
    this.#open = false;
  }

  get open(): boolean {
    return this.#open;
  }

  abort(reason: string): void {
    this.#abort.abort(reason);
  }

  /** Revivals run in the control plane's process (docs/durability.md); a worker's child starts fresh. */
  readonly restored = undefined;

  /** A worker's child keeps no progress across a restart of its worker (docs/scale-out.md). */
  saveProgress(): void {}

  get subagent_id(): string {
    return this.#assign.child;
  }
  get parent_id(): string | null {
    return this.#assign.limits.parent_id;
  }
  get depth(): number {
    return this.#assign.limits.depth;
  }
  get goal(): string {
    return this.#assign.goal;
  }
  get context(): string | undefined {
    return this.#assign.context;
  }
  get can_delegate(): boolean {
    return this.#assign.limits.can_delegate;
  }
  get max_batch(): number {
    return this.#assign.limits.max_batch;
  }
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  now(): number {
    return this.#port.clock.now();
  }

  sleep(ms: number, cancel?: AbortSignal): Promise<void> {
    return sleep(this.#port.clock, ms, this.#abort.signal, cancel);
  }

  checkpoint(): Promise<void> {
    return Promise.resolve();
  }

  write(line: string): void {
    if (this.#open) this.#port.send({ type: 'write', line });
  }
  thinking(text: string): void {
    if (this.#open) this.#port.send({ type: 'thinking', text });
  }
  text(text: string): void {
    if (this.#open) this.#port.send({ type: 'text', text });
  }
  textDelta(delta: string): void {
    if (this.#open && delta !== '') this.#port.send({ type: 'text_delta', text: delta });
  }
  thinkingDelta(delta: string): void {
    if (this.#open && delta !== '') this.#port.send({ type: 'thinking_delta', text: delta });
  }

  startTool(name: string, args?: unknown, call_id?: string): ToolCall {
    if (!this.#open) return { finish() {} };
    const i = ++this.#tools;
    this.#port.send({ type: 'tool', i, name, ...(args !== undefined ? { args } : {}) });
    const span = this.telemetry.tool(name, call_id);
    let ended = false;
    return {
      finish: (result, ok = true) => {
        if (ended) return;
        ended = true;
        span.end(ok);
        if (!this.#open) return;
        // Only what the transcript shows travels (the control plane previews it the same way).
        this.#port.send({ type: 'tool_end', i, ...(result !== undefined ? { result: result.slice(0, 4096) } : {}), ok });
      },
    };
  }

  /** The control plane's taken receipt for the steers that wait: asked for right before a delivery point. */
  prepareDelivery(): Promise<void> {
    return this.#open ? this.#mailbox.prepare() : Promise.resolve();
  }

  deliverSteers(): Steer[] {
    if (!this.#open) return [];
    const steers = this.#take();
    this.#delivered(steers);
    return steers;
  }

  takeSteers(): Steer[] {
    return this.#open ? this.#take() : [];
  }

  /**
   * Only granted steers: a runner that did not await prepareDelivery asks for the receipt now,
   * and gets those steers at its next delivery point.
   */
  #take(): Steer[] {
    if (this.#mailbox.noticed) void this.#mailbox.prepare();
    return this.#mailbox.take();
  }

  confirmDelivered(steers: readonly Steer[]): void {
    if (this.#open) this.#delivered(steers);
  }

  /** Marked delivered at the delivery point, then the control plane is told (its ledger confirms them). */
  #delivered(steers: readonly Steer[]): void {
    const acked = this.#mailbox.ack(steers);
    if (acked.length > 0) this.#port.send({ type: 'delivered', steer_ids: acked.map((s) => s.steer_id) });
  }

  steerArrived(cancel?: AbortSignal): Promise<void> {
    return this.#mailbox.arrived(this.#abort.signal, cancel);
  }

  delegate(tasks: readonly TaskSpec[], options: DelegateOptions = {}): DelegationHandle {
    if (!this.#open) throw new SubrunError(ErrorCode.RuntimeClosed, `subagent ${this.subagent_id} has finished; it can no longer delegate`);
    if (!this.can_delegate) throw new SubrunError(ErrorCode.DepthExceeded, `spawn depth limit reached: this subagent is at depth ${this.depth}`);
    checkBatch(tasks, this.max_batch);
    const delegation_id = randomIds.delegation();
    const subagent_ids = tasks.map(() => randomIds.subagent());
    const results = this.#port.spawn(delegation_id, subagent_ids, tasks, options);
    let each: Promise<CompletionEntry>[] | undefined;
    return {
      delegation_id,
      subagent_ids,
      results,
      get each() {
        return (each ??= subagent_ids.map((id, i) =>
          results.then((entries) => entries[i] ?? refusedEntry(id, i, 'the control plane sent no entry for this task')),
        ));
      },
    };
  }

  get subtree(): SubtreeControl {
    // Synchronous views of the tree live on the control plane; a worker cannot answer them at once.
    throw new SubrunError(ErrorCode.InvalidOptions, 'subtree control is not available to a child on a worker');
  }
}

/** The entry of a task whose spawn the control plane refused (or answered without its entry). */
export function refusedEntry(subagent_id: string, task_index: number, error: string): CompletionEntry {
  return {
    task_index,
    subagent_id,
    status: 'error',
    exit_reason: 'spawn_refused',
    summary: '',
    error,
    api_calls: 0,
    duration_seconds: 0,
    model: '',
    tokens: { input: 0, output: 0 },
    tool_trace: [],
  };
}
