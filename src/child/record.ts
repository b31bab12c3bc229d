// The registry's record of one child: identity, owner binding and every piece of its mutable state
// (counters, steer inbox, transcript, stop), changed only through its intent methods.
import { SteerInbox } from './steering.ts';
import { Transcript, type TailSlice } from './transcript.ts';
import type { ChildStatus, CompletionEntry, JournaledChild, Owner, RestoredRun, Runner, Steer, ToolTraceItem } from '../types.ts';
import type { ChildBirth, ChildLifecycle, StopReason } from './init.ts';

export type { ChildIdentity, ChildLifecycle, StopReason } from './init.ts';

/** Told of each child's entry as it is settled (a delegation collecting its results). */
export interface SettleListener {
  childSettled(record: ChildRecord, entry: CompletionEntry): void;
}

export interface ChildInit extends ChildBirth {
  readonly parent: ChildRecord | null;
  readonly batch?: SettleListener;
}

export class ChildRecord {
  readonly subagent_id: string;
  readonly parent_id: string | null;
  readonly depth: number;
  readonly delegation_id: string;
  readonly task_index: number;
  readonly task_count: number;
  readonly goal: string;
  readonly context: string | undefined;
  readonly runner: Runner;
  readonly model: string;
  /** Authority binding: never copied into a snapshot, entry or event. */
  readonly owner: Owner | undefined;
  readonly parent: ChildRecord | null;
  readonly timeout_ms: number | undefined;
  readonly agent: JournaledChild['agent'];
  readonly revived_from: string | undefined;
  /** What the run continues from (RunnerContext.restored). */
  readonly restored: RestoredRun | undefined;
  /** Epoch milliseconds: when it was made (queued), before any start. */
  readonly created_at: number;
  /** The runner's latest saveProgress(), kept for the journal. */
  progress: unknown;

  readonly #inbox = new SteerInbox();
  readonly #transcript = new Transcript();
  /** Dropped once settled, with the batch: a retained record keeps no context, timers or siblings. */
  #lifecycle: ChildLifecycle | undefined;
  #batch: SettleListener | undefined;
  #status: ChildStatus = 'queued';
  #startedAt: number | null = null;
  #finishedAt: number | null = null;
  #toolCount = 0;
  #lastTool = '';
  /** Made on the first tool. */
  #toolTrace: Array<{ tool: string; status: ToolTraceItem['status'] }> | undefined;
  #lastText = '';
  /** Where the open streamed text block begins (absolute offset): its text is read back, never held twice. */
  #textFrom: number | null = null;
  #block: 'text' | 'thinking' | null = null;
  /** Made on first use: a runner that never reads its signal costs no controller. */
  #abort: AbortController | undefined;
  #stopReason: StopReason | undefined;
  /** The runtime's own reactions to a stop: plain callbacks, so the runtime never listens on the signal. */
  #stopHooks: Array<() => void> | undefined;
  /** Most children spawn none. */
  #liveChildren: Set<ChildRecord> | undefined;
  #entry: CompletionEntry | undefined;
  /** Made on first use (see `done`). */
  #done: Promise<CompletionEntry> | undefined;
  #resolveDone: ((entry: CompletionEntry) => void) | undefined;

  constructor(init: ChildInit, lifecycle: ChildLifecycle, created_at: number) {
    this.created_at = created_at;
    this.subagent_id = init.subagent_id;
    this.parent_id = init.parent_id;
    this.depth = init.depth;
    this.delegation_id = init.delegation_id;
    this.task_index = init.task_index;
    this.task_count = init.task_count;
    this.goal = init.goal;
    this.context = init.context;
    this.runner = init.runner;
    this.model = init.runner.model;
    this.owner = init.owner;
    this.parent = init.parent;
    this.timeout_ms = init.timeout_ms;
    this.agent = init.agent;
    this.revived_from = init.revived_from;
    this.restored = init.restored;
    this.progress = init.restored?.progress;
    this.#batch = init.batch;
    this.#lifecycle = lifecycle;
  }

  get status(): ChildStatus {
    return this.#status;
  }

  /** Epoch milliseconds; null while queued. */
  get started_at(): number | null {
    return this.#startedAt;
  }

  /** Epoch milliseconds; null until the entry is out. */
  get finished_at(): number | null {
    return this.#finishedAt;
  }

  get tool_count(): number {
    return this.#toolCount;
  }

  get last_tool(): string {
    return this.#lastTool;
  }

  /** Tools the child ran, in order. */
  get tool_trace(): readonly ToolTraceItem[] {
    return this.#toolTrace ?? NO_TOOLS;
  }

  /**
   * Last assistant text: an interrupted child's summary when its runner gives none. A streamed
   * answer counts as far as the transcript's tail window still holds it (its last 16 KiB).
   */
  get last_text(): string {
    return this.#textFrom === null ? this.#lastText : this.#transcript.read(this.#textFrom).text;
  }

