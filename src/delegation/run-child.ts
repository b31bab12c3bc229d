// Runs one child from queued to its one completion entry. The order at the end is the steer
// promise: seal (stop accepting + take leftovers, one synchronous step) -> descendants -> the entry.
import { ChildRecord, type ChildInit, type ChildLifecycle } from '../child/record.ts';
import { stopDescendants } from '../registry/registry.ts';
import { buildCompletionEntry } from './completion.ts';
import { ChildContext } from './child-context.ts';
import type { ChildQueue, QueuedChild } from './child-queue.ts';
import type { Core } from './core.ts';
import { RunnerLostError, type CompletionEntry, type FinalStatus, type MissedSteer, type RunOutcome, type Steer } from '../types.ts';
import { withProps } from '../shapes.ts';

type Settled =
  { readonly kind: 'returned'; readonly outcome: RunOutcome } | { readonly kind: 'threw'; readonly error: unknown } | { readonly kind: 'abandoned' };

/**
 * One child between spawn and entry: its record, its context, its timers and the lifecycle as
 * methods (one object per child, not a closure per step: docs/benchmarks.md).
 */
export class LiveChild implements ChildLifecycle, QueuedChild {
  readonly record: ChildRecord;
  readonly ctx: ChildContext;
  readonly steerVeto: ((steer: Steer) => void) | undefined;
  /** The line it waits in (set when it is added). */
  queue: ChildQueue | undefined;
  readonly #core: Core;
  #timeout: unknown;
  #grace: unknown;
  /** Rebuilt after a restart while it still runs elsewhere: resumed, not started (ChildBirth.adopted). */
  readonly #adopted: ChildInit['adopted'];

  /** Makes and registers the child's record; one stopped while still queued completes at once. */
  constructor(core: Core, init: ChildInit) {
    this.#core = core;
    this.#adopted = init.adopted;
    const runner = init.runner;
    // Called through `hook.call(runner, ...)`: the runner stays its `this`.
    // eslint-disable-next-line @typescript-eslint/unbound-method
    const hook = runner.onSteer;
    this.steerVeto = hook ? (steer) => hook.call(runner, steer, this.ctx) : undefined;
    // An adopted child was made before the restart: no later than its start.
    const now = core.clock.now();
    const record = (this.record = new ChildRecord(init, this, init.adopted ? Math.min(now, init.adopted.started_at) : now));
    this.ctx = new ChildContext(core, record);
    core.registry.add(record);
    record.parent?.addLiveChild(record);
    // An adopted child is in the journal already, as it was.
    if (init.adopted === undefined)
      core.journal?.spawned({
        subagent_id: record.subagent_id,
        parent_id: record.parent_id,
        depth: record.depth,
        delegation_id: record.delegation_id,
        task_index: record.task_index,
        task_count: record.task_count,
        goal: record.goal,
        context: record.context,
        agent: record.agent,
        model: record.model,
        owner: record.owner,
        timeout_ms: record.timeout_ms,
        revived_from: record.revived_from,
      });
  }

  /**
   * What p-queue runs: starts the child and holds the slot until its entry is out, whether the
   * runner returned or was abandoned (a runner that never settles must not keep its slot). Never
   * rejects. A child stopped while queued returns at once (see child-queue.ts).
   */
  holdSlot(): Promise<unknown> {
    void this.#run();
    return this.record.done;
  }

  /** Runs a queued child to its entry. Never rejects: what it cannot handle is logged. */
  async #run(): Promise<void> {
    const core = this.#core;
    const record = this.record;
    try {
      if (record.finished || record.status !== 'queued') return;
      // A runner that runs its child elsewhere first finds it a place (a remote worker); the child
      // stays `queued` meanwhile, and one stopped while waiting was finished by childStopped().
      const placing = record.runner.place?.(this.ctx);
      if (placing) {
        await placing;
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- childStopped() may finish the child while it is being placed
        if (record.finished || record.status !== 'queued') return;
      }
      if (this.#adopted) record.resume(this.#adopted.started_at, this.#adopted.tail);
      else {
        record.start(core.clock.now());
        core.journal?.started(record.subagent_id, core.clock.now());
        // Progress saved while it was placed (where a remote child runs) is written with its start,
        // not a checkpoint later: a restart that finds it running finds where, too.
        if (record.progress !== undefined) core.journal?.progress(record.subagent_id, record.readTail().text, record.progress);
        core.emitAbout('subagent.start', record);
        core.observer.started(record);
      }
      if (record.timeout_ms !== undefined) this.#timeout = core.clock.setTimeout(() => record.stop('timeout'), record.timeout_ms);

      let settled: Settled;
      try {
        const outcome: unknown = await record.runner.run(this.ctx);
        settled = isOutcome(outcome) ? { kind: 'returned', outcome } : { kind: 'threw', error: new Error('runner returned an invalid outcome') };
      } catch (error) {
        settled = { kind: 'threw', error };
      }
      // Abandoned meanwhile (it ignored a stop for the grace period): that path sealed the child
      // and publishes its entry (after any descendants), so nothing is left to do here.
      if (!record.accepting_steer) return;
      const later = this.#finish(settled);
      if (later) await later;
    } catch (err) {
      // A fault of the runtime itself (a runner's throw is an outcome, handled above).
      core.logger.error({ err, subagent_id: record.subagent_id }, 'child run failed');
      this.#settleAfterFault(err);
    }
  }

