// The registry's record of one child: identity, owner binding, live counters, its steer inbox,
// transcript and abort controller. Mutable state lives here; the outside world only ever sees
// snapshots (snapshot.ts), which are an allow-list of these fields.
import { SteerInbox } from './steering.ts';
import { Transcript } from './transcript.ts';
import type { ChildStatus, CompletionEntry, Owner, Runner, Steer, ToolTraceItem } from '../types.ts';

/** Why a child's signal was aborted. */
export type StopReason = 'interrupt' | 'timeout';

export interface ChildIdentity {
  readonly subagent_id: string;
  readonly parent_id: string | null;
  readonly depth: number;
  readonly delegation_id: string;
  readonly task_index: number;
  readonly task_count: number;
  readonly goal: string;
}

/** Told when a child is stopped, before any other hook and before its signal aborts. */
export interface StopListener {
  childStopped(): void;
}

/** Told of each child's entry as it is settled (a delegation collecting its results). */
export interface SettleListener {
  childSettled(record: ChildRecord, entry: CompletionEntry): void;
}

export interface ChildInit extends ChildIdentity {
  readonly context: string | undefined;
  readonly runner: Runner;
  readonly owner: Owner | undefined;
  readonly parent: ChildRecord | null;
  readonly timeout_ms: number | undefined;
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
  /** Private: authority binding. Never copied into a snapshot, entry or event. */
  readonly owner: Owner | undefined;
  readonly parent: ChildRecord | null;
  readonly timeout_ms: number | undefined;

  // The lifecycle's state: read through getters, changed only by the intent methods below
  // (start, said, toolStarted / toolFinished, finish, settle), so one place says what each
  // step of a child does to its record.
  #status: ChildStatus = 'queued';
  #startedAt: number | null = null;
  #finishedAt: number | null = null;
  #toolCount = 0;
  #lastTool = '';
  /** The runner's steer veto (its onSteer), called as a steer is queued; gone once settled. */
  #steerVeto: ((steer: Steer) => void) | undefined;
  #lastText = '';
  /**
   * Where the open streamed text block begins in the transcript (an absolute offset), or null
   * when none is open. While a block is open its text is read back from the transcript rather
   * than kept a second time: accumulating every delta here made a child that streams 100 MiB hold
   * 100 MiB, whatever the tail window (bench/cases/tail-memory.ts).
   */
  #textFrom: number | null = null;

