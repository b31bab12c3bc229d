// After a restart: the children the last process left running *elsewhere* (on a remote worker,
// which kept running them), rebuilt as they were and continued, not settled (docs/scale-out.md,
// "Control plane restart"). Everything else the last process left open is settled (recover.ts).
import type { ChildRecord } from '../child/record.ts';
import type { Core } from './core.ts';
import { Batch } from './delegate.ts';
import { LiveChild } from './run-child.ts';
import type { ChildJournal, CompletionEntry, Runner, Steer, StoredChild, StoredSteer } from '../types.ts';

/** How a child that still runs elsewhere continues: its runner, and what it is told once rebuilt. */
export interface Adoption {
  readonly runner: Runner;
  /**
   * The child's record is rebuilt: these steers were taken (they hold receipts) when the last
   * process stopped; `waiting`: others are queued (its worker must hear that they wait).
   */
  restored(taken: readonly Steer[], waiting: boolean): void;
  /** A delegation of this child goes on: its entries, once all are in (the child's worker waits for them). */
  delegation(delegation_id: string, results: Promise<CompletionEntry[]>): void;
  /** The delegations the child's worker waited on when the last process stopped (from its progress). */
  readonly delegations: readonly string[];
}

/** Says, for a child the journal never saw finish, whether it still runs elsewhere and how it continues. */
export type Adopter = (child: StoredChild) => Adoption | undefined;

/**
 * Which of the journal's unfinished children are adopted: running, claimed by the adopter, and
 * with a parent that is adopted too (a child whose parent is gone is settled, as in-process).
 */
export function chooseAdoptions(journal: ChildJournal, adopter: Adopter): Map<string, { child: StoredChild; adoption: Adoption }> {
  const chosen = new Map<string, { child: StoredChild; adoption: Adoption }>();
  // The journal lists them deepest first: parents are decided before their children.
  for (const child of [...journal.unfinished()].reverse()) {
    if (child.status !== 'running' || child.started_at === null) continue;
    if (child.parent_id !== null && !chosen.has(child.parent_id)) continue;
    const adoption = adopter(child);
    if (adoption) chosen.set(child.subagent_id, { child, adoption });
  }
  return chosen;
}

/**
 * Rebuilds the chosen children, parents first, each delegation's batch holding the entries its
 * other children already have (settled by now, or finished before the stop). Their records run
 * again through the queue like any child (their runners continue, they do not start).
 */
export function adoptChosen(core: Core, journal: ChildJournal, chosen: ReadonlyMap<string, { child: StoredChild; adoption: Adoption }>): void {
  const batches = new Map<string, Batch>();
  /** The batch of one delegation, made once, holding every entry its children already have. */
  const batchOf = (delegation_id: string, task_count: number, owner: StoredChild['owner'], parent_id: string | null): Batch => {
    let batch = batches.get(delegation_id);
    if (batch) return batch;
    batch = new Batch(task_count, core.hold());
    batches.set(delegation_id, batch);
    for (const sibling of journal.delegationChildren(delegation_id)) {
      if (sibling.entry && !chosen.has(sibling.subagent_id)) batch.childSettled(sibling, sibling.entry);
    }
    const results = batch.results.then((entries) => {
      core.emit('delegation.complete', { delegation_id, results: entries, src: delegation_id }, owner);
      return entries;
    });
    // The parent's worker waits for these entries (at once if none of its children is adopted).
    if (parent_id !== null) chosen.get(parent_id)?.adoption.delegation(delegation_id, results);
    return batch;
  };
  // Delegations of an adopted parent none of whose children is adopted (all finished, or settled
  // by this start): their entries are all in, and the parent's worker still waits for them.
  for (const { child, adoption } of chosen.values()) {
    for (const delegation_id of adoption.delegations) {
      const members = journal.delegationChildren(delegation_id);
      const first = members[0];
      if (first && !members.some((m) => chosen.has(m.subagent_id))) batchOf(delegation_id, first.task_count, first.owner, child.subagent_id);
    }
  }
  for (const { child, adoption } of chosen.values()) {
    const batch = batchOf(child.delegation_id, child.task_count, child.owner, child.parent_id);
    const parent: ChildRecord | null = child.parent_id === null ? null : (core.registry.get(child.parent_id) ?? null);
    const live = new LiveChild(core, {
      subagent_id: child.subagent_id,
      parent_id: child.parent_id,
      depth: child.depth,
      delegation_id: child.delegation_id,
      task_index: child.task_index,
      task_count: child.task_count,
      goal: child.goal,
      context: child.context,
      runner: adoption.runner,
      owner: child.owner,
      parent,
      timeout_ms: child.timeout_ms,
      batch,
      agent: child.agent,
      ...(child.revived_from !== undefined ? { revived_from: child.revived_from } : {}),
      adopted: { started_at: child.started_at ?? core.clock.now(), tail: child.tail },
    });
    // Its progress as it was (where it runs): a later write, or another restart, keeps it.
    live.record.progress = child.checkpoint;
    adoption.restored(
      restoreSteers(live.record, child),
      child.steers.some((x) => x.state === 'queued'),
    );
    core.queueFor(parent?.subagent_id ?? `root:${child.owner?.session_id ?? ''}`).add(live);
  }
}

/**
 * The child's undelivered steers, with their ids and seqs, in acceptance order: those it had taken
 * first (taken again here, so a delivery confirms them), then those still queued. Returns the taken.
 */
function restoreSteers(record: ChildRecord, child: StoredChild): Steer[] {
  const bySeq = [...child.steers].sort((a, b) => a.seq - b.seq);
  const restore = (s: StoredSteer) =>
    record.restoreSteer({ steer_id: s.steer_id, text: s.text, seq: s.seq, ...(s.requeued_from !== undefined ? { requeued_from: s.requeued_from } : {}) });
  // Their own seqs: the worker may hold grants of the last process, ordered by them.
  for (const s of bySeq) if (s.state === 'taken') restore(s);
  const taken = record.takeSteers();
  for (const s of bySeq) if (s.state === 'queued') restore(s);
  return taken;
}
