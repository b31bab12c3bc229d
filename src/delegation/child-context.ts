// What a runner sees of its child (RunnerContext): one object per child, its functions on the
// prototype rather than a closure each, so they are methods: call them on ctx, never detached.
import { sleep } from '../clock.ts';
import { ErrorCode, SubrunError } from '../errors.ts';
import type { ChildRecord } from '../child/record.ts';
import type { InterruptResult, SteerResult } from '../registry/registry.ts';
import { toSnapshot, type Snapshot } from '../child/snapshot.ts';
import type { Core } from './core.ts';
import { preview } from '../child/preview.ts';
import type { DelegateOptions, DelegationHandle, RestoredRun, RunnerContext, RunTelemetry, Steer, SubtreeControl, TaskSpec, ToolCall } from '../types.ts';

const RESOLVED: Promise<void> = Promise.resolve();

const READY: Promise<void> = Promise.resolve();

export class ChildContext implements RunnerContext {
  readonly #core: Core;
  readonly #record: ChildRecord;
  #open = true;
  /** Ids this child spawned, for subtree.list(); made on the first spawn. */
  #spawned: string[] | undefined;
  #subtree: SubtreeControl | undefined;
  /** Set while a progress write is due (coalesced by the journal's checkpoint interval). */
  #progressDue: unknown;
  #telemetry: RunTelemetry | undefined;

  constructor(core: Core, record: ChildRecord) {
    this.#core = core;
    this.#record = record;
  }

