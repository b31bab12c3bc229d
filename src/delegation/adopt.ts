// After a restart: the children the last process left running *elsewhere* (on a remote worker,
// which kept running them), rebuilt as they were and continued, not settled (docs/scale-out.md,
// "Control plane restart"). Everything else the last process left open is settled (recover.ts).
import type { ChildRecord } from '../child/record.ts';
import type { Core } from './core.ts';
import { Batch } from './delegate.ts';
import { LiveChild } from './run-child.ts';
import type { ChildJournal, CompletionEntry, Runner, Steer, StoredChild } from '../types.ts';

/** How a child that still runs elsewhere continues: its runner, and what it is told once rebuilt. */
export interface Adoption {
  readonly runner: Runner;
  /** The child's record is rebuilt: these steers were taken (they hold receipts) when the last process stopped. */
  restored(taken: readonly Steer[]): void;
  /** A delegation of this child goes on: its entries, once all are in (the child's worker waits for them). */
  delegation(delegation_id: string, results: Promise<CompletionEntry[]>): void;
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
  for (const { child, adoption } of chosen.values()) {
    let batch = batches.get(child.delegation_id);
    if (!batch) {
      batch = new Batch(child.task_count, core.hold());
      batches.set(child.delegation_id, batch);
      for (const sibling of journal.delegationChildren(child.delegation_id)) {
        if (sibling.entry && !chosen.has(sibling.subagent_id)) batch.childSettled(sibling, sibling.entry);
      }
      const owner = child.owner;
      const delegation_id = child.delegation_id;
      const results = batch.results.then((entries) => {
        core.emit('delegation.complete', { delegation_id, results: entries, src: delegation_id }, owner);
        return entries;
      });
      const parent = child.parent_id === null ? undefined : chosen.get(child.parent_id);
      parent?.adoption.delegation(delegation_id, results);
    }
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
    adoption.restored(restoreSteers(live.record, child));
    core.queueFor(parent?.subagent_id ?? `root:${child.owner?.session_id ?? ''}`).add(live);
  }
}

/**
 * The child's undelivered steers, with their ids, in acceptance order: those it had taken first
 * (taken again here, so a delivery confirms them), then those still queued. Returns the taken.
 */
function restoreSteers(record: ChildRecord, child: StoredChild): Steer[] {
  const bySeq = [...child.steers].sort((a, b) => a.seq - b.seq);
  for (const s of bySeq) if (s.state === 'taken') record.acceptSteer(s.steer_id, s.text, s.requeued_from);
  const taken = record.takeSteers();
  for (const s of bySeq) if (s.state === 'queued') record.acceptSteer(s.steer_id, s.text, s.requeued_from);
  return taken;
}
