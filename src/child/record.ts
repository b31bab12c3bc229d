// The registry's record of one child: identity, owner binding, live counters, its steer inbox,
// transcript and abort controller. Mutable state lives here; the outside world only ever sees
// snapshots (snapshot.ts), which are an allow-list of these fields.
import { SteerInbox } from './steering.ts';
import { Transcript } from './transcript.ts';
import type { ChildStatus, CompletionEntry, Owner, Runner, Steer, ToolTraceItem } from '../delegation/types.ts';

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
  /**
   * The registry's own links (its per-owner list and the runner's steer veto); nothing else
   * reads or writes them.
   */
  ownerSlot: object | undefined;
  ownerPrev: ChildRecord | undefined;
  ownerNext: ChildRecord | undefined;
  steerHook: ((steer: Steer) => void) | undefined;
  /** Private: authority binding. Never copied into a snapshot, entry or event. */
  readonly owner: Owner | undefined;
  readonly parent: ChildRecord | null;
  readonly timeout_ms: number | undefined;

  status: ChildStatus = 'queued';
  started_at: number | null = null;
  finished_at: number | null = null;
  tool_count = 0;
  last_tool = '';
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

  set last_text(text: string) {
    this.#lastText = text;
    this.#textFrom = null;
  }
  #toolTrace: ToolTraceItem[] | undefined;
  /** Tools the child ran, in order (made on the first one). */
  get tool_trace(): readonly ToolTraceItem[] {
    return this.#toolTrace ?? NO_TOOLS;
  }
  addTool(item: ToolTraceItem): void {
    (this.#toolTrace ??= []).push(item);
  }
  readonly inbox = new SteerInbox();
  readonly transcript = new Transcript();
  /** Made on first use: a runner that never looks at its signal costs no controller. */
  #abort: AbortController | undefined;
  stopReason: StopReason | undefined;
  /**
   * The runtime's own reactions to a stop. Plain callbacks, not 'abort' listeners: on Node 20 an
   * addEventListener on an AbortSignal costs about 8 µs, and a child took three of them
   * (bench/cases/delegation.ts).
   */
  #stopHooks: Array<() => void> | (() => void) | undefined;
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
  entry: CompletionEntry | undefined;
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
   * An event payload about this child: its identity, then `extra`, then `src`. Written as one
   * literal with the spread in the middle on purpose: on Node 20 (V8 11.3) a spread copy that then
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
    this.stopReason = reason;
    this.#lifecycle?.childStopped();
    const hooks = this.#stopHooks;
    this.#stopHooks = undefined;
    if (typeof hooks === 'function') hooks();
    else if (hooks) for (const hook of hooks) hook();
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
    // One hook (the common case) is kept as is; an array only from the second.
    const hooks = this.#stopHooks;
    if (hooks === undefined) this.#stopHooks = hook;
    else if (typeof hooks === 'function') this.#stopHooks = [hooks, hook];
    else hooks.push(hook);
    return () => {
      const now = this.#stopHooks;
      if (now === hook) this.#stopHooks = undefined;
      else if (Array.isArray(now)) {
        const i = now.indexOf(hook);
        if (i >= 0) now.splice(i, 1);
      }
    };
  }

  settle(entry: CompletionEntry): void {
    this.entry = entry;
    this.#resolveDone?.(entry);
    this.#resolveDone = undefined;
    this.#batch?.childSettled(this, entry);
    // A retained record keeps neither its lifecycle (context, timers) nor its siblings' entries.
    this.#batch = undefined;
    this.#lifecycle = undefined;
  }
}

function noop(): void {}

const NO_TOOLS: readonly ToolTraceItem[] = Object.freeze([]);
const NO_CHILDREN: ReadonlySet<ChildRecord> = new Set();
