// Runs one child from queued to its completion entry: builds its context, awaits the runner,
// maps throw/abort/timeout to a status, seals the steer inbox and publishes exactly one entry.
// The order at the end is the steer promise: seal (stop accepting + take leftovers, one
// synchronous step) -> wait for descendants' entries -> the entry and its event.
import { sleep } from '../clock.ts';
import { ErrorCode, SubrunError } from '../errors.ts';
import type { ChildRecord } from '../registry/record.ts';
import { stopDescendants } from '../registry/registry.ts';
import { toSnapshot, type Snapshot } from '../registry/snapshot.ts';
import { buildCompletionEntry } from './completion.ts';
import type { Core } from './core.ts';
import type { FinalStatus, RunOutcome, RunnerContext, Steer, ToolCall } from './types.ts';

const PREVIEW_CHARS = 200;

type Settled =
  | { readonly kind: 'returned'; readonly outcome: RunOutcome }
  | { readonly kind: 'threw'; readonly error: unknown }
  | { readonly kind: 'abandoned' };

export interface LiveContext {
  readonly ctx: RunnerContext;
  /**
   * Aborted only when the child is stopped while still queued, to take it out of its p-queue.
   * (The child's own signal is not given to p-queue: p-queue would free the slot the moment a
   * running child is interrupted, before the child has actually stopped.)
   */
  readonly dequeue: AbortSignal;
  /** Makes the context inert: nothing the runner does afterwards reaches the child. */
  close(): void;
}

/** Registers a new child's hooks; a child stopped while still queued completes at once. */
export function prepareChild(core: Core, record: ChildRecord): LiveContext {
  const dequeue = new AbortController();
  const live = makeContext(core, record, dequeue.signal);
  const hook = record.runner.onSteer;
  core.registry.add(record, hook ? (steer) => hook.call(record.runner, steer, live.ctx) : undefined);
  record.parent?.liveChildren.add(record);
  record.abort.signal.addEventListener(
    'abort',
    () => {
      if (record.status === 'queued' && !record.finished) {
        finishUnstarted(core, record, live);
        dequeue.abort(record.stopReason);
      }
    },
    { once: true },
  );
  return live;
}

export async function runChild(core: Core, record: ChildRecord, live: LiveContext): Promise<void> {
  if (record.finished || record.status !== 'queued') return;
  const { clock } = core;
  record.status = 'running';
  record.started_at = clock.now();
  record.appendLine(`[start] ${record.goal}`);
  core.emit('subagent.start', record.eventPayload(), record.owner);

  let timer: unknown;
  if (record.timeout_ms !== undefined) timer = clock.setTimeout(() => record.stop('timeout'), record.timeout_ms);
  const settled = await settleOrAbandon(core, record, live.ctx);
  if (timer !== undefined) clock.clearTimeout(timer);

  // --- the atomic close: nothing may await between these two lines ---
  const leftovers = record.inbox.seal();
  live.close();
  await finish(core, record, settled, leftovers);
}

function finishUnstarted(core: Core, record: ChildRecord, live: LiveContext): void {
  const leftovers = record.inbox.seal();
  live.close();
  const entry = buildCompletionEntry({
    task_index: record.task_index,
    subagent_id: record.subagent_id,
    status: record.stopReason === 'timeout' ? 'timeout' : 'interrupted',
    error: 'interrupted before it started',
    duration_seconds: 0,
    model: record.model,
    missed: leftovers.map((s) => s.text),
  });
  publishEntry(core, record, entry);
}

async function finish(core: Core, record: ChildRecord, settled: Settled, leftovers: Steer[]): Promise<void> {
  const missed = mergePending(core, record, settled, leftovers);
  const { status, error, summary, exit_reason } = decide(record, settled);
  // No orphans: a child that ends stops whatever it spawned and did not wait for, and its entry
  // comes after every descendant's (post-order).
  if (record.liveChildren.size > 0) {
    stopDescendants(record);
    await Promise.all([...record.liveChildren].map((c) => c.done));
  }
  await core.checkpoint('complete', record.subagent_id);
  const outcome = settled.kind === 'returned' ? settled.outcome : undefined;
  const entry = buildCompletionEntry({
    task_index: record.task_index,
    subagent_id: record.subagent_id,
    status,
    exit_reason,
    summary,
    error,
    api_calls: outcome?.api_calls,
    tokens: outcome?.tokens,
    duration_seconds: (core.clock.now() - (record.started_at ?? core.clock.now())) / 1000,
    model: record.model,
    tool_trace: record.tool_trace,
    missed: missed.map((s) => s.text),
  });
  publishEntry(core, record, entry);
}