  /**
   * After a fault of the runtime itself (a clock, logger or test seam that threw): the child still
   * gets its one entry, as `error`, so its slot, its delegation's results and its parent are not
   * held forever. Steers still in the inbox come back as missed; if the fault came after the seal,
   * the seal already took them.
   */
  #settleAfterFault(err: unknown): void {
    const core = this.#core;
    const record = this.record;
    if (record.finished) return;
    const entry = buildCompletionEntry({
      task_index: record.task_index,
      subagent_id: record.subagent_id,
      status: 'error',
      error: `internal error: ${describe(err)}`,
      duration_seconds: 0,
      model: record.model,
      ...missedOf(record.sealInbox()),
    });
    ChildContext.close(this.ctx);
    try {
      publishEntry(core, record, entry);
    } catch {
      // Publishing is what failed: at least settle the child.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- publishEntry may have settled it before it threw
      if (!record.finished) record.settle(entry);
    }
  }

  /** Called by the record on a stop (interrupt, timeout, an ancestor's stop). */
  childStopped(): void {
    const core = this.#core;
    const record = this.record;
    if (record.status === 'queued') {
      if (record.finished) return;
      finishUnstarted(core, record, this.ctx, this.#adopted !== undefined);
      this.queue?.dropped();
      // Adopted, it still runs elsewhere, and no run here will stop it: what it holds there goes.
      if (this.#adopted) record.runner.abandon?.(record.subagent_id);
      return;
    }
    // A runner that ignores its signal is abandoned after the grace period; its late effects hit
    // a closed context and its late return is ignored.
    this.#grace = core.clock.setTimeout(() => this.#abandon(), core.limits.interrupt_grace_ms);
  }

  #abandon(): void {
    const core = this.#core;
    const record = this.record;
    if (!record.accepting_steer) return;
    const failed = (err: unknown) => core.logger.error({ err, subagent_id: record.subagent_id }, 'child run failed');
    try {
      this.#finish({ kind: 'abandoned' })?.catch(failed);
      // What the run holds elsewhere (a remote worker's slot) goes with it.
      record.runner.abandon?.(record.subagent_id);
    } catch (err) {
      failed(err);
    }
  }

  /**
   * Seals, decides and publishes the entry. Synchronous unless there are descendants to wait for
   * or a test seam to pass: no async frame per child for the common case.
   */
  #finish(settled: Settled): Promise<void> | undefined {
    const core = this.#core;
    const record = this.record;
    // --- the atomic close: nothing may await between these two lines ---
    // What it hands back is all of missed_steer: the inbox itself tracks what was taken, not confirmed.
    const missed = record.sealInbox();
    ChildContext.close(this.ctx);

    if (this.#timeout !== undefined) core.clock.clearTimeout(this.#timeout);
    if (this.#grace !== undefined) core.clock.clearTimeout(this.#grace);
    const decided = decide(record, settled);
    if (record.liveChildren.size > 0) return this.#publishLater(settled, decided, missed);
    // Only a test's scheduler may wait here; without one the entry follows the seal in this turn.
    const seam = core.checkpoint?.('complete', record.subagent_id);
    if (seam) return seam.then(() => publishEntry(core, record, finalEntry(core, record, settled, decided, missed)));
    publishEntry(core, record, finalEntry(core, record, settled, decided, missed));
    return undefined;
  }

  /**
   * No orphans: a child that ends stops whatever it spawned and did not wait for, and its entry
   * comes after every descendant's (post-order).
   */
  async #publishLater(settled: Settled, decided: Decision, missed: readonly Steer[]): Promise<void> {
    const core = this.#core;
    const record = this.record;
    stopDescendants(record);
    await Promise.all([...record.liveChildren].map((c) => c.done));
    const seam = core.checkpoint?.('complete', record.subagent_id);
    if (seam) await seam;
    publishEntry(core, record, finalEntry(core, record, settled, decided, missed));
  }
}