  /** Live (not yet completed) children of this child. */
  get liveChildren(): ReadonlySet<ChildRecord> {
    return this.#liveChildren ?? NO_CHILDREN;
  }

  /** Its completion entry, once settled. */
  get entry(): CompletionEntry | undefined {
    return this.#entry;
  }

  /**
   * Resolves with the completion entry. Made on first use (p-queue holds a child's slot on it once
   * the child starts): a delegation collects its results through its batch, not one promise each.
   */
  get done(): Promise<CompletionEntry> {
    if (this.#done === undefined) {
      const entry = this.#entry;
      this.#done = entry ? Promise.resolve(entry) : new Promise((resolve) => (this.#resolveDone = resolve));
    }
    return this.#done;
  }

  get finished(): boolean {
    return this.#entry !== undefined;
  }

  /** Why the child was stopped (once; undefined if it never was). */
  get stopReason(): StopReason | undefined {
    return this.#stopReason;
  }

  get stopped(): boolean {
    return this.#stopReason !== undefined;
  }

  /**
   * The runner's signal (ctx.signal), aborted with the stop reason. The runtime itself never
   * listens on it (see onStop()); one asked for after the stop comes already aborted.
   */
  get signal(): AbortSignal {
    if (this.#abort === undefined) {
      this.#abort = new AbortController();
      if (this.#stopReason !== undefined) this.#abort.abort(this.#stopReason);
    }
    return this.#abort.signal;
  }

  // --- the lifecycle ---

  /** Queued -> running, at `now` (epoch ms). */
  start(now: number): void {
    this.#status = 'running';
    this.#startedAt = now;
    if (this.revived_from !== undefined) this.appendLine(`[revived from ${this.revived_from}]`);
    this.appendLine(`[start] ${this.goal}`);
  }

  /** Queued -> running as it already was before a restart (an adopted child): no new start line. */
  resume(started_at: number, tail: string): void {
    this.#status = 'running';
    this.#startedAt = started_at;
    if (tail !== '') this.#transcript.append(tail);
  }

  /** A whole line of text the child said: its last said text, and a transcript line. */
  said(text: string): void {
    this.#lastText = text;
    this.#textFrom = null;
    this.appendLine(`[text] ${text}`);
  }

  /** A tool call began (`shown` is its arguments' preview); returns its place in the trace. */
  toolStarted(name: string, shown: string): number {
    this.#toolCount += 1;
    this.#lastTool = name;
    this.appendLine(`[tool] ${name}${shown ? ` ${shown}` : ''}`);
    return (this.#toolTrace ??= []).push({ tool: name, status: 'running' }) - 1;
  }

  /** The tool call at `index` ended (`shown` is its result's preview). */
  toolFinished(index: number, ok: boolean, shown: string): void {
    const item = this.#toolTrace?.[index];
    if (item) item.status = ok ? 'ok' : 'error';
    this.appendLine(`[result] ${ok ? '' : 'error: '}${shown}`);
  }

  addLiveChild(child: ChildRecord): void {
    (this.#liveChildren ??= new Set()).add(child);
  }

  removeLiveChild(child: ChildRecord): void {
    this.#liveChildren?.delete(child);
  }

  /**
   * Aborts the child's signal once; false if it was already stopped, has finished, or is finishing
   * (its inbox is sealed: the outcome is decided, so a late stop would be reported as an interrupt
   * that never happened).
   */
  stop(reason: StopReason): boolean {
    if (this.#stopReason !== undefined || this.#entry !== undefined || !this.#inbox.accepting) return false;
    this.#stopReason = reason;
    this.#lifecycle?.childStopped();
    const hooks = this.#stopHooks;
    this.#stopHooks = undefined;
    if (hooks) for (const hook of hooks) hook();
    this.#abort?.abort(reason);
    return true;
  }

  /**
   * Runs `hook` once when the child is stopped (before its signal aborts); at once if it already
   * was. Returns a function that cancels the hook.
   */
  onStop(hook: () => void): () => void {
    if (this.#stopReason !== undefined) {
      hook();
      return noop;
    }
    (this.#stopHooks ??= []).push(hook);
    return () => {
      const hooks = this.#stopHooks;
      const i = hooks?.indexOf(hook) ?? -1;
      if (i >= 0) hooks?.splice(i, 1);
    };
  }

  /** The entry is decided: the final status, at `now`, and the transcript's last line. */
  finish(entry: CompletionEntry, now: number): void {
    this.#status = entry.status;
    this.#finishedAt = now;
    this.appendLine(`[${entry.status}] ${entry.status === 'completed' ? entry.summary : (entry.error ?? '')}`);
  }

  settle(entry: CompletionEntry): void {
    this.#entry = entry;
    this.#resolveDone?.(entry);
    this.#resolveDone = undefined;
    this.#batch?.childSettled(this, entry);
    this.#batch = undefined;
    this.#lifecycle = undefined;
  }

  // --- the steer inbox (queued -> taken -> delivered; seal) ---

  get accepting_steer(): boolean {
    return this.#inbox.accepting;
  }

  /** Whether one more steer of `bytes` fits under the bounds on its undelivered steers (queued or taken). */
  hasRoomForSteer(bytes: number, maxCount: number, maxBytes: number): boolean {
    return this.#inbox.pendingCount < maxCount && this.#inbox.pendingBytes + bytes <= maxBytes;
  }

  /**
   * Queues a steer, past the runner's veto (whose throw propagates: the steer leaves no trace, and
   * no waiting runner wakes); null once the inbox is sealed.
   */
  acceptSteer(steer_id: string, text: string, requeued_from?: string): Steer | null {
    return this.#inbox.push(steer_id, text, this.#lifecycle?.steerVeto, requeued_from);
  }

  /** Queues a steer as it was before a restart (an adopted child's), its seq kept. */
  restoreSteer(steer: Steer): void {
    this.#inbox.restore(steer);
  }

  /** Takes back a steer still queued (it never reached the runner's mailbox); true if it was. */
  withdrawSteer(steer_id: string): boolean {
    return this.#inbox.withdraw(steer_id);
  }

  /** Queued -> taken, in acceptance order; each stays undelivered until confirmDelivered. */
  takeSteers(): Steer[] {
    return this.#inbox.take();
  }

  /** Queued -> delivered in one step, in acceptance order (a runner that delivers as it takes). */
  takeSteersDelivered(): Steer[] {
    return this.#inbox.takeDelivered();
  }

  /** Taken -> delivered; returns those newly confirmed (none once sealed). */
  confirmDelivered(steers: readonly Steer[]): Steer[] {
    return this.#inbox.confirm(steers);
  }

  /** Resolves when a steer is queued (at once if one is), the inbox is sealed, the child stops or `cancel` aborts. */
  steerArrived(cancel?: AbortSignal): Promise<void> {
    return this.#inbox.waitForSteer(this, cancel);
  }

  /** Steers taken and never confirmed (after the seal: those it handed back as taken). */
  takenSteerIds(): ReadonlySet<string> {
    return this.#inbox.takenIds();
  }

  /** Stops accepting and hands back every undelivered steer, in order, in one step: the atomic close. */
  sealInbox(): Steer[] {
    return this.#inbox.seal();
  }

  // --- the transcript ---

  /** The tail window, or only what was written after `since`. */
  readTail(since?: number): TailSlice {
    return this.#transcript.read(since);
  }

  /** Appends one whole transcript line, closing a streamed block first. */
  appendLine(line: string): void {
    this.#closeBlock();
    this.#transcript.append(line);
    // A byte, not `${line}\n`: the concatenation would be copied once more to encode.
    if (!line.endsWith('\n')) this.#transcript.appendNewline();
  }

  /**
   * Appends a streamed delta: consecutive deltas of one kind share one `[text] ...` line. The
   * text streamed so far is the child's last said text (an interrupted child's summary).
   */
  appendStream(kind: 'text' | 'thinking', delta: string): void {
    if (this.#block !== kind) {
      this.#closeBlock();
      this.#transcript.append(`[${kind}] `);
      this.#block = kind;
      if (kind === 'text') {
        this.#lastText = '';
        this.#textFrom = this.#transcript.offset;
      }
    }
    this.#transcript.append(delta);
  }

  #closeBlock(): void {
    if (this.#block === null) return;
    if (this.#textFrom !== null) {
      // The block ends: keep its text (at most the window) before later lines push it out.
      this.#lastText = this.#transcript.read(this.#textFrom).text;
      this.#textFrom = null;
    }
    this.#block = null;
    this.#transcript.append('\n');
  }

  /**
   * An event payload about this child: its identity (with its model and tool count), then `extra`,
   * then `src`. One literal with the spread in the middle: a spread copy that then gains keys is
   * far slower on V8, and every event pays it (docs/benchmarks.md).
   */
  eventPayload(extra?: Record<string, unknown>): Record<string, unknown> {
    return {
      subagent_id: this.subagent_id,
      parent_id: this.parent_id,
      depth: this.depth,
      delegation_id: this.delegation_id,
      task_index: this.task_index,
      task_count: this.task_count,
      goal: this.goal,
      model: this.model,
      tool_count: this.#toolCount,
      ...extra,
      src: this.subagent_id,
    };
  }
}

function noop(): void {}

const NO_TOOLS: readonly ToolTraceItem[] = Object.freeze([]);
const NO_CHILDREN: ReadonlySet<ChildRecord> = new Set();