function publishEntry(core: Core, record: ChildRecord, entry: ReturnType<typeof buildCompletionEntry>): void {
  record.status = entry.status;
  record.finished_at = core.clock.now();
  record.appendLine(`[${entry.status}] ${entry.status === 'completed' ? entry.summary : (entry.error ?? '')}`);
  record.parent?.liveChildren.delete(record);
  core.registry.retire(record);
  core.releaseQueue(record.subagent_id);
  record.settle(entry);
  core.emit('subagent.complete', record.eventPayload({ entry }), record.owner);
}

/** Status matrix: an abort decides first (interrupt/timeout), then a throw, then the report. */
function decide(
  record: ChildRecord,
  settled: Settled,
): { status: FinalStatus; error?: string; summary: string; exit_reason?: string } {
  const outcome = settled.kind === 'returned' ? settled.outcome : undefined;
  const summary = outcome?.summary ?? record.last_text;
  if (record.stopReason === 'interrupt') return { status: 'interrupted', summary: outcome?.summary || record.last_text };
  if (record.stopReason === 'timeout') {
    return { status: 'timeout', summary: outcome?.summary || record.last_text, error: `timed out after ${record.timeout_ms} ms` };
  }
  if (settled.kind === 'threw') return { status: 'error', summary: record.last_text, error: describe(settled.error) };
  if (settled.kind === 'abandoned' || !outcome) return { status: 'error', summary, error: 'runner did not return' };
  if (outcome.status === 'failed') {
    return { status: 'failed', summary, error: outcome.error || 'the subagent failed', exit_reason: outcome.exit_reason };
  }
  if (outcome.status === 'interrupted') {
    // The runner stopped on its own without an abort: report it as a failure, never as success.
    return { status: 'failed', summary, error: outcome.error || 'the runner stopped without being interrupted' };
  }
  return { status: 'completed', summary, exit_reason: outcome.exit_reason };
}

/**
 * The runner's pending_steer joins the sealed leftovers. The inbox already tracks every taken but
 * unconfirmed steer, so this only checks the runner's claim: a steer it hands back that the inbox
 * saw delivered is not listed twice.
 */
function mergePending(core: Core, record: ChildRecord, settled: Settled, leftovers: Steer[]): Steer[] {
  const pending = settled.kind === 'returned' ? (settled.outcome.pending_steer ?? []) : [];
  if (pending.length === 0) return leftovers;
  const known = new Set(leftovers.map((s) => s.steer_id));
  const unknown = pending.filter((s) => !known.has(s.steer_id));
  if (unknown.length > 0) {
    core.logger.warn({ subagent_id: record.subagent_id, count: unknown.length }, 'runner handed back steers it had delivered or never took; ignored');
  }
  return leftovers;
}

async function settleOrAbandon(core: Core, record: ChildRecord, ctx: RunnerContext): Promise<Settled> {
  let running: Promise<RunOutcome>;
  try {
    running = record.runner.run(ctx);
  } catch (error) {
    return { kind: 'threw', error };
  }
  const ran = Promise.resolve(running).then(
    (outcome): Settled => (isOutcome(outcome) ? { kind: 'returned', outcome } : { kind: 'threw', error: new Error('runner returned an invalid outcome') }),
    (error: unknown): Settled => ({ kind: 'threw', error }),
  );
  // A runner that ignores its signal is abandoned after the grace period; its late effects hit
  // a closed context.
  let timer: unknown;
  let onAbort: (() => void) | undefined;
  const abandoned = new Promise<Settled>((resolve) => {
    onAbort = () => {
      timer = core.clock.setTimeout(() => resolve({ kind: 'abandoned' }), core.limits.interrupt_grace_ms);
    };
    if (record.abort.signal.aborted) onAbort();
    else record.abort.signal.addEventListener('abort', onAbort, { once: true });
  });
  const settled = await Promise.race([ran, abandoned]);
  if (onAbort) record.abort.signal.removeEventListener('abort', onAbort);
  if (timer !== undefined) core.clock.clearTimeout(timer);
  return settled;
}