function finishUnstarted(core: Core, record: ChildRecord, ctx: ChildContext, adopted = false): void {
  const leftovers = record.sealInbox();
  ChildContext.close(ctx);
  const entry = buildCompletionEntry({
    task_index: record.task_index,
    subagent_id: record.subagent_id,
    status: record.stopReason === 'timeout' ? 'timeout' : 'interrupted',
    // An adopted child ran before the restart (elsewhere); this process had not resumed it yet.
    error: adopted ? 'interrupted before it was resumed after a restart' : 'interrupted before it started',
    duration_seconds: 0,
    model: record.model,
    // Taken only by an adopted child (receipts its worker holds): they may yet reach its model.
    ...missedOf(leftovers, record.takenSteerIds()),
  });
  publishEntry(core, record, entry);
}

/** The entry's missed_steer texts and their detail; `maybe` names steers a lost runner may have delivered. */
function missedOf(steers: readonly Steer[], maybe?: ReadonlySet<string>): { missed: string[] | undefined; missed_detail: MissedSteer[] | undefined } {
  // Most children miss nothing: no arrays made for them (an entry treats none and empty alike).
  if (steers.length === 0) return NOTHING_MISSED;
  return {
    missed: steers.map((s) => s.text),
    missed_detail: steers.map((s) => {
      const detail = { steer_id: s.steer_id, text: s.text, maybe_delivered: maybe?.has(s.steer_id) ?? false };
      return s.requeued_from === undefined ? detail : withProps(detail, { requeued_from: s.requeued_from });
    }),
  };
}

const NOTHING_MISSED = { missed: undefined, missed_detail: undefined };

function finalEntry(core: Core, record: ChildRecord, settled: Settled, decided: Decision, missed: readonly Steer[]): CompletionEntry {
  const outcome = settled.kind === 'returned' ? settled.outcome : undefined;
  const m = missedOf(missed, mayHaveDelivered(record, settled));
  return buildCompletionEntry({
    task_index: record.task_index,
    subagent_id: record.subagent_id,
    status: decided.status,
    exit_reason: decided.exit_reason,
    summary: decided.summary,
    error: decided.error,
    api_calls: outcome?.api_calls,
    tokens: outcome?.tokens,
    duration_seconds: (core.clock.now() - (record.started_at ?? core.clock.now())) / 1000,
    model: record.model,
    tool_trace: record.tool_trace,
    // Named, not spread: a spread in the middle of a literal copies the object key by key.
    missed: m.missed,
    missed_detail: m.missed_detail,
  });
}

/**
 * Steers a runner the runtime cannot hear from any more may have delivered: a lost one's (its
 * worker's receipts), or an abandoned one's (what it had taken: it may still send it to a model).
 */
function mayHaveDelivered(record: ChildRecord, settled: Settled): ReadonlySet<string> | undefined {
  if (settled.kind === 'abandoned') return record.takenSteerIds();
  if (settled.kind === 'threw' && settled.error instanceof RunnerLostError) return settled.error.maybe_delivered;
  return undefined;
}

function publishEntry(core: Core, record: ChildRecord, entry: CompletionEntry): void {
  record.finish(entry, core.clock.now());
  // Written in the same commit as the subagent.complete event that tells it (the server's).
  core.journal?.progress(record.subagent_id, record.readTail().text, record.progress);
  core.journal?.finished(record.subagent_id, revivedEntry(record, entry), core.clock.now());
  record.parent?.removeLiveChild(record);
  core.registry.retire(record);
  core.releaseQueue(record.subagent_id);
  const told = revivedEntry(record, entry);
  record.settle(told);
  core.observer.finished(record, told);
  core.emitAbout('subagent.complete', record, { entry: told });
}

/** A revived child's entry names the child it continued. */
function revivedEntry(record: ChildRecord, entry: CompletionEntry): CompletionEntry {
  return record.revived_from === undefined || entry.revived_from !== undefined ? entry : withProps(entry, { revived_from: record.revived_from });
}

/** Status matrix: an abort decides first (interrupt/timeout), then a throw, then the report. */
interface Decision {
  readonly status: FinalStatus;
  readonly error?: string;
  readonly summary: string;
  readonly exit_reason?: string;
}

function decide(record: ChildRecord, settled: Settled): Decision {
  const outcome = settled.kind === 'returned' ? settled.outcome : undefined;
  const summary = outcome?.summary ?? record.last_text;
  // A lost runner decides before a stop: the interrupt that found no worker is reported as the loss.
  if (settled.kind === 'threw' && settled.error instanceof RunnerLostError) {
    return { status: 'error', summary: record.last_text, error: settled.error.message, exit_reason: settled.error.exit_reason };
  }
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

/** A runner's return value is an outcome (a worker checks its runners' alike). */
export function isOutcome(value: unknown): value is RunOutcome {
  if (typeof value !== 'object' || value === null || !('status' in value)) return false;
  const status = value.status;
  return status === 'completed' || status === 'failed' || status === 'interrupted';
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}