  /**
   * Last assistant text: an interrupted child's summary when its runner gives none. A streamed
   * answer counts as far as the transcript's tail window still holds it (its last 16 KiB).
   */
  get last_text(): string {
    return this.#textFrom === null ? this.#lastText : this.transcript.read(this.#textFrom).text;
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

  get steerVeto(): ((steer: Steer) => void) | undefined {
    return this.#steerVeto;
  }

  #toolTrace: Array<{ tool: string; status: ToolTraceItem['status'] }> | undefined;
  /** Tools the child ran, in order (made on the first one). */
  get tool_trace(): readonly ToolTraceItem[] {
    return this.#toolTrace ?? NO_TOOLS;
  }

  /** The runner's steer veto, set once by the lifecycle when the child is registered. */
  setSteerVeto(veto: ((steer: Steer) => void) | undefined): void {
    this.#steerVeto = veto;
  }

  /** Queued -> running, at `now` (epoch ms). */
  start(now: number): void {
    this.#status = 'running';
    this.#startedAt = now;
    this.appendLine(`[start] ${this.goal}`);
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

  /** The entry is decided: the final status, at `now`, and the transcript's last line. */
  finish(entry: CompletionEntry, now: number): void {
    this.#status = entry.status;
    this.#finishedAt = now;
    this.appendLine(`[${entry.status}] ${entry.status === 'completed' ? entry.summary : (entry.error ?? '')}`);
  }
  readonly inbox = new SteerInbox();
  readonly transcript = new Transcript();
  /** Made on first use: a runner that never looks at its signal costs no controller. */
  #abort: AbortController | undefined;
  #stopReason: StopReason | undefined;
  /** Why the child was stopped (once; undefined if it never was). */
  get stopReason(): StopReason | undefined {
    return this.#stopReason;
  }
  /**
   * The runtime's own reactions to a stop. Plain callbacks, not 'abort' listeners: on Node 20 an
   * addEventListener on an AbortSignal costs about 8 µs, and a child took three of them
   * (bench/cases/delegation.ts).
   */
  #stopHooks: Array<() => void> | undefined;
  /** The runtime's own lifecycle for this child, told first on a stop (no closure per child). */
  #lifecycle: StopListener | undefined;
  #liveChildren: Set<ChildRecord> | undefined;
  /** Live (not yet completed) children of this child; most children spawn none. */
  get liveChildren(): ReadonlySet<ChildRecord> {
    return this.#liveChildren ?? NO_CHILDREN;
  }
  addLiveChild(child: ChildRecord): void {
    (this.#liveChildren ??= new Set()).add(child);
  }
  removeLiveChild(child: ChildRecord): void {
    this.#liveChildren?.delete(child);
  }
  #entry: CompletionEntry | undefined;
  /** Its completion entry, once settled. */
  get entry(): CompletionEntry | undefined {
    return this.#entry;
  }
  /** Made on first use (see `done`). */
  #done: Promise<CompletionEntry> | undefined;
  #resolveDone: ((entry: CompletionEntry) => void) | undefined;
  #batch: SettleListener | undefined;

  constructor(init: ChildInit) {
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
    this.#batch = init.batch;
  }

  /**
   * Resolves with the completion entry. Made on first use (p-queue holds a child's slot on it once
   * the child starts): the delegation's results are collected through its batch, not through one
   * promise per child.
   */
  get done(): Promise<CompletionEntry> {
    if (this.#done === undefined) {
      const entry = this.entry;
      this.#done = entry ? Promise.resolve(entry) : new Promise((resolve) => (this.#resolveDone = resolve));
    }
    return this.#done;
  }

  #block: 'text' | 'thinking' | null = null;

  /** Appends one whole transcript line, closing a streamed block first. */
  appendLine(line: string): void {
    this.#closeBlock();
    this.transcript.append(line);
    // A byte, not `${line}\n`: the concatenation would be flattened (copied) once more to encode.
    if (!line.endsWith('\n')) this.transcript.appendNewline();
  }

  /**
   * Appends a streamed delta: consecutive deltas of one kind share one `[text] ...` line. The
   * text streamed so far is the child's last said text (an interrupted child's summary).
   */
  appendStream(kind: 'text' | 'thinking', delta: string): void {
    if (this.#block !== kind) {
      this.#closeBlock();
      this.transcript.append(`[${kind}] `);
      this.#block = kind;
      if (kind === 'text') {
        this.#lastText = '';
        this.#textFrom = this.transcript.offset;
      }
    }
    this.transcript.append(delta);
  }

  #closeBlock(): void {
    if (this.#block === null) return;
    if (this.#textFrom !== null) {
      // The block ends: keep its text (at most the window) before later lines push it out.
      this.#lastText = this.transcript.read(this.#textFrom).text;
      this.#textFrom = null;
    }
    this.#block = null;
    this.transcript.append('\n');
  }

  /**
   * An event payload about this child: its identity (with its model and tool count), then `extra`,
   * then `src`. Written as one literal with the spread in the middle on purpose: on Node 20 (V8
   * 11.3) a spread copy that then
   * gains keys (`{ ...identity, ...extra, src }`) costs about 6 µs per object against 0.1 µs
   * for this form (bench/cases/registry.ts and fanout.ts measure it), and every event pays it.
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
      tool_count: this.tool_count,
      ...extra,
      src: this.subagent_id,
    };
  }

  /**
   * The runner's signal (ctx.signal), aborted with the stop reason. The runtime itself never
   * listens on it (see onStop()); one asked for after the stop comes already aborted.
   */
  get signal(): AbortSignal {
    if (this.#abort === undefined) {
      this.#abort = new AbortController();
      if (this.stopReason !== undefined) this.#abort.abort(this.stopReason);
    }
    return this.#abort.signal;
  }

  get stopped(): boolean {
    return this.stopReason !== undefined;
  }

  get accepting_steer(): boolean {
    return this.inbox.accepting;
  }

  get finished(): boolean {
    return this.entry !== undefined;
  }

  /**
   * Aborts the child's signal once; false if it was already stopped, has finished, or is finishing
   * (its inbox is sealed: the outcome is decided, so a late stop would be reported as an interrupt
   * that never happened).
   */
  stop(reason: StopReason): boolean {
    if (this.stopReason !== undefined || this.entry !== undefined || !this.inbox.accepting) return false;
    this.#stopReason = reason;
    this.#lifecycle?.childStopped();
    const hooks = this.#stopHooks;
    this.#stopHooks = undefined;
    if (hooks) for (const hook of hooks) hook();
    this.#abort?.abort(reason);
    return true;
  }

  /** Sets the lifecycle told of this child's stop (once, by the runtime). */
  setLifecycle(lifecycle: StopListener): void {
    this.#lifecycle = lifecycle;
  }

  /**
   * Runs `hook` once when the child is stopped (before its signal aborts); at once if it already
   * was. Returns a function that cancels the hook.
   */
  onStop(hook: () => void): () => void {
    if (this.stopReason !== undefined) {
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

  settle(entry: CompletionEntry): void {
    this.#entry = entry;
    this.#resolveDone?.(entry);
    this.#resolveDone = undefined;
    this.#batch?.childSettled(this, entry);
    // A retained record keeps neither its lifecycle (context, timers) nor its siblings' entries.
    this.#batch = undefined;
    this.#lifecycle = undefined;
    this.#steerVeto = undefined;
  }
}

function noop(): void {}

const NO_TOOLS: readonly ToolTraceItem[] = Object.freeze([]);
const NO_CHILDREN: ReadonlySet<ChildRecord> = new Set();