function isOutcome(value: unknown): value is RunOutcome {
  if (typeof value !== 'object' || value === null) return false;
  const status = (value as { status?: unknown }).status;
  return status === 'completed' || status === 'failed' || status === 'interrupted';
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

function preview(value: unknown): string {
  if (value === undefined) return '';
  let s: string;
  try {
    s = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  } catch {
    s = String(value);
  }
  return s.length > PREVIEW_CHARS ? `${s.slice(0, PREVIEW_CHARS - 1)}…` : s;
}

/** True if `ancestor` is above `r` in the spawn tree. */
export function isDescendant(r: ChildRecord, ancestor: ChildRecord): boolean {
  for (let p = r.parent; p; p = p.parent) if (p === ancestor) return true;
  return false;
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

/** Publishes `topic` about `record`, with the child's identity in front of `extra`. */
function emitAbout(core: Core, record: ChildRecord, topic: string, extra: Record<string, unknown>): void {
  core.emit(topic, record.eventPayload(extra), record.owner);
}

/** Transcript line and `subagent.steer.delivered` for each steer (the context is open). */
function markDelivered(core: Core, record: ChildRecord, steers: readonly Steer[]): void {
  for (const s of steers) {
    record.appendLine(`[steer] ${s.text}`);
    emitAbout(core, record, 'subagent.steer.delivered', { steer_id: s.steer_id, text: s.text });
  }
}

// Every function of the context is a method (or a module-level function), never an arrow held in
// a variable or a property: tsx compiles with esbuild's keepNames, which wraps each such arrow in
// `__name()`, an Object.defineProperty on every closure made. Per child that was 14 of them,
// about 0.7 µs and 300 bytes each (bench/cases/delegation.ts and tail-memory.ts).
function makeContext(core: Core, record: ChildRecord, dequeue: AbortSignal): LiveContext {
  let open = true;
  const spawned: string[] = [];
  const signal = record.abort.signal;
  const id = record.subagent_id;
  const ctx: RunnerContext = {
    subagent_id: id,
    parent_id: record.parent_id,
    depth: record.depth,
    goal: record.goal,
    context: record.context,
    can_delegate: record.depth + 1 < core.limits.max_spawn_depth,
    max_batch: core.limits.max_concurrent_children,
    signal,
    now() {
      return core.clock.now();
    },
    sleep(ms, cancel) {
      return sleep(core.clock, ms, signal, cancel);
    },
    checkpoint(label) {
      return core.checkpoint(label, id);
    },
    write(line) {
      if (open) record.appendLine(line);
    },
    thinking(text) {
      if (!open) return;
      record.appendLine(`[thinking] ${text}`);
      emitAbout(core, record, 'subagent.thinking', { text });
    },
    textDelta(delta) {
      if (!open || delta === '') return;
      record.appendStream('text', delta);
      emitAbout(core, record, 'subagent.text', { text: delta });
    },
    thinkingDelta(delta) {
      if (!open || delta === '') return;
      record.appendStream('thinking', delta);
      emitAbout(core, record, 'subagent.thinking', { text: delta });
    },
    text(text) {
      if (!open) return;
      record.last_text = text;
      record.appendLine(`[text] ${text}`);
      emitAbout(core, record, 'subagent.text', { text });
    },
    startTool(name, args): ToolCall {
      if (!open) return { finish() {} };
      record.tool_count += 1;
      record.last_tool = name;
      const item: { tool: string; status: 'ok' | 'error' | 'running' } = { tool: name, status: 'running' };
      record.tool_trace.push(item);
      const shown = preview(args);
      record.appendLine(`[tool] ${name}${shown ? ` ${shown}` : ''}`);
      emitAbout(core, record, 'subagent.tool', { tool_name: name, preview: shown, tool_count: record.tool_count });
      let ended = false;
      return {
        finish(result, ok = true) {
          if (ended || !open) return;
          ended = true;
          item.status = ok ? 'ok' : 'error';
          record.appendLine(`[result] ${ok ? '' : 'error: '}${preview(result ?? '')}`);
        },
      };
    },
    deliverSteers() {
      if (!open) return [];
      const taken = record.inbox.take();
      const delivered = record.inbox.confirm(taken);
      markDelivered(core, record, delivered);
      return delivered;
    },
    takeSteers() {
      return open ? record.inbox.take() : [];
    },
    confirmDelivered(steers) {
      if (!open) return;
      markDelivered(core, record, record.inbox.confirm(steers));
    },
    steerArrived(cancel) {
      return record.inbox.waitForSteer(signal, cancel);
    },
    delegate(tasks, options = {}) {
      // Inert like everything else once the child finished: a late spawn would put an orphan
      // (and its events) after this child's entry.
      if (!open) throw new SubrunError(ErrorCode.RuntimeClosed, `subagent ${id} has finished; it can no longer delegate`);
      const handle = core.spawn(record, tasks, options, record.owner);
      spawned.push(...handle.subagent_ids);
      return handle;
    },
    subtree: {
      list() {
        return subtreeSnapshots(core, spawned);
      },
      steer(target, text) {
        const r = core.registry.get(target);
        if (r && isDescendant(r, record)) return core.registry.steer(target, text);
        return { status: 'rejected', subagent_id: target, text: typeof text === 'string' ? text.trim() : '', reason: 'not_found' };
      },
      interrupt(target) {
        const r = core.registry.get(target);
        return r && isDescendant(r, record) ? core.registry.interrupt(target) : { found: false, subagent_id: target, interrupted: [] };
      },
    },
  };
  return {
    ctx,
    dequeue,
    close() {
      open = false;
    },
  };
}