  /** Makes the context inert: nothing the runner does afterwards reaches the child. */
  static close(ctx: ChildContext): void {
    ctx.#open = false;
    if (ctx.#progressDue !== undefined) ctx.#core.clock.clearTimeout(ctx.#progressDue);
    ctx.#progressDue = undefined;
  }

  /**
   * Schedules one write of the child's tail and progress (at most one per checkpoint interval):
   * a restart may lose that interval of transcript bytes, never an event or a steer.
   */
  #touch(): void {
    const journal = this.#core.journal;
    if (journal === undefined || this.#progressDue !== undefined) return;
    this.#progressDue = this.#core.clock.setTimeout(() => {
      this.#progressDue = undefined;
      if (this.#open) journal.progress(this.#record.subagent_id, this.#record.readTail().text, this.#record.progress);
    }, this.#core.checkpoint_ms);
  }

  get restored(): RestoredRun | undefined {
    return this.#record.restored;
  }

  saveProgress(state: unknown): void {
    if (!this.#open) return;
    this.#record.progress = state;
    this.#touch();
  }

  get subagent_id(): string {
    return this.#record.subagent_id;
  }
  get parent_id(): string | null {
    return this.#record.parent_id;
  }
  get depth(): number {
    return this.#record.depth;
  }
  get goal(): string {
    return this.#record.goal;
  }
  get context(): string | undefined {
    return this.#record.context;
  }
  get can_delegate(): boolean {
    return this.#record.depth + 1 < this.#core.limits.max_spawn_depth;
  }
  get max_batch(): number {
    return this.#core.limits.max_concurrent_children;
  }
  get signal(): AbortSignal {
    return this.#record.signal;
  }

  now(): number {
    return this.#core.clock.now();
  }

  sleep(ms: number, cancel?: AbortSignal): Promise<void> {
    return sleep(this.#core.clock, ms, this.#record, cancel);
  }

  checkpoint(label: string): Promise<void> {
    return this.#core.checkpoint?.(label, this.#record.subagent_id) ?? RESOLVED;
  }

  write(line: string): void {
    if (!this.#open) return;
    this.#record.appendLine(line);
    this.#touch();
  }

  thinking(text: string): void {
    if (!this.#open) return;
    this.#record.appendLine(`[thinking] ${text}`);
    this.#emit('subagent.thinking', { text });
  }

  textDelta(delta: string): void {
    if (!this.#open || delta === '') return;
    this.#record.appendStream('text', delta);
    this.#emit('subagent.text', { text: delta });
  }

  thinkingDelta(delta: string): void {
    if (!this.#open || delta === '') return;
    this.#record.appendStream('thinking', delta);
    this.#emit('subagent.thinking', { text: delta });
  }

  text(text: string): void {
    if (!this.#open) return;
    this.#record.said(text);
    this.#emit('subagent.text', { text });
  }

  /** Made on first use: a runner that reports nothing costs no telemetry object. */
  get telemetry(): RunTelemetry {
    return (this.#telemetry ??= this.#core.observer.run(this.#record));
  }

  startTool(name: string, args?: unknown, call_id?: string): ToolCall {
    if (!this.#open) return { finish() {} };
    const record = this.#record;
    const shown = preview(args);
    const index = record.toolStarted(name, shown);
    this.#emit('subagent.tool', { tool_name: name, preview: shown, tool_count: record.tool_count });
    const span = this.telemetry.tool(name, call_id);
    let ended = false;
    const isOpen = () => this.#open;
    return {
      finish(result, ok = true) {
        if (ended) return;
        ended = true;
        span.end(ok);
        if (!isOpen()) return;
        record.toolFinished(index, ok, preview(result ?? ''));
      },
    };
  }

  deliverSteers(): Steer[] {
    if (!this.#open) return [];
    const delivered = this.#record.takeSteersDelivered();
    this.#markDelivered(delivered);
    return delivered;
  }

  takeSteers(): Steer[] {
    if (!this.#open) return [];
    const taken = this.#record.takeSteers();
    const journal = this.#core.journal;
    if (journal === undefined || taken.length === 0) return taken;
    // Written before the runner can put them in a model request: a steer lost after this point
    // may have reached the model, and is reported missed with maybe_delivered.
    journal.steersTaken(
      this.#record.subagent_id,
      taken.map((t) => t.steer_id),
    );
    try {
      journal.flush();
    } catch (err) {
      this.#core.logger.error({ err, subagent_id: this.#record.subagent_id }, 'taken steers not written');
    }
    return taken;
  }

  confirmDelivered(steers: readonly Steer[]): void {
    if (!this.#open) return;
    this.#markDelivered(this.#record.confirmDelivered(steers));
  }

  /** In-process the inbox is the mailbox: every queued steer is ready for the delivery point. */
  prepareDelivery(): Promise<void> {
    return READY;
  }

  steerArrived(cancel?: AbortSignal): Promise<void> {
    return this.#record.steerArrived(cancel);
  }

  delegate(tasks: readonly TaskSpec[], options: DelegateOptions = {}): DelegationHandle {
    // Inert like everything else once the child finished: a late spawn would put an orphan
    // (and its events) after this child's entry.
    const record = this.#record;
    if (!this.#open) throw new SubrunError(ErrorCode.RuntimeClosed, `subagent ${record.subagent_id} has finished; it can no longer delegate`);
    const handle = this.#core.spawn(record, tasks, options, record.owner);
    (this.#spawned ??= []).push(...handle.subagent_ids);
    return handle;
  }

  get subtree(): SubtreeControl {
    return (this.#subtree ??= subtreeOf(this.#core, this.#record, () => this.#spawned ?? []));
  }

  /** Transcript line and `subagent.steer.delivered` for each steer (the context is open). */
  #markDelivered(steers: readonly Steer[]): void {
    if (steers.length > 0)
      this.#core.journal?.steersDelivered(
        this.#record.subagent_id,
        steers.map((t) => t.steer_id),
      );
    const now = this.#core.clock.now();
    for (const s of steers) {
      this.#core.observer.steerDelivered(this.#record.subagent_id, s.steer_id, now);
      this.#record.appendLine(`[steer] ${s.text}`);
      this.#emit(
        'subagent.steer.delivered',
        s.requeued_from === undefined ? { steer_id: s.steer_id, text: s.text } : { steer_id: s.steer_id, text: s.text, requeued_from: s.requeued_from },
      );
    }
  }

  /** Publishes `topic` about the child, with its identity in front of `extra`. */
  #emit(topic: string, extra: Record<string, unknown>): void {
    this.#core.emitAbout(topic, this.#record, extra);
    this.#touch();
  }
}

/** True if `ancestor` is above `r` in the spawn tree. */
export function isDescendant(r: ChildRecord, ancestor: ChildRecord): boolean {
  for (let p = r.parent; p; p = p.parent) if (p === ancestor) return true;
  return false;
}

function subtreeOf(core: Core, record: ChildRecord, spawned: () => readonly string[]): SubtreeControl {
  return {
    list(): Snapshot[] {
      return subtreeSnapshots(core, spawned());
    },
    steer(target: string, text: string): SteerResult {
      const r = core.registry.get(target);
      if (r && isDescendant(r, record)) return core.registry.steer(target, text);
      return { status: 'rejected', subagent_id: target, text: typeof text === 'string' ? text.trim() : '', reason: 'not_found' };
    },
    interrupt(target: string): InterruptResult {
      const r = core.registry.get(target);
      return r && isDescendant(r, record) ? core.registry.interrupt(target) : { found: false, subagent_id: target, interrupted: [] };
    },
  };
}

/** The spawned children (live or retained) and their live descendants, parents first. */
function subtreeSnapshots(core: Core, spawned: readonly string[]): Snapshot[] {
  const out: Snapshot[] = [];
  const visit = (r: ChildRecord) => {
    out.push(toSnapshot(r));
    for (const c of r.liveChildren) visit(c);
  };
  for (const id of spawned) {
    const r = core.registry.get(id);
    if (r) visit(r);
  }
  return out;
}
